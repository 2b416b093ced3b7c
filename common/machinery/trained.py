"""A trained model for predict.py: the newest run's, or a named checkpoint, with the settings it was trained
with and its class names (both kept in its run directory); the predictions written as CSV."""

import csv
import json
from collections.abc import Iterable
from pathlib import Path

import torch

from config import Config
from machinery.runs import CLASSES_FILE
from machinery.settings import load_config


def newest_model(output_dir: str) -> Path:
    """The newest run's best model (by its score), else its newest training checkpoint."""
    for lock in sorted(Path(output_dir).glob("*/config-lock.yaml"), reverse=True):  # newest run first
        best = sorted(lock.parent.glob("best_model_*=*.pt"), key=lambda path: float(path.stem.rsplit("=", 1)[1]))
        saved = sorted(lock.parent.glob("*_checkpoint_*.pt"), key=lambda path: path.stat().st_mtime)
        if best or saved:
            return (best or saved)[-1]
    raise SystemExit(f"No trained model under {output_dir}: train first, or give --checkpoint PATH")


def load_trained(checkpoint: Path) -> tuple[Config, list[str], dict[str, torch.Tensor]]:
    """The run's settings, its class names and the model's weights in ``checkpoint`` (a best model, or a
    training checkpoint, which holds the model among the rest)."""
    run_dir = checkpoint.parent
    missing = [name for name in ("config-lock.yaml", CLASSES_FILE) if not (run_dir / name).is_file()]
    if missing:
        raise SystemExit(f"{checkpoint} must be in its run directory, beside {' and '.join(missing)}")
    config = load_config(run_dir / "config-lock.yaml")
    classes = json.loads((run_dir / CLASSES_FILE).read_text())
    saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
    return config, classes, saved.get("model", saved)


def inference_device() -> torch.device:
    """The GPU if there is one, else the CPU (a model trained on a TPU too: its weights are plain tensors)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def write_predictions(rows: Iterable[tuple[str, str, float]], output: Path) -> None:
    """Write ``input,label,score`` rows (the input, its class name, the model's probability) to a CSV file."""
    with open(output, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["input", "label", "score"])
        writer.writerows((given, label, f"{score:.6f}") for given, label, score in rows)
