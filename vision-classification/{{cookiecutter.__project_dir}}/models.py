"""The network, and which of its outputs are the logits the metrics score."""

from urllib.error import URLError

import ignite.distributed as idist
import torch
from torch import nn
from torchvision import models


def setup_model(name: str, num_classes: int, weights: str | None = None) -> nn.Module:
    """Build any torchvision classification model by name (e.g. ``resnet18``) with one output per class of the
    data: randomly initialised, or with ``weights`` (``"DEFAULT"``, or a name such as ``"IMAGENET1K_V1"``) its
    pretrained weights (downloaded once into torch's cache) and a new last layer for these classes.
    """
    if weights is None:
        return models.get_model(name, weights=None, num_classes=num_classes)
    choices = models.get_model_weights(name)  # the model's weights enum; DEFAULT is an alias in it
    available = ["DEFAULT", *(choice.name for choice in choices)]
    if weights not in available:
        raise ValueError(f"weights={weights!r} is not one of {name}'s: use one of {available}, or null")
    chosen = choices[weights]
    # The first process on each node downloads; the others wait, then read the cache.
    with idist.one_rank_first(local=True):
        try:
            model = models.get_model(name, weights=chosen)
        except URLError as error:  # no network
            cached = f"{torch.hub.get_dir()}/checkpoints/{chosen.url.rsplit('/', 1)[-1]}"
            raise RuntimeError(
                f"weights={weights!r}: downloading {name}'s {chosen.name} weights from {chosen.url} failed ({error}). "
                f"Put that file at {cached}, or set `weights: null` to start from random weights."
            ) from error
    return with_new_head(model, num_classes)


def with_new_head(model: nn.Module, num_classes: int) -> nn.Module:
    """``model`` with its last layer, the classifier (a Linear layer, or SqueezeNet's 1 x 1 convolution), replaced
    by a randomly initialised one with an output per class: pretrained on other classes, it is retrained."""
    layers = [(name, module) for name, module in model.named_modules() if isinstance(module, nn.Linear | nn.Conv2d)]
    name, layer = layers[-1]
    bias = layer.bias is not None
    if isinstance(layer, nn.Linear):
        head = nn.Linear(layer.in_features, num_classes, bias=bias)
    else:
        head = nn.Conv2d(layer.in_channels, num_classes, layer.kernel_size, layer.stride, layer.padding, bias=bias)
    parent, _, attribute = name.rpartition(".")
    setattr(model.get_submodule(parent), attribute, head)
    return model


def logits_of(output: torch.Tensor) -> torch.Tensor:
    """The class logits in the model's output: all of it (a model returning more would pick them out here)."""
    return output
