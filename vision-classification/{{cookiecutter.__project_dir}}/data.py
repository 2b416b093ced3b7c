"""Datasets and data loaders: CIFAR-10, or offline synthetic images of the same shapes."""

from types import SimpleNamespace

import ignite.distributed as idist
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets
from torchvision import transforms as T

# CIFAR-10 statistics, used for both datasets so the model sees the same input scale.
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
IMAGE_SIZE = (3, 32, 32)
NUM_CLASSES = 10
# Sizes of the synthetic train and eval sets: enough for a few short epochs.
SYNTHETIC_SIZES = (1024, 256)


def get_datasets(name: str, data_path: str) -> tuple[Dataset, Dataset]:
    """Return the train and eval datasets, with augmentation on the train set only."""
    train_transform = T.Compose(
        [T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]
    )
    eval_transform = T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])
    if name == "cifar10":
        train = datasets.CIFAR10(data_path, train=True, download=True, transform=train_transform)
        evaluation = datasets.CIFAR10(data_path, train=False, download=True, transform=eval_transform)
    elif name == "synthetic":
        # Random images and labels, generated on the fly: no download, same shapes as CIFAR-10.
        train_size, eval_size = SYNTHETIC_SIZES
        train = datasets.FakeData(train_size, IMAGE_SIZE, NUM_CLASSES, train_transform, random_offset=0)
        evaluation = datasets.FakeData(eval_size, IMAGE_SIZE, NUM_CLASSES, eval_transform, random_offset=train_size)
    else:
        raise ValueError(f"dataset={name!r} is not supported: use 'cifar10' or 'synthetic'")
    return train, evaluation


def setup_data(config: SimpleNamespace) -> tuple[DataLoader, DataLoader]:
    """Build the train and eval loaders, sharded across processes in distributed training."""
    # Only the first process on each node downloads; the others wait, then read the files.
    if idist.get_local_rank() > 0:
        idist.barrier()
    train, evaluation = get_datasets(config.dataset, config.data_path)
    if idist.get_local_rank() == 0:
        idist.barrier()

    # `batch_size` is global: ignite divides it by the number of processes.
    train_loader = idist.auto_dataloader(
        train, batch_size=config.batch_size, num_workers=config.num_workers, shuffle=True, drop_last=True
    )
    eval_loader = idist.auto_dataloader(
        evaluation, batch_size=config.eval_batch_size, num_workers=config.num_workers, shuffle=False
    )
    return train_loader, eval_loader
