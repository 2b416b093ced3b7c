"""The network, and which of its outputs are the logits the metrics score."""

from urllib.error import URLError

import ignite.distributed as idist
import torch
from torch import nn
from torchvision import models
from torchvision.models import WeightsEnum

# The smallest image_size a randomly initialised model of each family trains at (the others take any size): under
# it a pooling or convolution window is larger than the feature map it slides on. ViT's least is its patch size.
MIN_IMAGE_SIZE = {
    "alexnet": 63,
    "convnext": 32,
    "densenet": 29,
    "googlenet": 15,
    "inception_v3": 75,
    "squeezenet1_0": 21,
    "squeezenet1_1": 17,
    "swin": 4,
    "vgg": 32,
}
# MaxViT's attention takes windows of 7 x 7 pixels of each of its 4 stages' feature maps.
MAXVIT_PARTITION = 7


def setup_model(name: str, num_classes: int, weights: str | None = None, image_size: int = 32) -> nn.Module:
    """Build any torchvision classification model by name (e.g. ``resnet18``) with one output per class of the
    data: randomly initialised for images of ``image_size`` (ViT and MaxViT are built for one size), or with
    ``weights`` (``"DEFAULT"``, or a name such as ``"IMAGENET1K_V1"``) its pretrained weights (downloaded once into
    torch's cache; their own image size, see ``data.image_transforms``) and a new last layer for these classes.
    """
    chosen = pretrained_weights(name, weights)
    if chosen is None:
        return models.get_model(name, weights=None, num_classes=num_classes, **build_options(name, image_size))
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


def pretrained_weights(name: str, weights: str | None) -> WeightsEnum | None:
    """The model's pretrained weights that ``weights`` names (``"DEFAULT"`` or one of torchvision's names for them,
    such as ``"IMAGENET1K_V1"``), or None for random ones (``weights`` null)."""
    if weights is None:
        return None
    choices = models.get_model_weights(name)  # the model's weights enum; DEFAULT is an alias in it
    available = ["DEFAULT", *(choice.name for choice in choices)]
    if weights not in available:
        raise ValueError(f"weights={weights!r} is not one of {name}'s: use one of {available}, or null")
    return choices[weights]


def build_options(name: str, image_size: int) -> dict:
    """The builder's options for a randomly initialised model: the image size of those built for one (ViT,
    MaxViT); and no auxiliary classifiers for GoogLeNet and Inception-v3, as their pretrained networks have none
    (their output in training is then the logits alone, as every other model's)."""
    if name in ("googlenet", "inception_v3"):
        return {"aux_logits": False, "init_weights": True}
    if name.startswith("vit_"):
        return {"image_size": image_size}
    if name.startswith("maxvit_"):
        return {"input_size": (image_size, image_size)}
    return {}


def image_size_problem(name: str, image_size: int) -> str | None:
    """Why the randomly initialised model ``name`` cannot train on images of ``image_size`` x ``image_size``
    pixels, and which sizes it takes; None where it can."""
    if name.startswith("vit_"):
        patch = int(name.rsplit("_", 1)[-1])  # vit_b_16: patches of 16 x 16 pixels
        if image_size % patch:
            return f"{name} cuts images into patches of {patch} x {patch} pixels: use a multiple of {patch}"
    elif name.startswith("maxvit_"):
        size, sizes = (image_size + 1) // 2, []  # after the stem: a 3 x 3 convolution of stride 2 halves, rounding up
        for _ in range(4):  # each of the 4 stages halves it again
            size = (size + 1) // 2
            sizes.append(size)
        if any(size % MAXVIT_PARTITION for size in sizes):
            return (
                f"{name} attends over windows of {MAXVIT_PARTITION} x {MAXVIT_PARTITION} in 4 feature maps (here "
                f"{' > '.join(map(str, sizes))} pixels a side), each a multiple of {MAXVIT_PARTITION}: use 224 "
                "(or 221 to 224; any n x 224 less 0 to 3, as 445 to 448)"
            )
    else:
        least = next((size for family, size in MIN_IMAGE_SIZE.items() if name.startswith(family)), 1)
        if image_size < least:
            return f"{name}'s feature maps shrink below its pooling windows under {least} pixels: use {least} or more"
    return None


def check_model(name: str, image_size: int, weights: str | None) -> None:
    """Stop, saying why and what to set, where the model cannot train on images of ``image_size`` (with weights
    null: pretrained weights bring their own size), before the run writes anything."""
    problem = image_size_problem(name, image_size) if weights is None else None
    if problem is not None:
        raise SystemExit(f"image_size={image_size} does not fit model={name!r}: {problem}; or set weights: DEFAULT")


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
