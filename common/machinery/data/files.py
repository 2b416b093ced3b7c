"""Datasets on disk: image folders, their faults named, and advice where a dataset is neither found nor downloaded."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from PIL import Image
from torchvision import datasets


def image_folder(folder: Path, transform: Callable[[Image.Image], Any], layout: str) -> datasets.ImageFolder:
    """The images of ``folder``, a sub-folder per class (ImageFolder); ``layout``, what goes where, for its errors."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{layout}: {folder} is not a folder")
    try:
        return datasets.ImageFolder(str(folder), transform=transform, loader=read_image)
    except FileNotFoundError as error:  # no sub-folder, or one with no image file
        raise FileNotFoundError(f"{layout}: {folder}: {error}") from None


def read_image(path: str) -> Image.Image:
    """An image file as RGB; one that cannot be read is named (the error reaches training.log)."""
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (OSError, ValueError) as error:  # PIL's errors for unreadable, truncated or unknown files
        raise ValueError(f"cannot read the image {path}: {error}") from None


@contextmanager
def download_advice(name: str, folder: Path) -> Iterator[None]:
    """Turn a failed download of dataset ``name`` into advice: the folder its files go in, and the offline dataset."""
    try:
        yield
    except (OSError, RuntimeError) as error:  # no network (URLError is an OSError), a missing or corrupt file
        if folder.is_dir():
            problem = f"the files in {folder} are incomplete or do not match their checksums ({error})"
            fix = "Complete them, or remove the folder to download them again"
        else:
            problem, fix = f"its files are not in {folder}, and downloading them failed ({error})", "Put them there"
        offline = "or set `dataset: synthetic` to train offline"
        raise RuntimeError(f"dataset={name!r}: {problem}. {fix}, {offline}.") from error
