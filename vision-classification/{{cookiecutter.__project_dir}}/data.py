"""Datasets and data loaders: CIFAR-10, your own image folders, or offline synthetic images of CIFAR-10's shapes."""

import colorsys
import math
from collections.abc import Callable
from pathlib import Path

import ignite.distributed as idist
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets
from torchvision import transforms as T
from torchvision.models import WeightsEnum

from config import Config
from machinery.data.files import download_advice, image_folder
from machinery.data.loaders import eval_loader, train_loader
from models import pretrained_weights

# CIFAR-10 statistics, used for every dataset so a randomly initialised model sees the same input scale
# (pretrained weights bring the statistics they were trained with: see image_transforms).
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
IMAGE_SIZE = (3, 32, 32)  # CIFAR-10's and the synthetic images'
NUM_CLASSES = 10  # CIFAR-10's and the synthetic images' (a folder's are its class folders)
# A transform of an image (PIL) to the model's input.
Transform = Callable[[Image.Image], torch.Tensor]
# Sizes of the synthetic train and eval sets: enough for a few short epochs.
SYNTHETIC_SIZES = (1024, 256)


class SyntheticImages(Dataset):
    """Offline images of CIFAR-10's shape that a model can learn: each class has its own colour and
    stripe direction, under random brightness, stripe phase and pixel noise.

    Image ``index`` is drawn from a generator seeded with ``seed`` and ``index``: the same image at
    every epoch and in every process, with no file and no download. Datasets of other seeds (the train
    and eval sets) share no image.
    """

    classes = [str(label) for label in range(NUM_CLASSES)]

    def __init__(self, size: int, seed: int, transform: Transform) -> None:
        self.size, self.seed, self.transform = size, seed, transform
        self.y, self.x = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        # CPU generators keep 32 bits of a seed: seeds a million apart give sets of up to a million
        # images each their own images.
        rng = torch.Generator().manual_seed(self.seed * 1_000_000 + index)
        label = int(torch.randint(NUM_CLASSES, (1,), generator=rng))
        colour = torch.tensor(colorsys.hsv_to_rgb(label / NUM_CLASSES, 0.8, 1.0)).view(3, 1, 1)
        # Stripes across the image, in a direction of the class's own (3 periods over the image).
        angle = math.pi * label / NUM_CLASSES
        phase = 2 * math.pi * float(torch.rand(1, generator=rng))
        stripes = torch.sin(2 * math.pi * 3 * (self.x * math.cos(angle) + self.y * math.sin(angle)) / 32 + phase)
        brightness = 0.6 + 0.4 * float(torch.rand(1, generator=rng))
        image = colour * brightness * (0.75 + 0.25 * stripes) + 0.08 * torch.randn(IMAGE_SIZE, generator=rng)
        pixels = (image.clamp(0, 1) * 255 + 0.5).to(torch.uint8).permute(1, 2, 0).numpy()  # rounded
        # A PIL image, as torchvision's CIFAR10 gives: the same transforms apply to both.
        return self.transform(Image.fromarray(pixels)), label


def get_datasets(
    name: str, data_path: str, image_size: int = 32, weights: WeightsEnum | None = None
) -> tuple[Dataset, Dataset]:
    """Return the train and eval datasets, with augmentation on the train set only, in the transforms of a model
    with ``weights`` (pretrained ones, or None: see ``image_transforms``).

    Each has ``classes``: the class names, in the order of the model's outputs.
    """
    train_transform, eval_transform = image_transforms(image_size, weights)
    if name == "folder":
        return image_folders(Path(data_path), train_transform, eval_transform)
    if name == "cifar10":
        # Downloaded into data_path unless its files are there (then only their checksums are read).
        with download_advice(name, Path(data_path) / "cifar-10-batches-py"):
            train = datasets.CIFAR10(data_path, train=True, download=True, transform=train_transform)
            evaluation = datasets.CIFAR10(data_path, train=False, download=True, transform=eval_transform)
    elif name == "synthetic":
        # Learnable images made on the fly: no download, the shapes of CIFAR-10; other images for eval.
        train_size, eval_size = SYNTHETIC_SIZES
        train = SyntheticImages(train_size, seed=0, transform=train_transform)
        evaluation = SyntheticImages(eval_size, seed=1, transform=eval_transform)
    else:
        raise ValueError(f"dataset={name!r} is not supported: use 'cifar10', 'folder' or 'synthetic'")
    return train, evaluation


def image_transforms(image_size: int, weights: WeightsEnum | None = None) -> tuple[Transform, Transform]:
    """The train transform (augmented) and the eval one, which predict.py uses too: any image to the model's input.

    With random weights (``weights`` None), a tensor of 3 x ``image_size`` x ``image_size`` normalised with
    CIFAR-10's statistics (CIFAR-10's images are 32 x 32 already). With pretrained ``weights``, their own
    preprocessing (torchvision's ``weights.transforms()``): resized to their resize size (the shorter side), the
    centre cropped to their crop size (in training a random crop), normalised with the mean and standard deviation
    they were trained with; ``image_size`` is not used.
    """
    if weights is not None:
        preset = weights.transforms()
        resize = T.Resize(preset.resize_size, interpolation=preset.interpolation, antialias=preset.antialias)
        normalize = T.Normalize(preset.mean, preset.std)
        augment = [T.RandomCrop(preset.crop_size), T.RandomHorizontalFlip()]
        train = T.Compose([resize, *augment, T.ToTensor(), normalize])
        evaluation = T.Compose([resize, T.CenterCrop(preset.crop_size), T.ToTensor(), normalize])
        return train, evaluation
    size = (image_size, image_size)
    augment = [T.RandomCrop(size, padding=image_size // 8), T.RandomHorizontalFlip()]
    train = T.Compose([T.Resize(size), *augment, T.ToTensor(), T.Normalize(MEAN, STD)])
    evaluation = T.Compose([T.Resize(size), T.ToTensor(), T.Normalize(MEAN, STD)])
    return train, evaluation


def input_size(image_size: int, weights: WeightsEnum | None = None) -> int:
    """The side of the model's square input images: ``image_size``, or with pretrained ``weights`` their crop size."""
    return image_size if weights is None else weights.transforms().crop_size[0]


def image_folders(root: Path, train_transform: Transform, eval_transform: Transform) -> tuple[Dataset, Dataset]:
    """Your images: ``root/train/<class>/*`` and ``root/val/<class>/*`` (torchvision's ImageFolder layout), of
    any size and mode (each is read as RGB); the class names are the folders'."""
    layout = "dataset: folder reads <data_path>/train/<class>/* and <data_path>/val/<class>/*"
    train = image_folder(root / "train", train_transform, layout)
    evaluation = image_folder(root / "val", eval_transform, layout)
    if evaluation.classes != train.classes:
        raise ValueError(
            f"{root / 'val'} and {root / 'train'} must hold the same class folders: "
            f"val has {evaluation.classes}, train has {train.classes}"
        )
    if len(train.classes) < 2:
        raise ValueError(f"{root / 'train'} must hold a folder per class, two at least: it has {train.classes}")
    return train, evaluation


def setup_data(config: Config) -> tuple[DataLoader, DataLoader, list[str]]:
    """Build the train and eval loaders, sharded across processes in distributed training; and the class names."""
    # Only the first process on each node downloads; the others wait, then read the files.
    with idist.one_rank_first(local=True):
        weights = pretrained_weights(config.model, config.weights)
        train, evaluation = get_datasets(config.dataset, config.data_path, config.image_size, weights)
    batches = train_loader(train, config.batch_size, config.num_workers)
    return batches, eval_loader(evaluation, config.eval_batch_size, config.num_workers), list(train.classes)


# A batch as the loaders give it: images and labels.
Batch = tuple[torch.Tensor, torch.Tensor]


def prepare_batch(batch: Batch, device: torch.device) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """The model's inputs and the labels of a batch, on the device."""
    images, labels = (tensor.to(device, non_blocking=True) for tensor in batch)
    return (images,), labels
