{% import "flags.j2" as flags with context %}
"""The TPU launcher and its replicas, threads or TPU VM processes that cannot handle signals: the launcher passes a stop
on through a folder they inherit, or ends them at once when nothing is unsaved (during the first, compiling iteration,
which may outlast a preemption notice, say); a failed replica says so there, and the launcher ends the rest."""

import contextlib
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from traceback import format_exception
from typing import NoReturn

import ignite.distributed as idist
from ignite.engine import Engine, Events
from ignite.handlers import Checkpoint

from machinery.runs.checkpoints import saved_at
from machinery.runs.directory import write_status
from machinery.runs.preemption import STOP, STOP_SIGNALS

REPLICAS_FOLDER = "TRAINING_REPLICAS_FOLDER"  # where the launcher and its replicas meet (inherited)
UNSAVED = "unsaved"  # there while replica 0 has trained iterations that no checkpoint holds yet
FAILED = "failed"  # there once a replica's run failed: which replica, and its error
# Seconds the others get to end on their own after a replica failed (a bad config fails all) before they are ended.
FAILED_GRACE_SECONDS = {{ flags.failed_replica_grace_s }}


def watch_replicas(launch: Callable[[], None]) -> None:
    """Call ``launch`` (torch_xla.launch) in a thread; the replicas inherit the stop signals ignored and read a stop
    from a file this process writes. Its handlers (catch_stop_signals) are restored once all started
    (replicas_started)."""
    folder = Path(tempfile.mkdtemp())
    os.environ[REPLICAS_FOLDER] = str(folder)
    STOP.pass_on = _pass_on
    caught = {signum: signal.signal(signum, signal.SIG_IGN) for signum in STOP_SIGNALS}
    failed: list[BaseException] = []

    def launch_and_keep_error() -> None:
        try:
            launch()
        except BaseException as error:  # raised again below, in the main thread
            failed.append(error)

    launcher = threading.Thread(target=launch_and_keep_error)
    launcher.start()
    while launcher.is_alive() and not (folder / "started").exists() and not (folder / FAILED).exists():
        launcher.join(0.1)
    for signum, handler in caught.items():
        signal.signal(signum, handler)
    failed_at: float | None = None
    while launcher.is_alive():
        launcher.join(0.5)  # returns now and then: signal handlers run in this thread only
        if failed_at is None and (folder / FAILED).exists():
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > FAILED_GRACE_SECONDS:
            _end_after_failure(folder)
    shutil.rmtree(folder)
    if failed:
        raise failed[0]


def _pass_on(signum: int) -> None:
    """Tell the replicas to stop (they read the file as they check for a stop); end at once if nothing is unsaved."""
    folder = Path(os.environ[REPLICAS_FOLDER])
    if (folder / FAILED).exists():  # a replica failed: the others may wait for it, and no stop would come
        _end_after_failure(folder)
    (folder / "stop").write_text(signal.Signals(signum).name)
    if not (folder / UNSAVED).exists():
        stop_at_once(signum)


def stop_at_once(signum: int) -> NoReturn:
    """End the replicas and this process now: nothing is unsaved, and the current iteration may compile for minutes."""
    _kill_replica_processes()
    reason = f"{signal.Signals(signum).name}, with nothing trained since the last checkpoint: stopped at once"
    folder = Path(os.environ[REPLICAS_FOLDER])
    if (folder / "run_dir").is_file():  # replica 0 has its run directory
        run_dir = Path((folder / "run_dir").read_text())
        stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        with open(run_dir / "training.log", "a") as log:
            log.write(f"{stamp} train INFO: Stopped: {reason}. Run the same command to continue.\n")
        write_status(run_dir, status="stopped", reason=reason)
    shutil.rmtree(folder)
    print(f"Stopped: {reason}.", file=sys.stderr, flush=True)
    os._exit(128 + signum)


def replica_failed(error: BaseException) -> None:
    """From a replica whose run failed (recorded in its run directory): tell the launcher, the first time."""
    if REPLICAS_FOLDER in os.environ:
        # OSError: another replica failed first (the file exists), or a full disk (an empty file still tells).
        with contextlib.suppress(OSError), open(Path(os.environ[REPLICAS_FOLDER]) / FAILED, "x") as report:
            report.write(f"Replica {idist.get_rank()} failed:\n{''.join(format_exception(error))}")


def _end_after_failure(folder: Path) -> NoReturn:
    """End the replicas and this process: one replica failed, and the others wait for it in a collective."""
    _kill_replica_processes()
    report = (folder / FAILED).read_text() or "A replica failed: its error is in training.log."
    shutil.rmtree(folder)
    waited = f"The other replicas, waiting for it, were ended after {FAILED_GRACE_SECONDS} s."
    print(f"{report.rstrip()}\n{waited}", file=sys.stderr, flush=True)
    os._exit(1)


def _kill_replica_processes() -> None:
    """Kill the replica processes (a TPU VM's; threads of this process end with it at its os._exit), and first the
    processes multiprocessing started for them: their loader workers, left running, hold batches no process takes."""
    replicas = multiprocessing.active_children()
    for pid in _started_by_multiprocessing({replica.pid for replica in replicas}):
        with contextlib.suppress(OSError):  # ended meanwhile
            os.kill(pid, signal.SIGKILL)
    for replica in replicas:
        replica.kill()


def _started_by_multiprocessing(roots: set[int]) -> list[int]:
    """The processes under ``roots`` that multiprocessing started (not a tracker's helper, left to end on its own),
    from /proc (Linux's, a TPU VM's)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):  # ended meanwhile
            parent = int(stat.read_text().rsplit(") ", 1)[1].split()[1])  # after the command's name, its state
            children.setdefault(parent, []).append(int(stat.parent.name))
    found: list[int] = []
    unseen = list(roots)
    while unseen:
        for pid in children.get(unseen.pop(), []):
            unseen.append(pid)
            with contextlib.suppress(OSError):
                if b"multiprocessing" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
    return found


def replicas_started() -> None:
    """Tell watch_replicas, from replica 0 once every replica has joined, that it may catch signals again."""
    if idist.get_rank() == 0 and REPLICAS_FOLDER in os.environ:
        (Path(os.environ[REPLICAS_FOLDER]) / "started").touch()


def follow_launcher(trainer: Engine, run_dir: Path, save_training: Checkpoint | None) -> None:
    """In each replica: stop when the launcher says so; on replica 0, tell it whether anything is unsaved."""
    if REPLICAS_FOLDER not in os.environ:
        return  # not started by watch_replicas (a test calling run() itself)
    folder = Path(os.environ[REPLICAS_FOLDER])
    STOP.stop_file = folder / "stop"  # read by preemption.asked_to_stop
    if idist.get_rank() != 0:
        return
    (folder / "run_dir").write_text(str(run_dir))
    unsaved = folder / UNSAVED

    @trainer.on(Events.ITERATION_STARTED)
    def note_training(engine: Engine) -> None:
        # From the command's second iteration on, a stop must save; the first compiles (minutes on a TPU), and a
        # stop then loses it at most. Other replicas may be an iteration ahead of replica 0: they await its gradients.
        if engine.state.iteration > engine.state.first_iteration:
            unsaved.touch()

    @trainer.on(Events.ITERATION_COMPLETED | Events.EPOCH_COMPLETED)
    def note_saved(engine: Engine) -> None:
        # The epoch's last iteration is saved at the epoch's end, after its ITERATION_COMPLETED (with save_training
        # off, no checkpoint holds any iteration).
        if saved_at(save_training, engine.state.iteration):
            unsaved.unlink(missing_ok=True)
        else:
            unsaved.touch()

    @trainer.on(Events.STARTED)
    def note_start(engine: Engine) -> None:
        engine.state.first_iteration = engine.state.iteration + 1  # a continued run starts where it stopped
