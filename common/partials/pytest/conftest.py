"""Shared fixtures: a small, offline configuration built from config.yaml."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

PROJECT_DIR = Path(__file__).resolve().parents[1]


# Small, fast values for the keys of config.yaml that have them (each template has its own keys).
TINY = {
    "dataset": "synthetic",
    "batch_size": 4,
    "eval_batch_size": 4,
    "num_workers": 0,
    "max_epochs": 2,
    "train_epoch_length": 2,
    "eval_epoch_length": 2,
    "log_every_iters": 1,
    "image_size": 16,
    "z_dim": 16,
    "g_filters": 8,
    "d_filters": 8,
    "num_samples": 16,
}


@pytest.fixture
def config(tmp_path: Path) -> SimpleNamespace:
    """config.yaml with synthetic data, two tiny epochs, one process and outputs under ``tmp_path``."""
    values = yaml.safe_load((PROJECT_DIR / "config.yaml").read_text())
    for hydra_key in ("defaults", "hydra"):
        values.pop(hydra_key, None)
    values.update({key: value for key, value in TINY.items() if key in values})
    values.update(data_path=str(tmp_path / "data"), output_dir=str(tmp_path / "runs"), backend=None)
    return SimpleNamespace(**values)
