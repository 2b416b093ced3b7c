"""The training images: CIFAR-10, MNIST, a folder of images, or offline synthetic images of the same shapes."""

from functools import partial
from types import SimpleNamespace

import ignite.distributed as idist
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets
from torchvision import transforms as T

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


def get_dataset(name: str, data_path: str, image_size: int, channels: int) -> Dataset:
    """Return the training set; its labels, if any, are not used."""
    transform = image_transform(image_size, channels)
    if name == "cifar10":
        return datasets.CIFAR10(data_path, train=True, download=True, transform=transform)
    if name == "mnist":
        return datasets.MNIST(data_path, train=True, download=True, transform=transform)
    if name == "folder":
        # Every image under data_path, in one or more sub-folders (torchvision's ImageFolder layout).
        return datasets.ImageFolder(data_path, transform=transform)
    if name == "synthetic":
        # Random images, generated on the fly: no download, the shapes of the real data.
        return datasets.FakeData(SYNTHETIC_SIZE, (channels, image_size, image_size), transform=transform)
    raise ValueError(f"dataset={name!r} is not supported: use one of {DATASETS}")


def setup_data(config: SimpleNamespace) -> DataLoader:
    """Build the training loader, sharded across processes in distributed training."""
    # Only the first process on each node downloads; the others wait, then read the files.
    if idist.get_local_rank() > 0:
        idist.barrier()
    dataset = get_dataset(config.dataset, config.data_path, config.image_size, config.channels)
    if idist.get_local_rank() == 0:
        idist.barrier()

    # `batch_size` is global: ignite divides it by the number of processes. Full batches only
    # (drop_last): every step has the same shapes, which XLA needs to compile the step once.
    return idist.auto_dataloader(
        dataset, batch_size=config.batch_size, num_workers=config.num_workers, shuffle=True, drop_last=True
    )
