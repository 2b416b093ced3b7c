"""Segment images with a trained model: ``python predict.py IMAGE_OR_FOLDER... [--checkpoint PATH] [--output FOLDER]``.

Writes a mask PNG per image into the output folder, named after the image (``photo.jpg`` gives ``photo.png``; an
image found in a folder keeps its path under that folder): a palette PNG of the image's size whose pixel values are the
predicted class indices (``classes.json`` in the run directory names them), in the training pictures' colours. The
model is the newest run's best model (else its newest training checkpoint) unless ``--checkpoint`` names one; its run
directory gives the settings it was trained with.

The model sees each image whole, at its own size (segmentation models take any size and give a score per pixel of
their input): normalised and padded as evaluation does it (black on the right and at the bottom, to ``crop_size``
when smaller) but never cropped, and the prediction cropped back to the image: an image evaluation sees whole gets
the mask evaluation scored; a larger one is not cut to its centre (resizing would blur the objects' borders). One
image at a time (sizes differ), on the GPU if there is one, else on the CPU (a TPU project's models too).
"""

from argparse import ArgumentParser
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import torch
from PIL import Image
from torch import nn
from torchvision.datasets.folder import IMG_EXTENSIONS
from torchvision.transforms.v2 import functional as F

from config import Config
from data import Statistics
from machinery.config_files import load_run_settings
from machinery.data.files import read_image
from machinery.inference.trained import class_names, inference_device, load_trained, newest_model
from models import backbone_weights, logits_of, setup_model, statistics
from pictures import palette_mask


def trained_model(checkpoint: Path) -> tuple[nn.Module, Config, list[str]]:
    """The model in ``checkpoint`` (in eval mode, on the CPU), the settings it was trained with, its class names."""
    config, weights = load_trained(checkpoint, Config)
    classes = class_names(checkpoint)
    model = setup_model(config.model, len(classes))
    model.load_state_dict(weights)
    return model.eval(), config, classes


def predict(inputs: Sequence[tuple[Path, Path]], checkpoint: Path) -> None:
    """Write the mask the model in ``checkpoint`` predicts for each (image, mask file to write)."""
    model, config, _ = trained_model(checkpoint)
    device = inference_device()
    model.to(device)
    normalisation = statistics(backbone_weights(config.model, config.weights_backbone))  # the evaluation's
    with torch.inference_mode():
        for image_path, mask_path in inputs:
            image = read_image(str(image_path))
            logits = logits_of(model(whole_image(image, config.crop_size, normalisation)[None].to(device)))
            width, height = image.size
            labels = logits[0, :, :height, :width].argmax(dim=0).cpu()  # the padding's pixels cut off
            mask_path.parent.mkdir(parents=True, exist_ok=True)
            palette_mask(labels).save(mask_path)


def whole_image(image: Image.Image, crop_size: int, normalisation: Statistics) -> torch.Tensor:
    """An image as evaluation gives it to the model, never cropped: normalised (``normalisation``: mean, std), padded
    (black) on the right and at the bottom to at least ``crop_size``; the output is cropped back to the image's size."""
    pixels = F.pil_to_tensor(image)
    height, width = pixels.shape[-2:]
    pixels = F.pad(pixels, [0, 0, max(crop_size - width, 0), max(crop_size - height, 0)], fill=0)
    return F.normalize(F.to_dtype(pixels, torch.float32, scale=True), *normalisation)


def images_in(inputs: Sequence[str], output: Path) -> list[tuple[Path, Path]]:
    """The image files given, and those in the folders given (in sorted order), each with its mask's path."""
    pairs = []
    for name in map(Path, inputs):
        if name.is_dir():
            found = sorted(path for path in name.rglob("*") if path.suffix.lower() in IMG_EXTENSIONS)
            pairs += [(path, output / path.relative_to(name).with_suffix(".png")) for path in found]
        elif name.is_file():
            pairs.append((name, output / f"{name.stem}.png"))
        else:
            raise SystemExit(f"{name} is neither an image file nor a folder")
    written = Counter(mask for _, mask in pairs)
    twice = sorted(str(image) for image, mask in pairs if written[mask] > 1)
    if twice:
        raise SystemExit(f"images whose masks would have one name (give them apart): {twice}")
    return pairs


def main() -> None:
    parser = ArgumentParser(description="Segment images with a trained model; write a mask PNG per image.")
    parser.add_argument("inputs", nargs="+", help="image files, or folders of images")
    parser.add_argument("--checkpoint", type=Path, help="a best model or training checkpoint (default: the newest)")
    parser.add_argument("--output", type=Path, default=Path("masks"), help="the folder the masks are written to")
    args = parser.parse_args()
    checkpoint = args.checkpoint or newest_model(load_run_settings("config.yaml").output_dir)
    pairs = images_in(args.inputs, args.output)
    predict(pairs, checkpoint)
    print(f"{len(pairs)} masks predicted by {checkpoint} in {args.output}")


if __name__ == "__main__":
    main()
