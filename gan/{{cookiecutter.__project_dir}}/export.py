"""Export a trained generator to ONNX: ``python export.py [--checkpoint PATH] [--output FOLDER]``.

Writes ``FOLDER/model.onnx`` (input ``noise``: a batch of any size of z_dim x 1 x 1 standard normal noise;
output ``images``: channels x image_size x image_size images with values in [0, 1], as predict.py saves them),
then runs the file with onnxruntime on a batch and checks its images against PyTorch's. The generator is the
newest run's (from its newest training checkpoint) unless ``--checkpoint`` names one. Needs ``pip install -r
requirements-export.txt``.
"""

from pathlib import Path

import torch
from torch import nn

from machinery.inference.onnx_export import command_line, export_onnx
from predict import trained_generator


class UnitRange(nn.Module):
    """The generator with its images in [0, 1] (its tanh gives [-1, 1]), as image files hold them."""

    def __init__(self, generator: nn.Module) -> None:
        super().__init__()
        self.generator = generator

    def forward(self, noise: torch.Tensor) -> torch.Tensor:
        return (self.generator(noise) + 1) / 2


def export(checkpoint: Path, output: Path) -> float:
    """Write the generator in ``checkpoint`` into ``output``; return onnxruntime's largest difference from
    PyTorch's images on a batch."""
    generator, config = trained_generator(checkpoint)
    noise = torch.randn(2, config.z_dim, 1, 1)
    return export_onnx(UnitRange(generator), {"noise": noise}, "images", output / "model.onnx")


if __name__ == "__main__":
    command_line("Export a trained generator to ONNX.", export)
