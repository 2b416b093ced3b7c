"""Fast checks of the data, the model and short training runs, on CPU with synthetic data."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torchvision import transforms as T

from config import Config
from data import IMAGE_SIZE, NUM_CLASSES, SyntheticImages, get_datasets, image_transforms
from machinery.inference.trained import inference_device, newest_model
from machinery.runs.directory import write_classes
from main import run
from models import setup_model
from predict import predict


def test_synthetic_data_has_the_shapes_of_cifar10(tmp_path: Path) -> None:
    train, evaluation = get_datasets("synthetic", str(tmp_path))
    image, label = train[0]
    assert tuple(image.shape) == IMAGE_SIZE
    assert 0 <= label < NUM_CLASSES
    assert len(evaluation) > 0


def test_synthetic_eval_images_are_not_training_images() -> None:
    """Eval accuracy measures what the model learned, not what it memorised."""
    train = [SyntheticImages(1024, seed=0, transform=T.PILToTensor())[index][0] for index in range(1024)]
    evaluation = [SyntheticImages(256, seed=1, transform=T.PILToTensor())[index][0] for index in range(0, 256, 8)]
    assert not [image for image in evaluation if any(torch.equal(image, seen) for seen in train)]


def test_model_gives_one_logit_per_class() -> None:
    model = setup_model("resnet18", num_classes=NUM_CLASSES)
    assert model(torch.rand(2, *IMAGE_SIZE)).shape == (2, NUM_CLASSES)


{% include "pytest/classifier_short_run.py" %}


def test_a_short_run_learns_the_synthetic_data(train_for_eval_scores: Callable[..., list[float]]) -> None:
    """Eval accuracy well above chance after seconds of training: data, labels, loss, optimizer and
    learning-rate schedule work together (shuffled labels or a frozen model would stay at chance).
    Over seeds 0-9 the final eval accuracy was 0.81 to 1.00 (chance: 0.10)."""
    # Batches of 16 (the config fixture's: every test's).
    accuracies = train_for_eval_scores(max_epochs=2, train_epoch_length=16, eval_epoch_length=4)
    assert accuracies[-1] >= 0.5, f"eval accuracy per epoch {accuracies}; chance is {1 / NUM_CLASSES:.2f}"


def test_predict_gives_each_image_the_class_and_probability_its_model_gives_it(
    config: Config, run_dir: Path, tmp_path: Path
) -> None:
    """predict.py on image files (synthetic eval images saved as PNG), in batches of 3, with the newest run's
    best model: each row holds the class name (classes.json) and the probability the model gives the same
    image in the evaluation's transform, in the same batches on the same device (a GPU's convolutions round
    otherwise than the CPU's, and differently for another batch size). (The model is saved as a run saves it,
    untrained.)"""
    write_classes(run_dir, [f"class {label}" for label in range(NUM_CLASSES)])
    model = setup_model(config.model, num_classes=NUM_CLASSES).eval()
    torch.save(model.state_dict(), run_dir / "best_model_1_accuracy=0.5000.pt")
    torch.save({"model": model.state_dict()}, run_dir / "training_checkpoint_4.pt")
    checkpoint = newest_model(config.output_dir)
    assert checkpoint.name == "best_model_1_accuracy=0.5000.pt", "a run's best model comes before its checkpoints"
    paths = [tmp_path / f"{index}.png" for index in range(8)]
    for index, path in enumerate(paths):
        SyntheticImages(8, seed=1, transform=lambda image: image)[index][0].save(path)
    rows = predict(paths, checkpoint, batch_size=3)

    _, transform = image_transforms(config.image_size)
    inputs = torch.stack([SyntheticImages(8, seed=1, transform=transform)[index][0] for index in range(8)])
    device = inference_device()
    model.to(device)
    with torch.inference_mode():
        logits = [model(inputs[start : start + 3].to(device)) for start in range(0, 8, 3)]
    expected = torch.cat(logits).softmax(dim=1).cpu()
    assert [row[0] for row in rows] == [str(path) for path in paths], "one row per image, in order"
    for (path, label, score), probabilities in zip(rows, expected, strict=True):
        assert label == f"class {int(probabilities.argmax())}", f"{path}: {label}, the model says {probabilities}"
        assert score == pytest.approx(float(probabilities.max()), abs=1e-5), f"{path}: probability {score}"
