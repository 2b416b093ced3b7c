{% import "flags.j2" as flags with context %}
"""Datasets on disk: image folders whose faults are named (a missing folder, a class folder with no image, an
image that cannot be read), and advice where a dataset can be neither found nor downloaded.{{ "\n\nSegmentation's folders: images paired with their masks by name, an image with no mask or a mask with no image\nnamed; the masks' labels.\n" if flags.segmentation }}"""

{% if flags.segmentation %}
from collections import Counter
{% endif %}
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from PIL import Image
{% if flags.segmentation %}
from torch.utils.data import Dataset
{% endif %}
from torchvision import datasets
{% if flags.segmentation %}
from torchvision.datasets.folder import IMG_EXTENSIONS
{% endif %}


def image_folder(folder: Path, transform: Callable[[Image.Image], Any], layout: str) -> datasets.ImageFolder:
    """The images of ``folder``, a sub-folder per class (torchvision's ImageFolder); ``layout`` says what is
    expected where, in the error when ``folder`` is missing."""
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
{% if flags.segmentation %}


# dataset=folder's layout, as its errors state it.
MASK_LAYOUT = "dataset=folder reads <data_path>/{train,val}/images/<name>.<jpg, png, ...> and masks/<name>.png"


def image_mask_pairs(root: Path, split: str) -> list[tuple[Path, Path]]:
    """The (image, mask) files of a split, paired by file name stem; a missing folder, no image, an image with no
    mask or a mask with no image stops the run before training, naming them."""
    files = {}
    for kind in ("images", "masks"):
        folder = root / split / kind
        if not folder.is_dir():
            raise FileNotFoundError(f"{MASK_LAYOUT}: {folder} is not a folder")
        paths = sorted(path for path in folder.iterdir() if path.suffix.lower() in IMG_EXTENSIONS)
        stems = Counter(path.stem for path in paths)  # not list.count: a folder may hold thousands
        doubled = sorted(path.name for path in paths if stems[path.stem] > 1)
        if doubled:
            raise ValueError(f"{folder}: files of one name stem are one image or mask, not {doubled}")
        files[kind] = {path.stem: path for path in paths}
    images, masks = files["images"], files["masks"]
    if not images:
        raise FileNotFoundError(f"{MASK_LAYOUT}: {root / split / 'images'} holds no image file")
    for kind, stems, others in (("image", images, masks), ("mask", masks, images)):
        alone = sorted(str(stems[stem]) for stem in stems.keys() - others.keys())
        if alone:
            counterpart = "mask" if kind == "image" else "image"
            shown = ", ".join(alone[:5]) + (f" and {len(alone) - 5} more" if len(alone) > 5 else "")
            raise ValueError(f"{MASK_LAYOUT}: {len(alone)} {kind}(s) with no {counterpart} of the same name: {shown}")
    not_png = sorted(str(path) for path in masks.values() if path.suffix.lower() != ".png")
    if not_png:
        raise ValueError(f"{not_png[0]}: a mask is a PNG (a class index per pixel; JPEG's compression changes them)")
    return [(images[stem], masks[stem]) for stem in sorted(images)]


def check_mode(mask: Image.Image, path: str | Path) -> None:
    """Refuse a mask that is not one number per pixel: a palette or greyscale PNG."""
    if mask.mode not in ("P", "L"):
        raise ValueError(f"{path}: a mask holds a class index per pixel (a palette or greyscale PNG), not {mask.mode}")


def top_label(masks: list[Path], ignore_index: int) -> int:
    """The highest label of the masks, ``ignore_index`` aside: each is read once, by its histogram (in PIL)."""
    top = 0
    for path in masks:
        with Image.open(path) as mask:
            check_mode(mask, path)
            counts = mask.histogram()[:ignore_index]
        top = max(top, max((label for label, count in enumerate(counts) if count), default=0))
    return top


class SegmentationFolder(Dataset):
    """(image, mask) file pairs (a folder's, from ``image_mask_pairs``, or VOC's), each mask checked by
    ``check(mask, image, path)`` when read, then both through ``transforms``."""

    def __init__(self, pairs: list[tuple[Path | str, Path | str]], transforms: Callable, check: Callable) -> None:
        self.pairs, self.transforms, self.check = pairs, transforms, check

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> Any:
        image_path, mask_path = self.pairs[index]
        image, mask = read_image(str(image_path)), Image.open(mask_path)
        self.check(mask, image, str(mask_path))
        return self.transforms(image, mask)
{% endif %}
