"""Export a trained segmentation model to ONNX: ``python export.py [--checkpoint PATH] [--output FOLDER]``.

Writes ``FOLDER/model.onnx`` (input ``images``: a batch of any size of 3 x height x width images of any size,
normalised as evaluation does it, ``models.statistics``: ``data.MEAN`` and ``data.STD``, or the backbone's pretrained
weights' own; output ``logits``: a score per class and pixel, the main head's) and ``FOLDER/classes.json`` (the class
names, in the scores' order), then runs the file with onnxruntime on a batch and checks its logits against PyTorch's.
The model is the newest run's best model (else its newest training checkpoint) unless ``--checkpoint`` names one.
Needs ``pip install -r requirements-export.txt``."""

from pathlib import Path

import torch
from torch import nn

from machinery.inference.onnx_export import command_line, export_onnx
from machinery.runs.directory import write_classes
from models import logits_of
from predict import trained_model


class MainHead(nn.Module):
    """The model with one output, the main head's logits (the auxiliary head only helps training)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return logits_of(self.model(images))


def export(checkpoint: Path, output: Path) -> float:
    """Write the model in ``checkpoint`` and its class names into ``output``; return onnxruntime's largest
    difference from PyTorch's logits on a batch."""
    model, config, classes = trained_model(checkpoint)
    images = torch.randn(2, 3, config.crop_size, config.crop_size)  # the scale of normalised images
    path = output / "model.onnx"
    difference = export_onnx(MainHead(model), {"images": images}, "logits", path, dynamic={2: "height", 3: "width"})
    write_classes(output, classes)
    return difference


if __name__ == "__main__":
    command_line("Export a trained segmentation model to ONNX, with its class names.", export)
