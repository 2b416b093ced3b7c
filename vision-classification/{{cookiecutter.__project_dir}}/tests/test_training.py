"""Fast checks of the data, the model and a short training run, on CPU with synthetic data."""

from pathlib import Path
from types import SimpleNamespace

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
    model = setup_model("resnet18")
    assert model(torch.rand(2, *IMAGE_SIZE)).shape == (2, NUM_CLASSES)


def test_short_run_logs_metrics_and_saves_checkpoints(config: SimpleNamespace) -> None:
    run(0, config)
    (run_dir,) = Path(config.output_dir).iterdir()
    log = (run_dir / "training.log").read_text()
    assert "train_loss=" in log, log
    assert "eval: accuracy=" in log, log
    assert (run_dir / "config-lock.yaml").is_file()
{% if cookiecutter.save_training or cookiecutter.save_best_model %}
    assert list(run_dir.glob("*.pt")), "no checkpoint was written"
{% endif %}
