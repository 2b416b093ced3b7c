"""Tokenizer, datasets and data loaders: IMDB reviews, any Hugging Face dataset, your own CSV, JSON Lines or
Parquet files, or offline synthetic reviews. The classes come from the data."""

import os
import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import ignite.distributed as idist
import torch
from datasets import ClassLabel, Dataset, Features, Value, load_dataset
from torch.utils.data import DataLoader
from transformers import AutoTokenizer, BatchEncoding, BertTokenizer, PreTrainedTokenizerBase

from config import Config
from machinery.data.loaders import eval_loader, train_loader

# Texts are tokenized before the data loader forks its workers, which never tokenize: without this,
# the tokenizers library warns in every worker that it turns its own threads off.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Datasets known by a short name: their name on the Hugging Face Hub.
HUB_NAMES = {"imdb": "stanfordnlp/imdb"}
# `dataset: files` reads <data_path>/<split>.<extension> with the `datasets` loader of its format.
FILE_FORMATS = {".csv": "csv", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}
CLASSES = ["negative", "positive"]  # the synthetic reviews' labels 0 and 1 (IMDB's are named neg and pos)
NUM_CLASSES = len(CLASSES)
SYNTHETIC_SIZES = (1024, 256)  # the synthetic train and eval sets: enough for a few short epochs
# The synthetic reviews' words: filler, and the sentiment words that give each review its label.
FILLER = ("the", "a", "this", "film", "movie", "plot", "story", "acting", "scene", "was", "is", "and", "very")
SENTIMENT = (("bad", "awful", "boring", "dull", "weak"), ("good", "great", "wonderful", "moving", "fun"))


@contextmanager
def hub_advice(key: str, name: str, configuration: str | None = None) -> Iterator[None]:
    """Turn a failed load of ``name`` (config key ``key``) from the Hugging Face Hub into advice."""
    try:
        yield
    except OSError as error:  # not on the Hub (a typo, a private repository), or no network and no cached copy
        raise RuntimeError(
            f"{key}={name!r} could not be loaded from the Hugging Face Hub or its cache ({error}). Check the name "
            "and the network, or set `dataset: synthetic` to train offline."
        ) from error
    except ValueError as error:  # a dataset's configuration left out where it has several, or one it lacks
        found = re.match(r"(Config name is missing|BuilderConfig .* not found).*?(\[.*?\])", str(error), re.DOTALL)
        if not found:
            raise
        raise ValueError(f"dataset_config={configuration!r}: {name} has the configurations {found[2]}") from error


def setup_tokenizer(config: Config) -> PreTrainedTokenizerBase:
    """The pretrained model's tokenizer, or for synthetic data a BERT tokenizer built here."""
    if config.dataset == "synthetic":
        special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        words = special + sorted({*FILLER, *SENTIMENT[0], *SENTIMENT[1]})
        return BertTokenizer(vocab={word: index for index, word in enumerate(words)})
    # The first process on each node downloads; the others wait, then read the cache.
    with idist.one_rank_first(local=True), hub_advice("model", config.model):
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
    features = Features(text=Value("string"), label=ClassLabel(names=CLASSES))
    return Dataset.from_dict({"text": texts, "label": labels}, features=features)


def load_splits(config: Config) -> tuple[tuple[str, Dataset], tuple[str, Dataset]]:
    """The train and eval splits as the data holds them, each with the words that name it in errors."""
    splits = (config.train_split, config.eval_split)
    if config.dataset in ("synthetic", "files") and config.dataset_config is not None:
        problem = f"dataset_config={config.dataset_config!r}: dataset={config.dataset!r} has no configurations"
        raise ValueError(f"{problem}; set `dataset_config: null`")
    if config.dataset == "synthetic":
        train_size, eval_size = SYNTHETIC_SIZES
        max_words = config.max_length - 2  # [CLS] and [SEP] take two of the tokens
        train, evaluation = synthetic_reviews(train_size, 0, max_words), synthetic_reviews(eval_size, 1, max_words)
        return ("the synthetic train set", train), ("the synthetic eval set", evaluation)
    if config.dataset == "files":
        paths = [data_file(config.data_path, split) for split in splits]
        return tuple((str(path), read_file(path)) for path in paths)
    name = HUB_NAMES.get(config.dataset, config.dataset)
    with hub_advice("dataset", config.dataset, config.dataset_config):
        loaded = load_dataset(name, config.dataset_config, cache_dir=config.data_path)
    for key, split in zip(("train_split", "eval_split"), splits, strict=True):
        if split not in loaded:
            raise ValueError(f"{key}={split!r}: {name} has no such split; its splits are {list(loaded)}")
    return tuple((f"{name}'s {split} split", loaded[split]) for split in splits)


def data_file(folder: str, split: str) -> Path:
    """The one file of ``split`` in ``folder``: <split>.csv, .jsonl, .json or .parquet."""
    found = sorted(path for path in Path(folder).glob(f"{split}.*") if path.suffix in FILE_FORMATS)
    if len(found) != 1:
        kinds = ", ".join(f"{split}{suffix}" for suffix in FILE_FORMATS)
        what = f"{len(found)} of them: {[path.name for path in found]}" if found else "none"
        raise FileNotFoundError(f"dataset='files' reads one file of each split from {folder}: {kinds} ({what})")
    return found[0]


def read_file(path: Path) -> Dataset:
    """A CSV, JSON Lines or Parquet file as a dataset; a file its format's reader refuses is named."""
    try:
        return load_dataset(FILE_FORMATS[path.suffix], data_files=str(path), split="train")
    except Exception as error:  # the reader's own errors (pandas', pyarrow's) do not name the file
        raise ValueError(f"cannot read {path} as {FILE_FORMATS[path.suffix]}: {error}") from error


def class_names(split: Dataset, column: str) -> list[str]:
    """The classes: a ClassLabel column's names, else the column's distinct values, sorted."""
    feature = split.features[column]
    if isinstance(feature, ClassLabel):
        return list(feature.names)
    return [str(label) for label in sorted(label for label in split.unique(column) if label is not None)]


def labelled(split: Dataset, where: str, config: Config, classes: list[str]) -> Dataset:
    """``split`` as two columns, its texts in ``text`` and their class indices in ``label``; a missing column, a
    text that is not one and a label that is not one of ``classes`` are refused, naming the split and the row."""
    text, label = config.text_column, config.label_column
    for key, column in (("text_column", text), ("label_column", label)):
        if column not in split.column_names:
            raise ValueError(f"{where} has no column {column!r} ({key}); its columns are {split.column_names}")
    is_index = isinstance(split.features[label], ClassLabel)  # its values are class indices already
    index = {(value if is_index else name): value for value, name in enumerate(classes)}

    def to_index(batch: dict[str, list], rows: list[int]) -> dict[str, list]:
        labels = []
        for row, words, value in zip(rows, batch[text], batch[label], strict=True):
            if not isinstance(words, str):
                raise ValueError(f"{where}, row {row + 1}: {text!r} holds {words!r}, not a text")
            key = value if is_index else str(value)
            if value is None or key not in index:
                raise ValueError(f"{where}, row {row + 1}: label {value!r} is not one of the classes {classes}")
            labels.append(index[key])
        return {"text": batch[text], "label": labels}

    # The columns' types given: `datasets` would keep a `label` column of class names a column of strings.
    features = Features(text=Value("string"), label=Value("int64"))
    return split.map(to_index, batched=True, with_indices=True, remove_columns=split.column_names, features=features)


def encode(tokenizer: PreTrainedTokenizerBase, texts: list[str], max_length: int) -> BatchEncoding:
    """The texts' token ids and attention masks, as training and predict.py give them to the model: every text
    padded or truncated to ``max_length`` (one shape for every batch, so XLA compiles the training step once)."""
    return tokenizer(texts, padding="max_length", truncation=True, max_length=max_length)


def get_datasets(config: Config, tokenizer: PreTrainedTokenizerBase) -> tuple[Dataset, Dataset, list[str]]:
    """The tokenized train and eval sets (items of input_ids, attention_mask and label) and the class names."""
    (train_name, train), (eval_name, evaluation) = load_splits(config)
    classes = class_names(train, config.label_column) if config.label_column in train.column_names else []
    train = labelled(train, train_name, config, classes)
    if len(classes) < 2:
        problem = f"{config.label_column!r} holds the classes {classes}"
        raise ValueError(f"{train_name}: {problem}; a classifier needs two classes at least")
    evaluation = labelled(evaluation, eval_name, config, classes)
    max_length = config.max_length  # not the config: datasets caches by what `tokenize` uses

    def tokenize(batch: dict[str, list]) -> dict[str, list]:
        return encode(tokenizer, batch["text"], max_length)

    columns = ["input_ids", "attention_mask", "label"]
    train = train.map(tokenize, batched=True).with_format("torch", columns)
    evaluation = evaluation.map(tokenize, batched=True).with_format("torch", columns)
    return train, evaluation, classes


def setup_data(config: Config, tokenizer: PreTrainedTokenizerBase) -> tuple[DataLoader, DataLoader, list[str]]:
    """The train and eval loaders (sharded across processes in distributed training) and the class names."""
    # The first process on each node downloads and tokenizes; the others then read its cache.
    with idist.one_rank_first(local=True):
        train, evaluation, classes = get_datasets(config, tokenizer)
    batches = train_loader(train, config.batch_size, config.num_workers)
    return batches, eval_loader(evaluation, config.eval_batch_size, config.num_workers), classes


# A batch as the loaders give it: token ids, attention masks and labels, by name.
Batch = dict[str, torch.Tensor]


def prepare_batch(batch: Batch, device: torch.device) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """The model's inputs (token ids, attention mask) and the labels of a batch, on the device."""
    input_ids, attention_mask, labels = (
        batch[key].to(device, non_blocking=True) for key in ("input_ids", "attention_mask", "label")
    )
    return (input_ids, attention_mask), labels
