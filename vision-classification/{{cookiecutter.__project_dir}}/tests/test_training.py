"""Fast checks of the data, the model and a short training run, on CPU with synthetic data."""

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from data import IMAGE_SIZE, NUM_CLASSES, get_datasets
from main import run
from models import setup_model


def test_synthetic_data_has_the_shapes_of_cifar10(tmp_path: Path) -> None:
    train, evaluation = get_datasets("synthetic", str(tmp_path))
    image, label = train[0]
    assert tuple(image.shape) == IMAGE_SIZE
    assert 0 <= label < NUM_CLASSES
    assert len(evaluation) > 0


def test_model_gives_one_logit_per_class() -> None:
    model = setup_model("resnet18", num_classes=NUM_CLASSES)
    assert model(torch.rand(2, *IMAGE_SIZE)).shape == (2, NUM_CLASSES)


{% include "pytest/classifier_short_run.py" %}
