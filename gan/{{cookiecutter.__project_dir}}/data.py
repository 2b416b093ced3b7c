"""The training images: CIFAR-10, MNIST, a folder of images, or offline synthetic images of the same shapes."""

from collections.abc import Callable
from functools import partial
from pathlib import Path

import ignite.distributed as idist
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets
from torchvision import transforms as T

from config import Config
from machinery.data.files import download_advice, image_folder
from machinery.data.loaders import train_loader

DATASETS = ("cifar10", "mnist", "folder", "synthetic")
# PIL image mode for each number of channels.
MODES = {1: "L", 3: "RGB"}
# Size of the synthetic training set: enough for a few short epochs.
SYNTHETIC_SIZE = 1024


def image_transform(image_size: int, channels: int) -> T.Compose:
    """Convert any image to ``channels`` x ``image_size`` x ``image_size`` with values in [-1, 1].

    [-1, 1] is the range of the generator's tanh output: real and generated images look alike in scale.
    """
    if channels not in MODES:
        raise ValueError(f"channels={channels} is not supported: use 1 (grey) or 3 (colour)")
    return T.Compose(
        [
            # A partial rather than a lambda: data loader workers may have to pickle the transform.
            T.Lambda(partial(Image.Image.convert, mode=MODES[channels])),
            T.Resize(image_size),
            T.CenterCrop(image_size),
            T.ToTensor(),
            T.Normalize([0.5] * channels, [0.5] * channels),
        ]
    )


class SyntheticImages(Dataset):
    """Offline images a generator can learn to imitate: a bright disc of random colour, size and place
    on a dark background, with a little noise (the statistics a short run can match: dark edges, a
    bright middle).

    Image ``index`` is drawn from a generator seeded with ``index``: the same image at every epoch and
    in every process. Like the real datasets, it draws a PIL image and applies the transform (the
    label, 0, is not used).
    """

    side = 64  # drawn at 64x64, then resized like any image

    def __init__(self, size: int, transform: Callable[[Image.Image], torch.Tensor]) -> None:
        self.size, self.transform = size, transform
        self.y, self.x = torch.meshgrid(torch.arange(self.side), torch.arange(self.side), indexing="ij")

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        rng = torch.Generator().manual_seed(index)
        side = self.side
        centre = side / 2 + (torch.rand(2, generator=rng) - 0.5) * side / 4
        radius = side * (0.2 + 0.15 * float(torch.rand(1, generator=rng)))
        inside = ((self.y - centre[0]) ** 2 + (self.x - centre[1]) ** 2 <= radius**2).float()
        colour = 0.5 + 0.5 * torch.rand(3, 1, 1, generator=rng)
        image = 0.1 + inside * colour * 0.8 + 0.03 * torch.randn(3, side, side, generator=rng)
        pixels = (image.clamp(0, 1) * 255 + 0.5).to(torch.uint8).permute(1, 2, 0).numpy()  # rounded
        return self.transform(Image.fromarray(pixels)), 0


def get_dataset(name: str, data_path: str, image_size: int, channels: int) -> Dataset:
    """Return the training set; its labels, if any, are not used."""
    transform = image_transform(image_size, channels)
    # CIFAR-10 and MNIST are downloaded into data_path unless their files are there.
    if name == "cifar10":
        with download_advice(name, Path(data_path) / "cifar-10-batches-py"):
            return datasets.CIFAR10(data_path, train=True, download=True, transform=transform)
    if name == "mnist":
        with download_advice(name, Path(data_path) / "MNIST" / "raw"):
            return datasets.MNIST(data_path, train=True, download=True, transform=transform)
    if name == "folder":
        # Every image under data_path, in one or more sub-folders (torchvision's ImageFolder layout).
        return image_folder(Path(data_path), transform, "dataset: folder reads the images in data_path's sub-folders")
    if name == "synthetic":
        # Learnable images made on the fly: no download; the same transform gives the real data's shapes.
        return SyntheticImages(SYNTHETIC_SIZE, transform)
    raise ValueError(f"dataset={name!r} is not supported: use one of {DATASETS}")


def setup_data(config: Config) -> DataLoader:
    """Build the training loader, sharded across processes in distributed training."""
    # Only the first process on each node downloads; the others wait, then read the files.
    with idist.one_rank_first(local=True):
        dataset = get_dataset(config.dataset, config.data_path, config.image_size, config.channels)
    return train_loader(dataset, config.batch_size, config.num_workers)
