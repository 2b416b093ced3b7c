"""A trained model for predict.py: the newest run's, or a named checkpoint, with the settings it was trained with
and its class names (both kept in its run directory); a classifier's predictions written as CSV."""

import csv
import json
from collections.abc import Iterable
from pathlib import Path

import torch

from machinery.config_files import load_lock
from machinery.runs.checkpoints import read_checkpoint
from machinery.runs.directory import CLASSES_FILE
from machinery.settings import Settings


def newest_model(output_dir: str) -> Path:
    """The newest run's best model (by its score), else its newest training checkpoint."""
    for lock in sorted(Path(output_dir).glob("*/config-lock.yaml"), reverse=True):  # newest run first
        best = sorted(lock.parent.glob("best_model_*=*.pt"), key=lambda path: float(path.stem.rsplit("=", 1)[1]))
        saved = sorted(lock.parent.glob("*_checkpoint_*.pt"), key=lambda path: path.stat().st_mtime)
        if best or saved:
            return (best or saved)[-1]
    raise SystemExit(f"No trained model under {output_dir}: train first, or give --checkpoint PATH")


def load_trained(
    checkpoint: Path, config_class: type[Settings], network: str = "model"
) -> tuple[Settings, dict[str, torch.Tensor]]:
    """The config (a ``config_class``) of the run ``checkpoint`` belongs to, and its ``network``'s weights: a best model
    holds them alone, a training checkpoint among the training's state (with ema, their average, as best models do)."""
    lock = checkpoint.parent / "config-lock.yaml"
    if not lock.is_file():
        raise SystemExit(f"{checkpoint} must be in its run directory, beside {lock.name}")
    saved = read_checkpoint(checkpoint)
    return load_lock(lock, config_class), saved.get(f"ema_{network}", saved.get(network, saved))


def class_names(checkpoint: Path) -> list[str]:
    """The class names of the run ``checkpoint`` belongs to, in the order of the model's outputs."""
    path = checkpoint.parent / CLASSES_FILE
    if not path.is_file():
        raise SystemExit(f"{checkpoint} must be in its run directory, beside {CLASSES_FILE}")
    return json.loads(path.read_text())


def inference_device() -> torch.device:
    """The GPU if there is one, else the CPU (a model trained on a TPU too: its weights are plain tensors)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def write_predictions(rows: Iterable[tuple[str, str, float]], output: Path) -> None:
    """Write ``input,label,score`` rows (the input, its class name, the model's probability) to a CSV file."""
    with open(output, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["input", "label", "score"])
        writer.writerows((given, label, f"{score:.6f}") for given, label, score in rows)
