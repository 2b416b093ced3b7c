"""Generated GAN projects train for real on CPU, offline: one process, torchrun and spawn, resume.

Each run is short (synthetic 16x16 images, small networks, 2 epochs) and is checked the way a user
would check it: exit code, logged losses, what the sample grids and the loss plot show, the checkpoints.
"""

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from checkpoints import differences, load_checkpoint
from environments import PYTHON
from PIL import Image
from projects import load_module, make_offline, read_log, readme_train_command, run_cmd, run_dirs
from ranks import check_both_ranks_trained, run_recording_ranks

pytestmark = pytest.mark.slow  # they train generated projects: not in the quick lane

LOSSES = ("loss_d", "loss_g", "d_real", "d_fake")
# The loss plot's lines in matplotlib's first two colours (C0 and C1), in RGB.
LINE_COLOURS = {"discriminator": (31, 119, 180), "generator": (255, 127, 14)}
# The fewest pixels one plotted point shows in its line's colour: its marker covers about 29.
POINT_PIXELS = 20


def colour_pixels(path: Path, colour: tuple[int, int, int]) -> int:
    """How many pixels of a PNG have this colour, give or take anti-aliasing."""
    with Image.open(path) as image:
        pixels = np.asarray(image.convert("RGB"), dtype=int)
    return int((np.abs(pixels - colour).max(axis=2) <= 30).sum())


def check_loss_plot(project: Path, plot: Path, points: int) -> None:
    """Each loss line shows its ``points`` points: pixels of its colour beyond those of its legend entry."""
    # The project's own plot of no points at all: the legend alone, drawn the same way.
    images = load_module(project / "images.py")
    legend_only = project / "legend_only.png"
    images.plot_losses([], legend_only)
    with Image.open(plot) as image, Image.open(legend_only) as reference:
        assert image.size == reference.size, f"{plot.name}: {image.size}"
    for line, colour in LINE_COLOURS.items():
        drawn = colour_pixels(plot, colour) - colour_pixels(legend_only, colour)
        assert drawn >= POINT_PIXELS * points, (
            f"{plot}: the {line}'s loss shows {drawn} pixels besides its legend entry, too few for "
            f"{points} point(s): a point must be visible even alone (a line through one point draws nothing)"
        )


def check_sample_grid(path: Path, num_samples: int, image_size: int) -> None:
    """A square grid of num_samples images of image_size pixels, with torchvision's 2-pixel padding,
    every image showing something (not one flat colour)."""
    columns = math.isqrt(num_samples)
    with Image.open(path) as image:
        assert image.format == "PNG", path.name
        pixels = np.asarray(image.convert("RGB"), dtype=int)
    side = columns * (image_size + 2) + 2
    assert pixels.shape[:2] == (side, side), f"{path.name}: {pixels.shape[1]}x{pixels.shape[0]}, not {side}x{side}"
    for index in range(num_samples):
        top, left = (2 + position * (image_size + 2) for position in divmod(index, columns))
        sample = pixels[top : top + image_size, left : left + image_size]
        # Not more: after a few iterations the generator's images are still close to grey.
        assert sample.std() > 0, f"{path.name}: sample {index} is one flat colour"


def check_gan_run(project, epochs: int = 2, iterations_per_epoch: int = 3):
    """Assert what a user looks at after a GAN run; return its directory, log and config."""
    (run_dir,) = run_dirs(project)
    config = yaml.safe_load((run_dir / "config-lock.yaml").read_text())
    log = read_log(run_dir)
    assert log["train"] and all(set(values) == set(LOSSES) for values in log["train"]), log["text"]
    assert all(math.isfinite(v) for v in log["losses"]), f"non-finite values: {log['losses']}"
    assert all(0.0 <= values[p] <= 1.0 for values in log["train"] for p in ("d_real", "d_fake"))
    every = config["log_every_iters"]
    assert log["iterations"] == list(range(every, epochs * iterations_per_epoch + 1, every)), log["text"]

    # One sample grid per epoch, written once (by rank 0).
    samples = sorted((run_dir / "samples").iterdir())
    assert [p.name for p in samples] == [f"epoch_{e:04d}.png" for e in range(1, epochs + 1)]
    for path in samples:
        check_sample_grid(path, config["num_samples"], config["image_size"])
    # One point per logged iteration on each line.
    check_loss_plot(project, run_dir / "losses.png", points=len(log["iterations"]))
    return run_dir, log


def test_single_process_run_saves_samples_plot_and_both_networks(bake) -> None:
    project = bake("gan", argparser="hydra", logger="tensorboard")
    make_offline(project, mixed_precision="float16", timer=True, limit_sec=600)
    argv, env = readme_train_command(project)
    assert not env
    run_cmd(argv, cwd=project)
    run_dir, log = check_gan_run(project)
    assert "s per iteration" in log["text"], "the timer logs the time per iteration"
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*")), "no TensorBoard events"
    checkpoint = load_checkpoint(run_dir / "training_checkpoint_6.pt")  # as resume_from loads it
    # Both networks, both optimizers, the trainer and float16's gradient scaler (off on a CPU: full precision).
    assert set(checkpoint) == {"generator", "discriminator", "optimizer_g", "optimizer_d", "trainer", "scaler"}
    assert not list(run_dir.glob("best_*.pt")), "a GAN has no best model"
    # The README's "Use the model": predict.py with that run's newest checkpoint (a Hydra project's config too).
    run_cmd([PYTHON, "predict.py", "3", "--output", "generated"], cwd=project)
    written = sorted(path.name for path in (project / "generated").iterdir())
    assert written == ["0000.png", "0001.png", "0002.png", "grid.png"], written
    size = yaml.safe_load((run_dir / "config-lock.yaml").read_text())["image_size"]
    assert Image.open(project / "generated" / "0000.png").size == (size, size)


@pytest.mark.parametrize("launcher", ["torchrun", "spawn"])
def test_two_process_gloo_run_trains_both_networks_on_both_ranks(bake, tmp_path, launcher: str) -> None:
    project = bake("gan", backend="gloo", launcher=launcher)
    # batch_size is global: 8 per step split into 4 per process. The default logging interval (10)
    # over 2 epochs of 6 iterations: one point per line in the loss plot.
    assert yaml.safe_load((project / "config.yaml").read_text())["log_every_iters"] == 10
    make_offline(project, train_epoch_length=6, log_every_iters=10)
    argv, _ = readme_train_command(project)
    # The log is rank 0's: what rank 1 did is recorded in each process by the test's probe.
    proc, ranks = run_recording_ranks(argv, project, tmp_path / "ranks")
    run_dir, log = check_gan_run(project, iterations_per_epoch=6)
    assert log["iterations"] == [10]
    assert "World size: 2" in log["text"], "training must run in a world of 2 processes"
    checkpoint = load_checkpoint(run_dir / "training_checkpoint_12.pt")
    check_both_ranks_trained(ranks, iterations=12, networks=[checkpoint["generator"], checkpoint["discriminator"]])
    assert "Traceback" not in proc.stderr


def test_resumed_run_ends_with_the_networks_of_an_uninterrupted_one(bake) -> None:
    project = bake("gan", argparser="fire")
    # Whole epochs (1024 synthetic images / 128 = 8 iterations): the data order and noise are then reproducible.
    make_offline(project, batch_size=128, train_epoch_length=None, log_every_iters=4, deterministic=True)
    run_cmd([PYTHON, "main.py", "config.yaml"], cwd=project)
    first_dir = run_dirs(project)[0]
    uninterrupted = load_checkpoint(first_dir / "training_checkpoint_16.pt", deterministic=True)

    after_epoch_1 = first_dir / "training_checkpoint_8.pt"
    run_cmd([PYTHON, "main.py", "config.yaml", f"--resume_from={after_epoch_1}"], cwd=project)
    resumed_dir = run_dirs(project)[1]
    log = read_log(resumed_dir)
    assert "Resumed from" in log["text"]
    assert log["iterations"] == [12, 16], "a resumed run continues after the saved iteration"
    assert [p.name for p in (resumed_dir / "samples").iterdir()] == ["epoch_0002.png"]
    resumed = load_checkpoint(resumed_dir / "training_checkpoint_16.pt", deterministic=True)
    assert resumed["trainer"]["iteration"] == uninterrupted["trainer"]["iteration"] == 16
    # The loss history behind losses.png comes back with the trainer: the plot starts at iteration 4, not 12.
    history = resumed["trainer"]["loss_history"]
    assert [iteration for iteration, _ in history] == [4, 8, 12, 16], "the resumed plot must show the whole run"
    check_loss_plot(project, resumed_dir / "losses.png", points=4)
    # Deterministic training on a CPU: the resumed run ends with the uninterrupted run's state, bit for bit:
    # both networks, both optimizers' moments and param groups, the trainer (iteration, epoch, random
    # states, the losses of every logged iteration). Anything else would mean the data order or a random
    # draw (the noise, the samples) changed on resume.
    assert set(resumed) == set(uninterrupted), "both checkpoints hold the same objects"
    diffs = differences(resumed, uninterrupted)
    assert not diffs, "the resumed run's last checkpoint differs from the uninterrupted run's:\n" + "\n".join(diffs)
    # A checkpoint from before the trainer kept its history still resumes, with the history starting empty.
    old_checkpoint = load_checkpoint(after_epoch_1, deterministic=True)
    del old_checkpoint["trainer"]["loss_history"]
    torch.save(old_checkpoint, project / "old_checkpoint.pt")
    run_cmd([PYTHON, "main.py", "config.yaml", "--resume_from=old_checkpoint.pt"], cwd=project)
    old_resumed = load_checkpoint(run_dirs(project)[2] / "training_checkpoint_16.pt", deterministic=True)
    assert [iteration for iteration, _ in old_resumed["trainer"]["loss_history"]] == [12, 16]
    del old_resumed["trainer"]["loss_history"], resumed["trainer"]["loss_history"]
    diffs = differences(old_resumed, resumed)
    assert not diffs, "a checkpoint without a loss history must resume the same training:\n" + "\n".join(diffs)


def test_generated_gan_project_tests_pass_with_save_training_and_the_nan_check_off(bake) -> None:
    """The project's own tests read config.yaml: with the training checkpoints and the NaN check off there, its short
    run's checks follow (its CI run, tests/test_project_tooling.py, keeps the defaults)."""
    project = bake("gan")
    config = project / "config.yaml"
    config.write_text(config.read_text().replace("save_training: true", "save_training: false"))
    config.write_text(config.read_text().replace("terminate_on_nan: true", "terminate_on_nan: false"))
    run_cmd([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project)
