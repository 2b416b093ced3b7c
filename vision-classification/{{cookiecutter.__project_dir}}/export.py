"""Export a trained classifier to ONNX: ``python export.py [--checkpoint PATH] [--output FOLDER]``.

Writes ``FOLDER/model.onnx`` (input ``images``: a batch of any size of 3 x S x S images, S the image_size or, for
a model started from pretrained weights, their crop size (``data.input_size``), normalised as evaluation does it,
``data.image_transforms``: with CIFAR-10's statistics, or the weights' own; output ``logits``: one per class) and
``FOLDER/classes.json`` (the class names, in the order of the logits), then runs the file with onnxruntime on a
batch and checks its logits against PyTorch's. The model is the newest run's best model (else its newest
training checkpoint) unless ``--checkpoint`` names one. Needs ``pip install -r requirements-export.txt``.
"""

from pathlib import Path

import torch

from data import input_size
from machinery.inference.onnx_export import command_line, export_onnx
from machinery.runs.directory import write_classes
from models import pretrained_weights
from predict import trained_model


def export(checkpoint: Path, output: Path) -> float:
    """Write the model in ``checkpoint`` and its class names into ``output``; return onnxruntime's largest
    difference from PyTorch's logits on a batch."""
    model, config, classes = trained_model(checkpoint)
    size = input_size(config.image_size, pretrained_weights(config.model, config.weights))
    images = torch.randn(2, 3, size, size)  # the scale of normalised images
    difference = export_onnx(model, {"images": images}, "logits", output / "model.onnx")
    write_classes(output, classes)
    return difference


if __name__ == "__main__":
    command_line("Export a trained classifier to ONNX, with its class names.", export)
