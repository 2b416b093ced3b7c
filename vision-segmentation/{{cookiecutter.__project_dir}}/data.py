"""Datasets and data loaders: Pascal VOC 2012 segmentation, your folder of images and masks, or offline synthetic
scenes of VOC's shapes."""

import colorsys
from functools import partial
from pathlib import Path

import ignite.distributed as idist
import torch
from PIL import Image, ImageDraw
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from config import Config
from folders import SegmentationFolder, check_mode, image_mask_pairs, top_label
from machinery.data.files import download_advice
from machinery.data.loaders import eval_loader, train_loader

CLASSES = (
    "background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
    "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train", "tvmonitor",
)  # fmt: skip
NUM_CLASSES = len(CLASSES)  # VOC's and the synthetic scenes': a folder's come from config.classes or its masks
# VOC's label of object borders and unclear pixels: the loss and the metrics leave them out.
IGNORE_INDEX = 255
# ImageNet statistics, which torchvision's backbones were trained with: a random backbone's images are normalised
# with them, a pretrained one's with its weights' own (models.statistics).
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
Statistics = tuple[tuple[float, ...], tuple[float, ...]]  # a mean and a standard deviation per channel
SYNTHETIC_SIZES = (512, 64)  # the synthetic train and eval sets: enough for a few short epochs


class SyntheticScenes(Dataset):
    """Offline scenes a model can learn to segment: one to three shapes (ellipses, rectangles) of the 20 object classes
    on grey, each class its own colour, under random brightness and pixel noise; masks label each pixel with its class
    and the outlines 255, as VOC's do. Scene ``index`` is drawn from a generator seeded with ``seed`` and ``index``:
    the same scene at every epoch and in every process, no file, no download. Images are PIL images, as VOC's."""

    def __init__(self, size: int, seed: int, image_size: int) -> None:
        self.size, self.seed, self.image_size = size, seed, image_size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[Image.Image, Image.Image]:
        # CPU generators keep 32 bits of a seed: seeds a million apart give sets of up to a million scenes
        # each their own scenes.
        rng = torch.Generator().manual_seed(self.seed * 1_000_000 + index)
        side = self.image_size
        grey = int(torch.randint(90, 160, (1,), generator=rng))
        image = Image.new("RGB", (side, side), (grey, grey, grey))
        mask = Image.new("L", (side, side), 0)
        paint, label = ImageDraw.Draw(image), ImageDraw.Draw(mask)
        for _ in range(int(torch.randint(1, 4, (1,), generator=rng))):
            cls = int(torch.randint(1, NUM_CLASSES, (1,), generator=rng))
            # A box of a quarter to a half of the image's side, anywhere inside it.
            width, height = torch.randint(side // 4, side // 2 + 1, (2,), generator=rng).tolist()
            left = int(torch.randint(0, side - width, (1,), generator=rng))
            top = int(torch.randint(0, side - height, (1,), generator=rng))
            box = (left, top, left + width, top + height)
            brightness = 0.7 + 0.3 * float(torch.rand(1, generator=rng))
            colour = tuple(round(255 * c) for c in colorsys.hsv_to_rgb((cls - 1) / (NUM_CLASSES - 1), 0.85, brightness))
            shape = "ellipse" if float(torch.rand(1, generator=rng)) < 0.5 else "rectangle"
            getattr(paint, shape)(box, fill=colour)
            getattr(label, shape)(box, fill=cls, outline=IGNORE_INDEX, width=max(1, side // 64))
        pixels = F.pil_to_tensor(image).short() + (12 * torch.randn(3, side, side, generator=rng)).round().short()
        image = Image.fromarray(pixels.clamp(0, 255).byte().permute(1, 2, 0).numpy())
        return image, mask


def to_tv_tensors(image: Image.Image, mask: Image.Image) -> tuple[tv_tensors.Image, tv_tensors.Mask]:
    """An image and its mask as torchvision tensors: the joint transforms treat each as what it is."""
    return tv_tensors.Image(F.pil_to_tensor(image)), tv_tensors.Mask(F.pil_to_tensor(mask)[0])


def pad_to(image: tv_tensors.Image, mask: tv_tensors.Mask, size: int) -> tuple[tv_tensors.Image, tv_tensors.Mask]:
    """Pad the image (black) and its mask (ignored pixels) on the right and at the bottom to at least ``size``."""
    height, width = mask.shape[-2:]
    padding = [0, 0, max(size - width, 0), max(size - height, 0)]  # left, top, right, bottom
    return F.pad(image, padding, fill=0), F.pad(mask, padding, fill=IGNORE_INDEX)


def joint_transforms(crop_size: int, train: bool, normalisation: Statistics = (MEAN, STD)) -> v2.Compose:
    """Transforms of an image and its mask together, ending at ``crop_size`` x ``crop_size``: one shape for every batch
    (a TPU compiles one program per shape). Training rescales, crops at random and flips; evaluation pads and takes
    the centre (VOC's images, at most 500 pixels a side, whole at the default 512)."""
    steps = [to_tv_tensors]
    if train:
        steps += [v2.RandomResize(crop_size // 2, crop_size * 2), partial(pad_to, size=crop_size)]
        steps += [v2.RandomCrop(crop_size), v2.RandomHorizontalFlip()]
    else:
        steps += [partial(pad_to, size=crop_size), v2.CenterCrop(crop_size)]
    # Masks keep their labels: scaling and normalising apply to the image only.
    steps += [v2.ToDtype({tv_tensors.Image: torch.float32, tv_tensors.Mask: torch.int64}, scale=True)]
    steps += [v2.Normalize(*normalisation)]
    return v2.Compose(steps)


def get_datasets(
    name: str, data_path: str, crop_size: int, classes: list[str] | None = None, normalisation: Statistics = (MEAN, STD)
) -> tuple[Dataset, Dataset, list[str]]:
    """Return the train and eval datasets, with augmentation on the train set only, images normalised with
    ``normalisation``, and the class names (the model's outputs, in order): ``classes`` for a folder (else
    ``class_0``, ... up to its masks' top label)."""
    train_transforms = joint_transforms(crop_size, True, normalisation)
    eval_transforms = joint_transforms(crop_size, False, normalisation)
    if classes is not None and name != "folder":
        raise ValueError(f"classes names the classes of dataset=folder: dataset={name!r} has its own, set it to null")
    if name == "folder":
        train_pairs, eval_pairs = (image_mask_pairs(Path(data_path), split) for split in ("train", "val"))
        if classes is not None and (len(classes) < 2 or len(set(classes)) < len(classes)):
            raise ValueError(f"classes={classes}: name two classes at least, each once (label 0 is the first)")
        classes = list(classes) if classes is not None else classes_of(train_pairs)
        # Each mask is checked against its image and the class count when read: a wrong one is named, not trained on.
        check = partial(check_mask, num_classes=len(classes))
        train = SegmentationFolder(train_pairs, train_transforms, check)
        evaluation = SegmentationFolder(eval_pairs, eval_transforms, check)
        return train, evaluation, classes
    if name == "voc":
        # The 2 GB archive is downloaded (and extracted) only when VOC's folder is not there: torchvision would
        # check and extract it again at every run, over the folder.
        folder = Path(data_path) / "VOCdevkit" / "VOC2012"
        with download_advice(name, folder):
            train_voc = datasets.VOCSegmentation(data_path, "2012", "train", download=not folder.is_dir())
            eval_voc = datasets.VOCSegmentation(data_path, "2012", "val", download=False)
        # torchvision lists VOC's files; they are read as a folder's are, each mask checked against its image.
        check = partial(check_mask, num_classes=NUM_CLASSES)
        train = SegmentationFolder(list(zip(train_voc.images, train_voc.masks, strict=True)), train_transforms, check)
        evaluation = SegmentationFolder(list(zip(eval_voc.images, eval_voc.masks, strict=True)), eval_transforms, check)
    elif name == "synthetic":
        # Learnable scenes made on the fly: no download, the shapes of VOC's batches; other scenes for eval.
        train_size, eval_size = SYNTHETIC_SIZES
        train = TransformedScenes(SyntheticScenes(train_size, seed=0, image_size=crop_size), train_transforms)
        evaluation = TransformedScenes(SyntheticScenes(eval_size, seed=1, image_size=crop_size), eval_transforms)
    else:
        raise ValueError(f"dataset={name!r} is not supported: use 'voc', 'folder' or 'synthetic'")
    return train, evaluation, list(CLASSES)


def classes_of(pairs: list[tuple[Path, Path]]) -> list[str]:
    """``class_0``, ``class_1``, ... up to the highest label of the train masks (IGNORE_INDEX aside)."""
    top = top_label([mask for _, mask in pairs], IGNORE_INDEX)
    if top == 0:
        raise ValueError(f"the train masks in {pairs[0][1].parent} label every pixel 0 (or {IGNORE_INDEX}): no classes")
    return [f"class_{label}" for label in range(top + 1)]


def check_mask(mask: Image.Image, image: Image.Image, path: str, num_classes: int) -> None:
    """Refuse a mask that is not a class index per pixel of its image (0 to num_classes - 1, or IGNORE_INDEX)."""
    check_mode(mask, path)
    if mask.size != image.size:
        width, height = image.size
        raise ValueError(f"{path}: the mask is {mask.size[0]}x{mask.size[1]} pixels, its image {width}x{height}")
    labels = set(torch.unique(F.pil_to_tensor(mask)).tolist()) - {IGNORE_INDEX}
    if max(labels, default=0) >= num_classes:
        raise ValueError(
            f"{path}: the mask holds {sorted(labels)}: a label is a class index below {num_classes}, "
            f"or {IGNORE_INDEX} (ignored)"
        )


class TransformedScenes(Dataset):
    """A dataset of (image, mask) pairs with joint transforms applied, as VOCSegmentation's ``transforms``."""

    def __init__(self, scenes: Dataset, transforms: v2.Compose) -> None:
        self.scenes, self.transforms = scenes, transforms

    def __len__(self) -> int:
        return len(self.scenes)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.transforms(*self.scenes[index])


def setup_data(config: Config, normalisation: Statistics = (MEAN, STD)) -> tuple[DataLoader, DataLoader, list[str]]:
    """Build the train and eval loaders, sharded across processes in distributed training, their images normalised
    with ``normalisation`` (``models.statistics``), and the class names."""
    # Only the first process on each node downloads; the others wait, then read the files.
    with idist.one_rank_first(local=True):
        source = (config.dataset, config.data_path, config.crop_size, config.classes)
        train, evaluation, classes = get_datasets(*source, normalisation)
    batches = train_loader(train, config.batch_size, config.num_workers)
    return batches, eval_loader(evaluation, config.eval_batch_size, config.num_workers), classes


# A batch as the loaders give it: images and masks.
Batch = tuple[torch.Tensor, torch.Tensor]


def prepare_batch(batch: Batch, device: torch.device) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """The model's inputs and the masks of a batch, on the device."""
    images, masks = (tensor.to(device, non_blocking=True) for tensor in batch)
    return (images,), masks
