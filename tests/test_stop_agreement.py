"""A stop that reaches one training process only still stops every process at the same iteration.

The README's "Stop and continue" says: "every process finishes the iteration it is in, all stop at the same one,
rank 0 saves a training checkpoint". A stop signal to the launcher, or to every process at once, reaches each
process at the same reading, and would stop them together even if each decided alone. Here the stop reaches one
process only, and not rank 0, which saves (tests/probes/one_stop.py): a SIGTERM to one training process (one
node's preemption notice), under torchrun and under spawn. The others learn of it only through the vote the
processes agree on where they read the losses (handlers.read_losses): without it, the one process stops alone and
the others wait for it in their next collective, or fail there. (Measured: with each process's own request in
place of the agreed vote, every case fails.) TPU replicas agree by the same vote: one replica's time limit stops 8
of them, each with a stop request of its own, in test_xla_replicas.py's stopped and continued run.
"""

import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from environments import PYTHON
from projects import make_offline, read_log, readme_train_command, run_dirs, run_status

pytestmark = pytest.mark.slow  # they train, stop and continue generated projects: not in the quick lane

PROBE = Path(__file__).parent / "probes"
# 6 iterations, the losses read (and the stop agreed on) every 2; the stop reaches rank 1 during iteration 3,
# so every process stops after iteration 4, the next reading: not the iteration the stop came in.
ITERATIONS, EVERY, STOP_DURING, STOPPED_AFTER = 6, 2, 3, 4


def train(project: Path, records: Path, python: str, env: dict, timeout: int) -> tuple[int, str]:
    """Run the README's training command in ``project`` with the probes and ``env``; each process's record goes
    to ``records``. Return the exit status and the output; a command still running after ``timeout`` seconds
    (processes waiting for one another for ever) is killed with every process it started, and fails the test."""
    argv, readme_env = readme_train_command(project, python)
    probes = {"PYTHONPATH": str(PROBE), "RANK_PROBE_DIR": str(records), "PYTHONUNBUFFERED": "1"}
    records.mkdir(parents=True)
    with subprocess.Popen(
        argv,
        cwd=project,
        env={**os.environ, **readme_env, **probes, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: torchrun's workers, spawned processes, XLA's child
    ) as command:
        try:
            output, _ = command.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(command.pid, signal.SIGKILL)
            output, _ = command.communicate()
            pytest.fail(f"the command still ran after {timeout} s: processes waiting for one another\n{output[-5000:]}")
    return command.returncode, output


def records_of(records: Path) -> list[dict]:
    """What each process trained: its rank, its last iteration, its batches, the files it renamed into place."""
    return [torch.load(path, weights_only=True) for path in sorted(records.glob("rank*.pt"))]


# Each launcher with two processes.
LAUNCHES = {
    "torchrun": {"backend": "gloo", "launcher": "torchrun"},
    "spawn": {"backend": "gloo", "launcher": "spawn"},
}
# Each launcher and the stop that reaches its rank 1 (one_stop.py's WHAT): a SIGTERM to one of torchrun's workers
# or to one of the processes spawn started (their launcher gets none). A TPU launcher's replicas take no signals
# (they read its stop file, or their own time limit): one replica past its limit is test_xla_replicas.py's, on 8
# replicas (62 s of a 2-replica XLA run here saved).
CASES = ["torchrun:signal", "spawn:signal"]
# What the stopped command exits with: torchrun's 1 for a worker that exited 143; spawn's launcher 143, the status
# of the signal one of its processes had (as if it had had it).
STOPPED_EXIT = {"torchrun:signal": 1, "spawn:signal": 143}


@pytest.mark.parametrize("case", CASES)
def test_a_stop_that_reaches_one_process_stops_all_after_the_same_iteration_and_the_rerun_finishes(
    bake, tmp_path: Path, case: str
) -> None:
    """README, "Stop and continue": every process finishes the iteration it is in, all stop at the same one,
    rank 0 saves a training checkpoint; the same command continues the run. Here the stop reaches rank 1 only
    (a SIGTERM to that process), and rank 0 saves."""
    launch, what = case.split(":")
    project = bake("gan", **LAUNCHES[launch])
    make_offline(project, max_epochs=1, train_epoch_length=ITERATIONS, log_every_iters=EVERY)

    stop = {"ONE_STOP": f"{what}:1:{STOP_DURING}"}
    status, output = train(project, tmp_path / "stopped", PYTHON, stop, 120)
    assert status == STOPPED_EXIT[case], f"exit code {status}\n{output[-5000:]}"
    (run_dir,) = run_dirs(project)
    # Rank 0, which writes it, learnt of the stop from rank 1's vote only.
    stopped = {"status": "stopped", "reason": "another process's stop request", "epoch": 1, "iteration": STOPPED_AFTER}
    assert run_status(run_dir) == stopped, f"{run_status(run_dir)}\n{output[-5000:]}"
    ranks = records_of(tmp_path / "stopped")
    assert [(r["rank"], r["iteration"]) for r in ranks] == [(0, STOPPED_AFTER), (1, STOPPED_AFTER)], (
        "both processes stop after the same iteration, the reading after the stop reached rank 1"
    )
    checkpoint = f"training_checkpoint_{STOPPED_AFTER}.pt"
    assert [p.name for p in run_dir.glob("*.pt")] == [checkpoint], "one checkpoint, where they stopped"
    assert [[name for name in r["renamed"] if name.endswith(".pt")] for r in ranks] == [[checkpoint], []], (
        "rank 0 saves it, once"
    )
    assert "Traceback" not in (run_dir / "training.log").read_text()

    status, output = train(project, tmp_path / "continued", PYTHON, {}, 120)
    assert status == 0, f"exit code {status}\n{output[-5000:]}"
    assert run_dirs(project) == [run_dir], "the same command continues the stopped run"
    finished = {"status": "finished", "reason": "max_epochs", "epoch": 1, "iteration": ITERATIONS}
    assert run_status(run_dir) == finished
    assert read_log(run_dir)["iterations"] == list(range(EVERY, ITERATIONS + 1, EVERY)), "each iteration once"
    ranks = records_of(tmp_path / "continued")
    assert [(r["rank"], r["iteration"], len(r["batches"])) for r in ranks] == [
        (rank, ITERATIONS, ITERATIONS - STOPPED_AFTER) for rank in (0, 1)
    ], "each process trains the iterations left, from where all stopped"
