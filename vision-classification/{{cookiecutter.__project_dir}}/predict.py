"""Classify images with a trained model: ``python predict.py IMAGE_OR_FOLDER... [--checkpoint PATH] [--output PATH]``.

Writes a CSV of ``input,label,score``: each image, its class (named as in training) and the model's probability
for it. The model is the newest run's best model (else its newest training checkpoint) unless ``--checkpoint``
names one; the run directory it is in gives the settings it was trained with and the class names. On the GPU
if there is one, else on the CPU (a TPU project's models too).
"""

from argparse import ArgumentParser
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn
from torchvision.datasets.folder import IMG_EXTENSIONS

from config import Config
from data import image_transforms
from machinery.config_files import load_run_settings
from machinery.data.files import read_image
from machinery.inference.trained import class_names, inference_device, load_trained, newest_model, write_predictions
from models import logits_of, pretrained_weights, setup_model


def trained_model(checkpoint: Path) -> tuple[nn.Module, Config, list[str]]:
    """The model in ``checkpoint`` (in eval mode, on the CPU), the settings it was trained with, its class names."""
    config, weights = load_trained(checkpoint, Config)
    classes = class_names(checkpoint)
    # Built as training built it: some models' pretrained networks differ from their random ones (GoogLeNet's).
    model = setup_model(config.model, num_classes=len(classes), weights=config.weights, image_size=config.image_size)
    model.load_state_dict(weights)
    return model.eval(), config, classes


def predict(inputs: Sequence[Path], checkpoint: Path, batch_size: int = 64) -> list[tuple[str, str, float]]:
    """(input, class name, probability) of each image, by the model in ``checkpoint``, in batches."""
    model, config, classes = trained_model(checkpoint)
    device = inference_device()
    model.to(device)
    # The evaluation's: the pretrained weights' own preprocessing where the model started from them.
    _, transform = image_transforms(config.image_size, pretrained_weights(config.model, config.weights))
    rows = []
    with torch.inference_mode():
        for start in range(0, len(inputs), batch_size):
            batch = inputs[start : start + batch_size]
            images = torch.stack([transform(read_image(str(path))) for path in batch]).to(device)
            scores, labels = logits_of(model(images)).softmax(dim=1).max(dim=1)
            named = zip(batch, labels.tolist(), scores.tolist(), strict=True)
            rows += [(str(path), classes[label], score) for path, label, score in named]
    return rows


def images_in(inputs: Sequence[str]) -> list[Path]:
    """The image files given, and those in the folders given (in sorted order)."""
    paths = []
    for name in map(Path, inputs):
        if name.is_dir():
            paths += sorted(path for path in name.rglob("*") if path.suffix.lower() in IMG_EXTENSIONS)
        elif name.is_file():
            paths.append(name)
        else:
            raise SystemExit(f"{name} is neither an image file nor a folder")
    return paths


def main() -> None:
    parser = ArgumentParser(description="Classify images with a trained model; write a CSV of the predictions.")
    parser.add_argument("inputs", nargs="+", help="image files, or folders of images")
    parser.add_argument("--checkpoint", type=Path, help="a best model or training checkpoint (default: the newest)")
    parser.add_argument("--output", type=Path, default=Path("predictions.csv"), help="the CSV file to write")
    args = parser.parse_args()
    checkpoint = args.checkpoint or newest_model(load_run_settings("config.yaml").output_dir)
    rows = predict(images_in(args.inputs), checkpoint)
    write_predictions(rows, args.output)
    print(f"{len(rows)} predictions of {checkpoint} in {args.output}")


if __name__ == "__main__":
    main()
