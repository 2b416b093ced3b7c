"""Fast checks of the data, the networks and a short training run, on CPU with synthetic data."""

import sys
from pathlib import Path

import pytest
import torch
import yaml
from PIL import Image
from torchvision.transforms.functional import pil_to_tensor

import predict
from config import Config
from data import get_dataset
from machinery.inference.trained import inference_device
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


def test_short_run_logs_losses_and_saves_samples_plot_and_checkpoints(config: Config) -> None:
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
{% include "pytest/short_run_checkpoints.py" %}
    if config.save_training:  # the last one holds both networks, both optimizers and the trainer
        last = torch.load(run_dir / sorted(training)[-1], map_location="cpu", weights_only=False)
        assert {"generator", "discriminator", "optimizer_g", "optimizer_d", "trainer"} <= set(last)


def test_a_short_run_brings_the_generated_images_closer_to_the_data(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generator learns: the mean of its images (as the sample grids show them: batch norm in eval
    mode) moves towards the mean synthetic image, dark at the edges and bright in the middle, far from
    the flat grey a new generator draws. A cheap statistic that needs no pretrained network; over seeds
    0-9 the distance fell from 0.58 to between 0.26 and 0.41."""
    learning = {"max_epochs": 2, "train_epoch_length": 50, "lr": 2e-3}  # batches of 32: every test's
    config = config.model_copy(update=learning)
    dataset = get_dataset("synthetic", config.data_path, config.image_size, config.channels)
    mean_real = torch.stack([dataset[index][0] for index in range(256)]).mean(0)
    noise = torch.randn(256, config.z_dim, 1, 1, generator=torch.Generator().manual_seed(0))

    @torch.no_grad()
    def distance(generator: Generator) -> float:
        generator.eval()
        device = next(generator.parameters()).device  # after training, the XLA device in a TPU project
        return (generator(noise.to(device)).mean(0).cpu() - mean_real).abs().mean().item()

    distances, generators = [], []

    def measured_generator(*args: int) -> Generator:
        generators.append(Generator(*args))
        distances.append(distance(generators[0]))  # before training
        return generators[0]

    monkeypatch.setattr("main.Generator", measured_generator)
    run(0, config)
    distances.append(distance(generators[0]))
    assert distances[1] < 0.8 * distances[0], f"mean-image distance before and after training: {distances}"


def test_predict_writes_the_images_its_generator_draws_from_the_seeds_noise(
    config: Config, run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """predict.py with the newest run's newest training checkpoint: COUNT PNG files (and their grid), each the
    generator's image (batch norm in eval mode) of the noise the seed draws, to the PNG's 8 bits; the same
    seed draws the same images. The generator runs on predict.py's device (a GPU's convolutions round otherwise
    than the CPU's). (The generator is saved as a run saves it, untrained.)"""
    generator = Generator(config.z_dim, config.g_filters, config.channels, config.image_size).eval()
    torch.save({"trainer": {}, "generator": generator.state_dict()}, run_dir / "training_checkpoint_4.pt")
    # The README's command, in a folder whose config.yaml has this test's output_dir.
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config.model_dump()))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["predict.py", "5", "--seed", "3", "--output", "out"])
    predict.main()

    noise = torch.randn(5, config.z_dim, 1, 1, generator=torch.Generator().manual_seed(3))
    device = inference_device()
    with torch.inference_mode():
        images = generator.to(device)(noise.to(device)).float().cpu()
    expected = ((images + 1) / 2 * 255 + 0.5).clamp(0, 255).to(torch.uint8)
    written = sorted(path.name for path in (tmp_path / "out").iterdir())
    assert written == ["0000.png", "0001.png", "0002.png", "0003.png", "0004.png", "grid.png"], written
    for index in range(5):
        image = pil_to_tensor(Image.open(tmp_path / "out" / f"{index:04d}.png").convert("RGB"))
        drawn = expected[index].expand(3, -1, -1)  # a grey image is written as RGB
        assert (image.int() - drawn.int()).abs().max() <= 1, f"image {index} is not the generator's"
    again = predict.generate(run_dir / "training_checkpoint_4.pt", 5, seed=3)
    assert torch.equal(((again * 255 + 0.5).clamp(0, 255)).to(torch.uint8), expected), "the same seed, other images"
