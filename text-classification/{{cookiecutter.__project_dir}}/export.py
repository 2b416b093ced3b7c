"""Export a trained text classifier to ONNX: ``python export.py [--checkpoint PATH] [--output FOLDER]``.

Writes ``FOLDER/model.onnx`` (inputs ``input_ids`` and ``attention_mask``: a batch of any size of token
sequences of any length up to max_length, int64, as ``data.encode`` gives them; output ``logits``: one per
class), ``FOLDER/classes.json`` (the class names, in the order of the logits) and the tokenizer's files (its
``from_pretrained`` reads the folder), then runs the file with onnxruntime on a batch and checks its logits
against PyTorch's. The model is the newest run's best model (else its newest training checkpoint) unless
``--checkpoint`` names one. Needs ``pip install -r requirements-export.txt``.
"""

from pathlib import Path

import torch

from data import encode
from machinery.inference.onnx_export import command_line, export_onnx
from machinery.runs.directory import write_classes
from predict import trained_model

# The batch the ONNX file is checked on: two texts of different lengths, padded to max_length as in training.
EXAMPLES = ["A short text.", "A longer text, to classify as any other text the model reads."]


def export(checkpoint: Path, output: Path) -> float:
    """Write the model in ``checkpoint``, its class names and its tokenizer into ``output``; return onnxruntime's
    largest difference from PyTorch's logits on a batch."""
    model, tokenizer, config, classes = trained_model(checkpoint)
    tokens = encode(tokenizer, EXAMPLES, config.max_length)
    inputs = {key: torch.tensor(tokens[key]) for key in ("input_ids", "attention_mask")}
    difference = export_onnx(model, inputs, "logits", output / "model.onnx", dynamic={1: "sequence"})
    write_classes(output, classes)
    tokenizer.save_pretrained(output)
    return difference


if __name__ == "__main__":
    command_line("Export a trained text classifier to ONNX, with its class names and tokenizer.", export)
