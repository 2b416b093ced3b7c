{% import "flags.j2" as flags with context %}
"""Runs that survive preemption: a clean stop on SIGTERM or Ctrl-C, and the same command continues the run.

Spot and preemptible machines, Slurm and Kubernetes send SIGTERM some 30 s before they kill; Ctrl-C sends
SIGINT. On the first, every process finishes its iteration, all stop at the same one, rank 0 saves a
training checkpoint, and the command exits with status 128 + the signal's number. The same command run
again finds that run (its ``config-lock.yaml`` matches) and continues it, from its newest complete checkpoint.
"""

import json
import multiprocessing
import os
import signal
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import ignite.distributed as idist
import yaml
from ignite.engine import Engine, Events
{% if cookiecutter.save_training %}
from ignite.handlers import Checkpoint

from handlers import saved_training_checkpoints
{% endif %}

# Config keys that may differ between a run and the command that continues it: none changes what the
# iterations already trained would have been. A larger max_epochs trains a finished run longer.
MAY_CHANGE = ("max_epochs", "log_every_iters", "save_every_iters", "n_saved", "limit_sec", "num_workers")
STATUS_FILE = "status.yaml"


class StopRequest:
    """Why this process should stop training, once it should: a stop signal{{ " or the time limit" if cookiecutter.limit_sec | int > 0 }}."""

    signum: int | None = None
    reason: str | None = None
    at = 0.0


STOP = StopRequest()


def catch_stop_signals() -> None:
    """Turn the first SIGTERM or SIGINT into a stop request; one more, a second or more later, aborts at once.

    Signals within a second of the first are the same request: a terminal, a launcher (torchrun, or the
    process that spawned this one) and a job scheduler may each deliver it.
    """

    def request_stop(signum: int, _frame: Any) -> None:
        if STOP.signum is None:
            STOP.signum, STOP.reason, STOP.at = signum, signal.Signals(signum).name, time.monotonic()
            # The training processes this one started (spawn, TPU replicas) stop too. DataLoader workers,
            # also children, ignore it (ignore_stop_signals).
            for child in multiprocessing.active_children():
                os.kill(child.pid, signal.SIGTERM)
        elif time.monotonic() - STOP.at > 1.0:
            raise KeyboardInterrupt(f"a second stop signal ({signal.Signals(signum).name}): aborted")

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, request_stop)


def ignore_stop_signals(_worker_id: int) -> None:
    """A DataLoader worker's init function: the training process decides when to stop.

    Slurm and a shutting-down machine signal every process: a worker killed by it would fail training at once.
    """
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)


def exit_if_stopped() -> None:
    """After training: exit with status 128 + the signal's number if a signal stopped it (130 for Ctrl-C)."""
    if STOP.signum is not None:
        raise SystemExit(128 + STOP.signum)


class RunDir(NamedTuple):
    """Where this run writes, and the checkpoint it continues from (None for a new run)."""

    path: Path
    checkpoint: Path | None = None
    finished: str = ""  # why an earlier run of this config is finished: then there is nothing to train


def setup_run_dir(config: SimpleNamespace) -> RunDir:
    """The run directory of the last run of this config if it can continue, else a new one (rank 0 decides)."""
    found = ""
    if idist.get_rank() == 0:
        found = json.dumps(_find_run(config) or _new_run(config))
    # Every process needs the same answer.
    path, checkpoint, finished = json.loads(idist.broadcast(found, src=0))
    return RunDir(Path(path), checkpoint and Path(checkpoint), finished)


def _find_run(config: SimpleNamespace) -> tuple[str, str | None, str] | None:
    """The newest run under ``output_dir`` with this config, except for the keys in MAY_CHANGE."""
    current = {key: value for key, value in vars(config).items() if key not in MAY_CHANGE}
    for lock in sorted(Path(config.output_dir).glob("*/config-lock.yaml"), reverse=True):  # newest first
        locked = yaml.safe_load(lock.read_text()) or {}
        if {key: value for key, value in locked.items() if key not in MAY_CHANGE} == current:
            break
    else:
        return None
    run_dir = lock.parent
    status = yaml.safe_load((run_dir / STATUS_FILE).read_text()) if (run_dir / STATUS_FILE).is_file() else {}
    longer = status.get("reason") == "max_epochs" and config.max_epochs > status["epoch"]
    if status.get("status") == "finished" and not longer:
        return str(run_dir), None, f"{status['reason']} at epoch {status['epoch']}, iteration {status['iteration']}"
{% if cookiecutter.save_training %}
    checkpoints = saved_training_checkpoints(run_dir, config.filename_prefix)
    if not checkpoints:  # stopped before its first checkpoint: nothing to continue from
        return None
    _lock_config(run_dir, config)  # with the keys that changed
    return str(run_dir), str(checkpoints[-1][1]), ""
{% else %}
    return None  # without training checkpoints (save_training is off), nothing to continue from
{% endif %}


def _new_run(config: SimpleNamespace) -> tuple[str, None, str]:
    """Create a fresh run directory under ``output_dir`` and save the config there."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(config.output_dir) / f"{stamp}-{config.backend or 'single'}"
    suffix = 1
    while path.exists():  # two runs started in the same second
        suffix += 1
        path = Path(config.output_dir) / f"{stamp}-{config.backend or 'single'}-{suffix}"
    path.mkdir(parents=True)
    _lock_config(path, config)
    return path.as_posix(), None, ""


def _lock_config(run_dir: Path, config: SimpleNamespace) -> None:
    with open(run_dir / "config-lock.yaml", "w") as f:
        yaml.safe_dump(vars(config), f, sort_keys=False)


def setup_clean_stop(
    trainer: Engine,
    config: SimpleNamespace,
    run_dir: Path,
{% if cookiecutter.save_training %}
    save_training: Checkpoint,
{% endif %}
) -> None:
    """Stop all processes at the same iteration once one is asked to, save a checkpoint, record how the run ended.

    With one process the check is free and follows every iteration. With several, they agree in one
    collective where they have synchronised already: where the losses are read (every
    ``log_every_iters`` iterations) and after each epoch's evaluation.
    """
    world_size = idist.get_world_size()
    every = 1 if world_size == 1 else config.log_every_iters
{% if cookiecutter.limit_sec | int > 0 %}
    # Each command trains for limit_sec at most, and the same command continues.
    deadline = time.monotonic() + config.limit_sec
{% endif %}
    trainer.state.stop_reason = None

    @trainer.on(Events.ITERATION_COMPLETED(every=every) | Events.EPOCH_COMPLETED)
    def stop_if_asked(engine: Engine) -> None:
{% if cookiecutter.limit_sec | int > 0 %}
        if STOP.reason is None and time.monotonic() > deadline:
            STOP.reason = f"the time limit (limit_sec: {config.limit_sec})"
{% endif %}
        asked = STOP.reason is not None
        if world_size > 1:
            asked = idist.all_reduce(float(asked), op="MAX") > 0
        if asked and engine.state.stop_reason is None:
            engine.state.stop_reason = STOP.reason or "another process's stop request"
            engine.logger.info("Stopping after iteration %d: %s", engine.state.iteration, engine.state.stop_reason)
            engine.terminate()

    @trainer.on(Events.COMPLETED)
    def record_outcome(engine: Engine) -> None:
        state = engine.state
        if state.stop_reason is not None:
            status, reason = "stopped", state.stop_reason
        elif state.epoch == state.max_epochs and state.iteration % state.epoch_length == 0:
            status, reason = "finished", "max_epochs"
        else:
            status, reason = "finished", "a handler ended it (early stopping, a NaN loss)"
{% if cookiecutter.save_training %}
        # A stopped run saves where it stopped, unless it saved there already (every process keeps the list
        # of files saved, and every process takes part in saving).
        this_iteration = f"{config.filename_prefix}_checkpoint_{state.iteration}.pt"
        saved_here = Path(str(save_training.last_checkpoint)).name == this_iteration
        if status == "stopped" and not saved_here:
            save_training(engine)
        engine.logger.info("Last training checkpoint: %s", save_training.last_checkpoint)
        if status == "stopped":
            engine.logger.info("Stopped. Run the same command to continue from there.")
{% else %}
        if status == "stopped":
            engine.logger.info("Stopped. save_training is off: the same command starts a new run.")
{% endif %}
        if idist.get_rank() == 0:
            outcome = {"status": status, "reason": reason, "epoch": state.epoch, "iteration": state.iteration}
            (run_dir / STATUS_FILE).write_text(yaml.safe_dump(outcome, sort_keys=False))
