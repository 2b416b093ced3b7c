"""Fast checks of the data, the model and short training runs, on CPU with synthetic data."""

import re
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


{# A run that learns: over seeds 0-9 its final eval accuracy was 0.73 to 0.98 (chance: 0.10). #}
{% set learning %}
"max_epochs": 2,
"train_epoch_length": 10,
"batch_size": 16,
"eval_epoch_length": 4,
"eval_batch_size": 16,
{% endset %}
{% set min_accuracy = 0.5 %}
{% include "pytest/classifier_learns.py" %}
