"""Runs survive preemption: a stop signal stops every process cleanly with a checkpoint, and the same
command continues the run, to the same final state as a run never interrupted.

The signals land at exact moments through tests/stop_probe (a sitecustomize module the training processes
import at start-up): during an iteration, as an epoch's end handlers start (the classifiers' evaluation),
and in the middle of writing a checkpoint.
"""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from helpers import (
    PYTHON,
    TEMPLATES,
    XLA_PYTHON,
    differences,
    free_port,
    load_checkpoint,
    make_offline,
    read_log,
    readme_train_command,
    run_dirs,
)

PROBE = Path(__file__).parent / "stop_probe"
SIGTERM_EXIT = 128 + signal.SIGTERM


def train(project: Path, probe: str = "", python: str = PYTHON, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run the README's training command in ``project``, with the stop probe set to ``probe``."""
    argv, env = readme_train_command(project, python)
    if python == XLA_PYTHON:
        env["PJRT_DEVICE"] = "CPU"
    env = {**os.environ, **env, "PYTHONPATH": str(PROBE), "STOP_PROBE": probe, "PYTHONUNBUFFERED": "1"}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    return subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=timeout, env=env)


def outcome(proc: subprocess.CompletedProcess) -> str:
    return f"exit code {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-5000:]}"


def status(run_dir: Path) -> dict:
    return yaml.safe_load((run_dir / "status.yaml").read_text())


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_run_stopped_three_times_and_continued_ends_bit_identical_to_an_uninterrupted_one(
    bake, tmp_path: Path, template: str
) -> None:
    project = bake(template, launcher="none", deterministic=True, save_training=True)
    # 3 epochs of 4 iterations, a checkpoint every 3 iterations and after each epoch, every loss logged.
    make_offline(project, max_epochs=3, train_epoch_length=4, save_every_iters=3, log_every_iters=1)
    uninterrupted = tmp_path / "uninterrupted"
    shutil.copytree(project, uninterrupted)
    proc = train(uninterrupted)
    assert proc.returncode == 0, outcome(proc)
    (expected_dir,) = run_dirs(uninterrupted)

    # Each stop: where the signal lands, and the iteration the run stops after (its last checkpoint).
    stops = [("iteration:2", 2), ("epoch_end:1", 4), ("save:6", 6)]
    for probe, stopped_at in stops:
        proc = train(project, probe)
        assert proc.returncode == SIGTERM_EXIT, f"SIGTERM at {probe}: the run must exit with 143\n{outcome(proc)}"
        (run_dir,) = run_dirs(project)  # every rerun continues the same run, in its directory
        assert status(run_dir) == {"status": "stopped", "reason": "SIGTERM", "epoch": (stopped_at - 1) // 4 + 1,
                                   "iteration": stopped_at}, f"after SIGTERM at {probe}"
        assert (run_dir / f"training_checkpoint_{stopped_at}.pt").is_file(), f"no checkpoint where {probe} stopped"
        assert not list(run_dir.glob("tmp*")), "a half-written checkpoint was left behind"
    proc = train(project)
    assert proc.returncode == 0, outcome(proc)
    assert status(run_dir) == {"status": "finished", "reason": "max_epochs", "epoch": 3, "iteration": 12}

    log = read_log(run_dir)
    assert log["iterations"] == list(range(1, 13)), "every iteration is trained exactly once across the four runs"
    assert log["text"].count("Continuing the run in") == 3, log["text"]
    if template != "gan":
        assert len(log["evals"]) == 3, "one evaluation per epoch: the one the stop landed in is not repeated"
        assert log["evals"] == read_log(expected_dir)["evals"], "the continued run evaluates as the uninterrupted one"
    final = load_checkpoint(run_dir / "training_checkpoint_12.pt", deterministic=True)
    expected = load_checkpoint(expected_dir / "training_checkpoint_12.pt", deterministic=True)
    assert not differences(final, expected), f"continued != uninterrupted: {differences(final, expected)[:10]}"
    assert sorted(p.name for p in run_dir.glob("*.pt")) == sorted(p.name for p in expected_dir.glob("*.pt"))

    # The same command once more: the run is finished, nothing trains.
    proc = train(project)
    assert proc.returncode == 0, outcome(proc)
    assert "finished (max_epochs at epoch 3, iteration 12): nothing to train" in read_log(run_dir)["text"]
    assert read_log(run_dir)["iterations"] == list(range(1, 13))
