"""Your image and mask folders (dataset: folder): images paired with their masks by name, an image with no mask or
a mask with no image named before training; the masks' labels, read once; and a dataset of the pairs."""

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image
from torch.utils.data import Dataset
from torchvision.datasets.folder import IMG_EXTENSIONS

from machinery.data.files import read_image

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
