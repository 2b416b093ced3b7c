"""The network, its loss, and the logits the metrics score."""

import inspect

import torch
from torch import nn
from torchvision import models
from torchvision.models import WeightsEnum

from data import IGNORE_INDEX, MEAN, STD, Statistics


def setup_model(name: str, num_classes: int, weights_backbone: str | None = None) -> nn.Module:
    """Any torchvision segmentation model by name (e.g. ``deeplabv3_resnet50``), randomly initialised, with one output
    per class and pixel and its auxiliary head where it has one. ``weights_backbone`` (e.g. ``"DEFAULT"``) starts the
    backbone from its ImageNet weights (a download), whose own statistics normalise the images (``statistics``)."""
    builder = models.get_model_builder(name)
    # DeepLabV3 and FCN have an auxiliary head, on an earlier layer (it helps train the backbone); LR-ASPP has none.
    aux = {"aux_loss": True} if "aux_loss" in inspect.signature(builder).parameters else {}
    backbone = backbone_weights(name, weights_backbone)
    return builder(weights=None, weights_backbone=backbone, num_classes=num_classes, **aux)


def backbone_weights(name: str, weights_backbone: str | None) -> WeightsEnum | None:
    """The pretrained weights of the model's backbone that ``weights_backbone`` names (``"DEFAULT"`` or one of
    torchvision's names for them, such as ``"IMAGENET1K_V1"``), or None for random ones (null)."""
    if weights_backbone is None:
        return None
    # The builder's default backbone weights are a member of the backbone's weights enum (ResNet50_Weights, ...).
    choices = type(inspect.signature(models.get_model_builder(name)).parameters["weights_backbone"].default)
    available = ["DEFAULT", *(choice.name for choice in choices)]
    if weights_backbone not in available:
        raise ValueError(
            f"weights_backbone={weights_backbone!r} is not one of {name}'s backbone's: use one of {available}, or null"
        )
    return choices[weights_backbone]


def statistics(weights: WeightsEnum | None) -> Statistics:
    """The mean and standard deviation per channel that images are normalised with: those the backbone's pretrained
    ``weights`` were trained with (torchvision's ``weights.transforms()``), or ImageNet's (``data.MEAN``, ``STD``)."""
    if weights is None:
        return MEAN, STD
    preset = weights.transforms()
    return tuple(preset.mean), tuple(preset.std)


class SegmentationLoss(nn.Module):
    """Cross-entropy per pixel of the model's main logits (``"out"`` of torchvision's dict), plus ``aux_weight`` times
    its auxiliary head's (``"aux"``, where it has one); pixels labelled ``ignore_index`` count for nothing."""

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
