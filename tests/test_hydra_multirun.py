"""Hydra's multirun (``-m``): the README's grid command trains every job, each in a run directory of its own, and
its exit status says whether all succeeded; a stop ends it after the job in training has saved its checkpoint,
and the same command continues the grid where it stopped.

The stops are real SIGTERMs to the command's process (tests/probes/stop_signals.py), at exact moments.
"""

import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest
import yaml
from environments import PYTHON
from projects import make_offline, read_log, run_dirs, run_status
from readme_examples import commands, example

pytestmark = pytest.mark.slow  # they train generated projects: not in the quick lane

PROBE = Path(__file__).parent / "probes"
SIGTERM_EXIT = 128 + signal.SIGTERM


def readme_multirun_command(project: Path) -> list[str]:
    """The grid command of the README's "Train" section, exactly as written, bound to the tests' Python."""
    (command,) = commands(example((project / "README.md").read_text(), "## Train", "bash", r" -m "))
    argv = shlex.split(command)
    if argv[0] == "python":
        return [PYTHON, *argv[1:]]
    assert argv[0] == "torchrun", f"unexpected multirun command in the README: {command}"
    return [PYTHON, "-m", "torch.distributed.run", *argv[1:]]


def multirun(project: Path, argv: list[str], probe: str = "") -> subprocess.CompletedProcess:
    """Run ``argv`` in ``project``, with the stop probe set to ``probe`` (torchrun on config.yaml's master_port, which
    make_offline gives each project its own)."""
    port = str(yaml.safe_load((project / "config.yaml").read_text())["master_port"])
    env = {
        **os.environ,
        "PYTHONPATH": str(PROBE),
        "STOP_PROBE": probe,
        "PYTHONUNBUFFERED": "1",
        "PET_MASTER_PORT": port,
    }
    return subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=300, env=env)


def outcome(proc: subprocess.CompletedProcess) -> str:
    return f"exit code {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-5000:]}"


def locked(run_dir: Path, key: str):
    return yaml.safe_load((run_dir / "config-lock.yaml").read_text())[key]


def test_a_multirun_trains_each_job_and_a_stopped_one_continues_where_it_stopped(bake) -> None:
    """The README's command as written, stopped twice by SIGTERM: in job #0, then in job #1 once the same command
    has finished job #0; the third time it continues job #1 and trains nothing again. A grid with failing jobs
    trains the others and exits with 1, naming each failed job."""
    project = bake("vision-classification", argparser="hydra", backend="gloo", launcher="none")
    # 2 epochs of 3 iterations; checkpoints at iterations 2, 3, 4 and 6: the probe's SIGTERM comes while
    # checkpoint 2 is written, which only a job that starts at iteration 1 writes.
    make_offline(project, max_epochs=2, train_epoch_length=3, save_every_iters=2, log_every_iters=1)
    argv = readme_multirun_command(project)
    assert argv[-2:] == ["-m", "lr=0.001,0.01"], argv

    proc = multirun(project, argv, "save:2")
    assert proc.returncode == SIGTERM_EXIT, f"a stop in job #0 ends the command with 143\n{outcome(proc)}"
    (first,) = run_dirs(project)  # job #1 did not start
    assert locked(first, "lr") == 0.001
    assert run_status(first) == {"status": "stopped", "reason": "SIGTERM", "epoch": 1, "iteration": 2}
    assert (first / "training_checkpoint_2.pt").is_file()

    proc = multirun(project, argv, "save:2")  # job #0 continues from iteration 3: its checkpoints are 3, 4, 6
    assert proc.returncode == SIGTERM_EXIT, f"a stop in job #1 ends the command with 143\n{outcome(proc)}"
    assert run_status(first) == {"status": "finished", "reason": "max_epochs", "epoch": 2, "iteration": 6}
    first_again, second = run_dirs(project)
    assert first_again == first and locked(second, "lr") == 0.01
    assert run_status(second) == {"status": "stopped", "reason": "SIGTERM", "epoch": 1, "iteration": 2}

    proc = multirun(project, argv)
    assert proc.returncode == 0, outcome(proc)
    assert run_dirs(project) == [first, second], "each job continues its own run"
    for run_dir in (first, second):
        assert run_status(run_dir) == {"status": "finished", "reason": "max_epochs", "epoch": 2, "iteration": 6}
        log = read_log(run_dir)
        assert log["iterations"] == list(range(1, 7)), f"{run_dir.name}: each iteration trained once"
        assert log["text"].count("Continuing the run in") == 1, log["text"]
        assert len(log["evals"]) == 2, f"{run_dir.name}: one evaluation per epoch"
    assert "finished (max_epochs at epoch 2, iteration 6): nothing to train" in read_log(first)["text"]
    # Hydra writes the grid's settings beside the runs, nothing outside output_dir.
    assert (project / "logs" / "multirun.yaml").is_file() and not (project / "multirun").exists()

    # A job that fails (Adam refuses a negative learning rate), one whose config is refused, and one that trains.
    proc = multirun(project, [*argv[:-1], "lr=-1,abc,0.1"])
    assert proc.returncode == 1, f"a failed job: the command fails\n{outcome(proc)}"
    assert "Error executing job with overrides: ['lr=-1']" in proc.stderr, outcome(proc)
    summary = proc.stderr.split("2 of the multirun's jobs failed:\n", 1)[-1].splitlines()
    assert summary[:2] == [
        "  #0 (lr=-1): ValueError: Invalid learning rate: -1.0",
        "  #1 (lr=abc): The config Hydra composed has values that are not allowed: lr: 'abc' is not allowed: it "
        "must be a valid number",
    ], outcome(proc)
    *_, failed, trained = run_dirs(project)  # the refused job made none
    assert locked(failed, "lr") == -1 and run_status(failed)["status"] == "failed"
    assert locked(trained, "lr") == 0.1
    assert run_status(trained) == {"status": "finished", "reason": "max_epochs", "epoch": 2, "iteration": 6}


def test_a_multirun_with_torchrun_trains_each_job_in_one_process_group(bake) -> None:
    """torchrun's two processes train every job of the README's grid, in one process group for the command (a new
    group per job could read the last one's addresses in torchrun's store), and end with status 0."""
    project = bake(argparser="hydra", backend="gloo", launcher="torchrun")
    make_offline(project, max_epochs=1, train_epoch_length=3, log_every_iters=1)
    proc = multirun(project, readme_multirun_command(project))
    assert proc.returncode == 0, outcome(proc)
    runs = run_dirs(project)
    assert [locked(run_dir, "lr") for run_dir in runs] == [0.001, 0.01], runs
    for run_dir in runs:
        assert run_status(run_dir) == {"status": "finished", "reason": "max_epochs", "epoch": 1, "iteration": 3}
        log = read_log(run_dir)
        assert "World size: 2, backend: gloo" in log["text"] and log["iterations"] == [1, 2, 3], log["text"]
