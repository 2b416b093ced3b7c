"""The network, its loss, and the logits the metrics score."""

import inspect

import torch
from torch import nn
from torchvision import models

from data import IGNORE_INDEX


def setup_model(name: str, num_classes: int, weights_backbone: str | None = None) -> nn.Module:
    """Build any torchvision segmentation model by name (e.g. ``deeplabv3_resnet50``), randomly initialised,
    with one output per class and pixel, and its auxiliary head where the model has one.

    ``weights_backbone`` (e.g. ``"DEFAULT"``) starts the backbone from its ImageNet weights (a download).
    """
    builder = models.get_model_builder(name)
    # DeepLabV3 and FCN have an auxiliary head, on an earlier layer (it helps train the backbone); LR-ASPP has none.
    aux = {"aux_loss": True} if "aux_loss" in inspect.signature(builder).parameters else {}
    return builder(weights=None, weights_backbone=weights_backbone, num_classes=num_classes, **aux)


class SegmentationLoss(nn.Module):
    """Cross-entropy per pixel of the model's main logits, plus ``aux_weight`` times its auxiliary head's.

    torchvision's segmentation models return a dict: ``"out"``, and ``"aux"`` where they have that head.
    Pixels labelled ``ignore_index`` (VOC's object borders) count for nothing.
    """

    def __init__(self, aux_weight: float, ignore_index: int = IGNORE_INDEX) -> None:
        super().__init__()
        self.aux_weight, self.ignore_index = aux_weight, ignore_index
        self.cross_entropy = nn.CrossEntropyLoss(ignore_index=ignore_index)

    def forward(self, outputs: dict[str, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
        loss = self.cross_entropy(outputs["out"], targets)
        if "aux" in outputs:
            loss = loss + self.aux_weight * self.cross_entropy(outputs["aux"], targets)
        return loss


def logits_of(outputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The logits per pixel that the metrics score: the main head's (torchvision's segmentation models return a
    dict: ``"out"``, and ``"aux"`` where they have that head)."""
    return outputs["out"]
