"""The network: a transformer encoder with a classifier on its first token; the logits the metrics score."""

import ignite.distributed as idist
import torch
from torch import nn
from transformers import AutoConfig, AutoModel, BertConfig, BertModel, PreTrainedModel

from config import Config
from data import hub_advice

# A tiny BERT for synthetic data: the real code path, at a few seconds per epoch on a CPU.
TINY_ENCODER = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
# Learning rates for `lr: null`: fine-tuning a pretrained encoder wants a small one; the tiny encoder, random,
# learns from scratch (at 5e-5 it stays at chance for a demo's minute; at 3e-3 it learns in seconds).
PRETRAINED_LR, SCRATCH_LR = 5e-5, 3e-3


class TextClassifier(nn.Module):
    """An encoder and a classifier that reads the encoder's output at the first token ([CLS])."""

    def __init__(self, encoder: PreTrainedModel, num_classes: int, dropout: float, hidden: int = 0) -> None:
        super().__init__()
        # The classifier replaces BERT's own pooler: left in place, it would be computed for nothing
        # and, receiving no gradient, would stop DistributedDataParallel.
        if getattr(encoder, "pooler", None) is not None:
            encoder.pooler = None
        self.encoder = encoder
        width = encoder.config.hidden_size
        layers: list[nn.Module] = [nn.Dropout(dropout)]
        if hidden:
            layers += [nn.Linear(width, hidden), nn.GELU(), nn.Dropout(dropout)]
            width = hidden
        self.classifier = nn.Sequential(*layers, nn.Linear(width, num_classes))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # transformers uses a 4D additive mask as it is. From the usual 2D mask it would first check
        # whether the batch has padding at all (`mask.all()`): a device-to-host read at every step,
        # which stalls a TPU, and a second compiled graph for batches without padding.
        bias = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        hidden_states = self.encoder(input_ids=input_ids, attention_mask=bias).last_hidden_state
        return self.classifier(hidden_states[:, 0])


def setup_model(config: Config, vocab_size: int, num_classes: int, pretrained: bool = True) -> TextClassifier:
    """The pretrained encoder named by ``config.model`` (a tiny random one for synthetic data) and a new
    classifier; with ``pretrained=False`` the encoder's weights are left random, for a checkpoint to fill."""
    if config.dataset == "synthetic":
        tiny = BertConfig(vocab_size=vocab_size, max_position_embeddings=config.max_length, **TINY_ENCODER)
        encoder = BertModel(tiny)
    elif not pretrained:
        with hub_advice("model", config.model):
            encoder = AutoModel.from_config(AutoConfig.from_pretrained(config.model))
    else:
        # The first process on each node downloads; the others wait, then read the cache.
        with idist.one_rank_first(local=True), hub_advice("model", config.model):
            encoder = AutoModel.from_pretrained(config.model)
    return TextClassifier(encoder, num_classes, config.dropout, config.classifier_hidden)


def learning_rate(config: Config) -> float:
    """``config.lr``, or where it is null the rate that suits the model: the tiny random encoder's for synthetic
    data, else the pretrained encoder's."""
    if config.lr is not None:
        return config.lr
    return SCRATCH_LR if config.dataset == "synthetic" else PRETRAINED_LR


def logits_of(output: torch.Tensor) -> torch.Tensor:
    """The class logits in the model's output: all of it (TextClassifier returns nothing else)."""
    return output
