"""Tokenizer, datasets and data loaders: IMDB reviews, or offline synthetic reviews."""

import os
import random

import ignite.distributed as idist
import torch
from datasets import Dataset, load_dataset
from torch.utils.data import DataLoader
from transformers import AutoTokenizer, BertTokenizer, PreTrainedTokenizerBase

from config import Config
from machinery.loaders import eval_loader, train_loader

# Texts are tokenized before the data loader forks its workers, which never tokenize: without this,
# the tokenizers library warns in every worker that it turns its own threads off.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CLASSES = ["negative", "positive"]  # IMDB's labels 0 and 1, and the synthetic reviews'
NUM_CLASSES = len(CLASSES)
# Sizes of the synthetic train and eval sets: enough for a few short epochs.
SYNTHETIC_SIZES = (1024, 256)
# The synthetic reviews' words: filler, and the sentiment words that give each review its label.
FILLER = ("the", "a", "this", "film", "movie", "plot", "story", "acting", "scene", "was", "is", "and", "very")
SENTIMENT = (("bad", "awful", "boring", "dull", "weak"), ("good", "great", "wonderful", "moving", "fun"))


def setup_tokenizer(config: Config) -> PreTrainedTokenizerBase:
    """The pretrained model's tokenizer, or for synthetic data a BERT tokenizer built here."""
    if config.dataset == "synthetic":
        special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        words = special + sorted({*FILLER, *SENTIMENT[0], *SENTIMENT[1]})
        return BertTokenizer(vocab={word: index for index, word in enumerate(words)})
    # The first process on each node downloads; the others wait, then read the cache.
    with idist.one_rank_first(local=True):
        return AutoTokenizer.from_pretrained(config.model)


def synthetic_reviews(size: int, seed: int, max_words: int) -> Dataset:
    """Random reviews of 10 to ``max_words`` words (at most 400); three sentiment words among them give
    the label. Every review fits ``max_length`` tokens (one a word), so its label is in what the model reads.
    """
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(size):
        label = rng.randrange(NUM_CLASSES)
        filler = rng.randint(7, max(7, min(max_words, 400) - 3))
        words = rng.choices(FILLER, k=filler) + rng.choices(SENTIMENT[label], k=3)
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append(label)
    return Dataset.from_dict({"text": texts, "label": labels})


def get_datasets(config: Config, tokenizer: PreTrainedTokenizerBase) -> tuple[Dataset, Dataset]:
    """Return the tokenized train and eval sets, whose items hold input_ids, attention_mask and label."""
    if config.dataset == "imdb":
        imdb = load_dataset("stanfordnlp/imdb", cache_dir=config.data_path)
        train, evaluation = imdb["train"], imdb["test"]
    elif config.dataset == "synthetic":
        train_size, eval_size = SYNTHETIC_SIZES
        max_words = config.max_length - 2  # [CLS] and [SEP] take two of the tokens
        train, evaluation = synthetic_reviews(train_size, 0, max_words), synthetic_reviews(eval_size, 1, max_words)
    else:
        raise ValueError(f"dataset={config.dataset!r} is not supported: use 'imdb' or 'synthetic'")

    max_length = config.max_length  # not the whole config: datasets caches the result by what `tokenize` uses

    def tokenize(batch: dict[str, list]) -> dict[str, list]:
        # Every text is padded or truncated to max_length: one shape for every batch, so XLA
        # compiles the training step once.
        return tokenizer(batch["text"], padding="max_length", truncation=True, max_length=max_length)

    columns = ["input_ids", "attention_mask", "label"]
    train = train.map(tokenize, batched=True).with_format("torch", columns)
    evaluation = evaluation.map(tokenize, batched=True).with_format("torch", columns)
    return train, evaluation


def setup_data(config: Config, tokenizer: PreTrainedTokenizerBase) -> tuple[DataLoader, DataLoader]:
    """Build the train and eval loaders, sharded across processes in distributed training."""
    # The first process on each node downloads and tokenizes; the others then read its cache.
    with idist.one_rank_first(local=True):
        train, evaluation = get_datasets(config, tokenizer)
    return train_loader(train, config), eval_loader(evaluation, config)


# A batch as the loaders give it: token ids, attention masks and labels, by name.
Batch = dict[str, torch.Tensor]


def prepare_batch(batch: Batch, device: torch.device) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """The model's inputs (token ids, attention mask) and the labels of a batch, on the device."""
    input_ids, attention_mask, labels = (
        batch[key].to(device, non_blocking=True) for key in ("input_ids", "attention_mask", "label")
    )
    return (input_ids, attention_mask), labels
