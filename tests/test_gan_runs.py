"""Generated GAN projects train for real on CPU, offline: one process, torchrun and spawn, resume.

Each run is short (synthetic 16x16 images, small networks, 2 epochs) and is checked the way a user
would check it: exit code, logged losses, the sample grids and the loss plot, the checkpoints.
"""

import math

import pytest
import torch
import yaml
from helpers import PYTHON, free_port, make_offline, read_log, readme_train_command, run_cmd, run_dirs
from PIL import Image

LOSSES = ("loss_d", "loss_g", "d_real", "d_fake")


def check_gan_run(project, epochs: int = 2, iterations_per_epoch: int = 3):
    """Assert what a user looks at after a GAN run; return its directory, log and config."""
    (run_dir,) = run_dirs(project)
    config = yaml.safe_load((run_dir / "config-lock.yaml").read_text())
    log = read_log(run_dir)
    assert log["train"] and all(set(values) == set(LOSSES) for values in log["train"]), log["text"]
    assert all(math.isfinite(v) for v in log["losses"]), f"non-finite values: {log['losses']}"
    assert all(0.0 <= values[p] <= 1.0 for values in log["train"] for p in ("d_real", "d_fake"))
    assert log["iterations"][-1] == epochs * iterations_per_epoch

    # One sample grid per epoch, written once (by rank 0): a square grid of num_samples images of
    # image_size pixels, with torchvision's 2-pixel padding.
    samples = sorted((run_dir / "samples").iterdir())
    assert [p.name for p in samples] == [f"epoch_{e:04d}.png" for e in range(1, epochs + 1)]
    side = math.isqrt(config["num_samples"]) * (config["image_size"] + 2) + 2
    for path in samples:
        with Image.open(path) as image:
            image.verify()
            assert image.format == "PNG" and image.size == (side, side), f"{path.name}: {image.size}"
    with Image.open(run_dir / "losses.png") as plot:
        plot.verify()
        assert plot.format == "PNG" and plot.size[0] > 100
    return run_dir, log


def test_single_process_run_saves_samples_plot_and_both_networks(bake) -> None:
    options = {"logger": "tensorboard", "mixed_precision": True, "timer": True, "limit_sec": "600"}
    project = bake("gan", argparser="hydra", launcher="none", **options)
    make_offline(project)
    argv, env = readme_train_command(project)
    assert not env
    run_cmd(argv, cwd=project)
    run_dir, log = check_gan_run(project)
    assert "s per iteration" in log["text"], "the timer logs the time per iteration"
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*")), "no TensorBoard events"
    checkpoint = torch.load(run_dir / "training_checkpoint_6.pt", weights_only=False)
    # Both networks, both optimizers, the trainer and (mixed precision) the gradient scaler.
    assert set(checkpoint) == {"generator", "discriminator", "optimizer_g", "optimizer_d", "trainer", "scaler"}
    assert not list(run_dir.glob("best_*.pt")), "a GAN has no best model"


@pytest.mark.parametrize("launcher", ["torchrun", "spawn"])
def test_two_process_gloo_run_trains_both_networks_on_both_ranks(bake, launcher: str) -> None:
    project = bake("gan", backend="gloo", launcher=launcher, nproc_per_node="2", master_port=free_port())
    # batch_size is global: 8 per step split into 4 per process.
    make_offline(project)
    argv, _ = readme_train_command(project)
    proc = run_cmd(argv, cwd=project, timeout=600)
    run_dir, log = check_gan_run(project)
    assert "World size: 2" in log["text"], "training must run in a world of 2 processes"
    assert (run_dir / "training_checkpoint_6.pt").is_file()
    assert "Traceback" not in proc.stderr


def test_resumed_run_ends_with_the_networks_of_an_uninterrupted_one(bake) -> None:
    project = bake("gan", argparser="fire", launcher="none", deterministic=True)
    # Whole epochs (1024 synthetic images / 128 = 8 iterations): the data order and noise are then reproducible.
    make_offline(project, batch_size=128, train_epoch_length=None, log_every_iters=4)
    run_cmd([PYTHON, "main.py", "config.yaml"], cwd=project)
    first_dir = run_dirs(project)[0]
    uninterrupted = torch.load(first_dir / "training_checkpoint_16.pt", weights_only=False)

    after_epoch_1 = first_dir / "training_checkpoint_8.pt"
    run_cmd([PYTHON, "main.py", "config.yaml", f"--resume_from={after_epoch_1}"], cwd=project)
    resumed_dir = run_dirs(project)[1]
    log = read_log(resumed_dir)
    assert "Resumed from" in log["text"]
    assert log["iterations"] == [12, 16], "a resumed run continues after the saved iteration"
    assert [p.name for p in (resumed_dir / "samples").iterdir()] == ["epoch_0002.png"]
    assert (resumed_dir / "losses.png").is_file()
    resumed = torch.load(resumed_dir / "training_checkpoint_16.pt", weights_only=False)
    assert resumed["trainer"]["iteration"] == uninterrupted["trainer"]["iteration"] == 16
    # The loss history behind losses.png comes back with the trainer: the plot starts at iteration 4, not 12.
    history = resumed["trainer"]["loss_history"]
    assert [iteration for iteration, _ in history] == [4, 8, 12, 16], "the resumed plot must show the whole run"
    for (_, resumed_losses), (_, losses) in zip(history, uninterrupted["trainer"]["loss_history"], strict=True):
        assert resumed_losses == pytest.approx(losses, abs=1e-4)
    # A checkpoint from before the trainer kept its history still resumes, with the history starting empty.
    old_checkpoint = torch.load(after_epoch_1, weights_only=False)
    del old_checkpoint["trainer"]["loss_history"]
    torch.save(old_checkpoint, project / "old_checkpoint.pt")
    run_cmd([PYTHON, "main.py", "config.yaml", "--resume_from=old_checkpoint.pt"], cwd=project)
    old_resumed = torch.load(run_dirs(project)[2] / "training_checkpoint_16.pt", weights_only=False)
    assert [iteration for iteration, _ in old_resumed["trainer"]["loss_history"]] == [12, 16]
    for network in ("generator", "discriminator"):
        for name, weight in uninterrupted[network].items():
            assert torch.allclose(resumed[network][name].float(), weight.float(), atol=1e-5), f"{network}.{name}"
    # Adam's moments too: the optimizers were restored, not restarted.
    for optimizer in ("optimizer_g", "optimizer_d"):
        for index, state in uninterrupted[optimizer]["state"].items():
            assert torch.allclose(resumed[optimizer]["state"][index]["exp_avg"], state["exp_avg"], atol=1e-5)


def test_generated_gan_project_tests_pass(bake) -> None:
    project = bake("gan", include_test=True, save_training=False, terminate_on_nan=False)
    run_cmd([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project)
