"""Fast checks of the data, the networks and a short training run, on CPU with synthetic data."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from PIL import Image

from data import get_dataset
from main import run
from models import Discriminator, Generator


@pytest.mark.parametrize("channels", [1, 3])
def test_synthetic_images_have_the_configured_shape_and_range(tmp_path: Path, channels: int) -> None:
    dataset = get_dataset("synthetic", str(tmp_path), image_size=16, channels=channels)
    image, _ = dataset[0]
    assert tuple(image.shape) == (channels, 16, 16)
    assert -1.0 <= image.min() and image.max() <= 1.0, "images are scaled to the generator's [-1, 1]"


@pytest.mark.parametrize("image_size", [8, 32, 64])
def test_generator_and_discriminator_fit_the_image_size(image_size: int) -> None:
    generator = Generator(z_dim=16, filters=8, channels=3, image_size=image_size)
    discriminator = Discriminator(channels=3, filters=8, image_size=image_size)
    images = generator(torch.randn(2, 16, 1, 1))
    assert images.shape == (2, 3, image_size, image_size)
    assert images.abs().max() <= 1.0
    assert discriminator(images).shape == (2,), "one logit per image"


def test_image_size_must_be_a_power_of_two() -> None:
    with pytest.raises(ValueError, match="image_size=48"):
        Generator(z_dim=16, filters=8, channels=3, image_size=48)


def test_short_run_logs_losses_and_saves_samples_and_plot(config: SimpleNamespace) -> None:
    run(0, config)
    # The run's directory (an MLflow project also keeps its mlflow.db store there).
    (run_dir,) = (path for path in Path(config.output_dir).iterdir() if path.is_dir())
    log = (run_dir / "training.log").read_text()
    for name in ("loss_d", "loss_g", "d_real", "d_fake"):
        assert f"{name}=" in log, log
    assert (run_dir / "config-lock.yaml").is_file()
    samples = sorted((run_dir / "samples").glob("epoch_*.png"))
    assert [p.name for p in samples] == [f"epoch_{epoch:04d}.png" for epoch in range(1, config.max_epochs + 1)]
    # A square grid of num_samples images, each image_size wide, with torchvision's 2-pixel padding.
    side = int(config.num_samples**0.5) * (config.image_size + 2) + 2
    for path in samples:
        with Image.open(path) as image:
            assert image.format == "PNG" and image.size == (side, side)
    with Image.open(run_dir / "losses.png") as plot:
        assert plot.format == "PNG"
{% if cookiecutter.save_training %}
    last = max(run_dir.glob("*_checkpoint_*.pt"), key=lambda path: path.stat().st_mtime)
    checkpoint = torch.load(last, map_location="cpu", weights_only=False)
    assert {"generator", "discriminator", "optimizer_g", "optimizer_d", "trainer"} <= set(checkpoint)
{% endif %}
