"""Runs that survive preemption: a clean stop on SIGTERM (sent some 30 s before a kill by spot machines, Slurm,
Kubernetes) or Ctrl-C. All processes stop at the same iteration, a training checkpoint is saved, the command exits
with 128 + the signal's number, and the same command continues the run from its newest complete checkpoint."""

import atexit
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import ignite.distributed as idist
from ignite.engine import Engine, Events
from ignite.handlers import Checkpoint

from machinery.runs.checkpoints import saved_at
from machinery.runs.directory import write_status
from machinery.settings import RunSettings


class StopRequest:
    """Why this process should stop training, once it should: a stop signal, the time limit, a TPU launcher's word."""

    signum: int | None = None
    reason: str | None = None
    at = 0.0
    limit_sec: int | None = None
    deadline = float("inf")  # limit_sec from the start of training (setup_clean_stop)
    stop_file: Path | None = None  # a TPU replica's: written by its launcher when asked to stop (tpu/replicas.py)
    pass_on: Callable[[int], None] | None = None  # a TPU launcher's: passes a stop on to its replicas
    handled_in = 0  # the process whose stop signals catch_stop_signals handles (a forked child's are its own)
    # With several processes: whether any was asked to stop, as agreed at the last loss reading (handlers.read_losses).
    agreed = False


STOP = StopRequest()
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def catch_stop_signals() -> None:
    """Turn the first SIGTERM or SIGINT into a stop request; one more, a second or more later, aborts at once. Signals
    within a second are the same request (a terminal, a launcher and a job scheduler may each deliver it)."""
    if threading.current_thread() is not threading.main_thread():
        return  # a TPU replica's training thread, where Python cannot handle signals: its launcher passes them on
    if STOP.handled_in == os.getpid():
        return  # installed already: by launch, before start_run in the same process
    STOP.handled_in = os.getpid()

    def request_stop(signum: int, _frame: Any) -> None:
        if STOP.signum is not None and time.monotonic() - STOP.at > 1.0:
            for child in multiprocessing.active_children():
                child.kill()
            raise KeyboardInterrupt(f"a second stop signal ({signal.Signals(signum).name}): aborted")
        if STOP.signum is None:
            STOP.signum, STOP.reason, STOP.at = signum, signal.Signals(signum).name, time.monotonic()
            if STOP.pass_on is not None:  # a TPU launcher's replicas (replicas.watch_replicas)
                STOP.pass_on(signum)
            # The training processes this one spawned stop too (DataLoader workers: loaders.ignore_stop_signals).
            for child in multiprocessing.active_children():
                os.kill(child.pid, signal.SIGTERM)

    for signum in STOP_SIGNALS:
        signal.signal(signum, request_stop)


def asked_to_stop() -> bool:
    """Whether this process was asked to stop: a stop signal, the time limit, or a TPU launcher's stop file."""
    if STOP.reason is None and time.monotonic() > STOP.deadline:
        STOP.reason = f"the time limit (limit_sec: {STOP.limit_sec})"
    if STOP.reason is None and STOP.stop_file is not None and STOP.stop_file.is_file():
        STOP.reason = STOP.stop_file.read_text()
    return STOP.reason is not None


def exit_status() -> int:
    """The status a process exits with after training: 128 + the stop signal's number (130 for Ctrl-C), or 0."""
    return 0 if STOP.signum is None else 128 + STOP.signum


def end_process(status: int) -> NoReturn:
    """End a training process with ``status`` once its exit handlers have run (the log file, the tracker). Not through
    the interpreter's shutdown: gloo's worker threads outlive ``destroy_process_group`` (torch 2.9), and one still in
    a collective then aborts a successful run ("terminate called without an active exception", SIGABRT)."""
    atexit._run_exitfuncs()  # what the interpreter's shutdown would run first
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def setup_clean_stop(trainer: Engine, config: RunSettings, run_dir: Path, save_training: Checkpoint | None) -> None:
    """Stop all processes at the same iteration once one is asked to, save a checkpoint, record how the run ended. With
    several processes they agree every ``log_every_iters``, voting in the losses' read (handlers.read_losses)."""
    world_size = idist.get_world_size()
    # This run's time limit (a previous run's in this process, a multirun's job, is not this one's).
    STOP.limit_sec = config.limit_sec
    STOP.deadline = float("inf") if config.limit_sec is None else time.monotonic() + config.limit_sec
    trainer.state.stop_reason = None
    checks = Events.ITERATION_COMPLETED | Events.EPOCH_COMPLETED
    if world_size > 1:
        checks = Events.ITERATION_COMPLETED(every=config.log_every_iters)

    @trainer.on(checks)
    def stop_if_asked(engine: Engine) -> None:
        # Several processes act on the agreement of the loss reading: all of them at the same iteration.
        asked = asked_to_stop() if world_size == 1 else STOP.agreed
        if asked and engine.state.stop_reason is None:
            engine.state.stop_reason = STOP.reason or "another process's stop request"
            engine.logger.info("Stopping after iteration %d: %s", engine.state.iteration, engine.state.stop_reason)
            engine.terminate()

    @trainer.on(Events.COMPLETED)
    def record_outcome(engine: Engine) -> None:
        state = engine.state
        if state.stop_reason is not None:
            status, reason = "stopped", state.stop_reason
        elif getattr(state, "pruned", None):  # a sweep's trial (sweeps/pruning.py)
            status, reason = "pruned", state.pruned
        elif state.epoch == state.max_epochs and state.iteration % state.epoch_length == 0:
            status, reason = "finished", "max_epochs"
        else:
            status, reason = "finished", "a handler ended it (early stopping, a NaN loss)"
        if save_training is None:
            if status == "stopped":
                engine.logger.info("Stopped. save_training is off: the same command starts a new run.")
        else:
            # Save where it stopped unless saved there already (every process keeps the list of saves and takes part).
            if status == "stopped" and not saved_at(save_training, state.iteration):
                save_training(engine)
            engine.logger.info("Last training checkpoint: %s", save_training.last_checkpoint)
            if status == "stopped":
                engine.logger.info("Stopped. Run the same command to continue from there.")
        if idist.get_rank() == 0:
            write_status(run_dir, status=status, reason=reason, epoch=state.epoch, iteration=state.iteration)
