"""The network, and which of its outputs are the logits the metrics score."""

import torch
from torch import nn
from torchvision import models


def setup_model(name: str, num_classes: int) -> nn.Module:
    """Build any torchvision classification model by name (e.g. ``resnet18``), randomly initialised,
    with one output per class of the data.
    """
    return models.get_model(name, weights=None, num_classes=num_classes)


def logits_of(output: torch.Tensor) -> torch.Tensor:
    """The class logits in the model's output: all of it (a model returning more would pick them out here)."""
    return output
