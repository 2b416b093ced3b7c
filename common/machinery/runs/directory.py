"""The run directory: a new one, or the interrupted run's, which the same command continues (preemption.py) when its
``config-lock.yaml`` matches the config but for ``MAY_CHANGE``. A finished run is not trained again; a stopped one
continues from its newest complete checkpoint. A command holds its run directory while it trains (files.hold)."""

import errno
import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from traceback import format_exception
from typing import Any

import ignite.distributed as idist
import yaml

from machinery.runs.checkpoints import newest_intact
from machinery.runs.files import STATUS_FILE, Unusable, hold, read_run_file, release_run_dir, write_whole
from machinery.settings import RunSettings, as_dict

# Keys a continuing command may change: none alters the iterations trained (where the spawned processes meet is the
# machine's, not the run's). A larger max_epochs trains longer.
MAY_CHANGE = (
    "max_epochs",
    "log_every_iters",
    "save_every_iters",
    "n_saved",
    "limit_sec",
    "num_workers",
    "timer",
    "save_best_model",
    "master_addr",
    "master_port",
)
# The class names, in the order of the model's outputs, beside the run's models (write_classes).
CLASSES_FILE = "classes.json"


class _Current:
    """This process's run directory once ``setup_run_dir`` found it, and since when (``record_failure``)."""

    path: Path | None = None
    since = 0.0


def setup_run_dir(config: RunSettings) -> tuple[Path, Path | None, str, list[str]]:
    """The last run of this config if it can continue, else a new one (rank 0 decides): the directory, the checkpoint
    it continues from (None if new), why it finished if it has (nothing to train), and unreadable files, for the log."""
    found = ""
    if idist.get_rank() == 0:
        release_run_dir()  # a previous run's, in this process (a notebook, a test)
        notes: list[str] = []
        try:
            found = json.dumps([*(_find_run(config, notes) or _new_run(config)), notes])
        except Unusable as error:
            found = json.dumps({"unusable": str(error)})
    answer = json.loads(idist.broadcast(found, src=0))
    if "unusable" in answer:
        raise SystemExit(answer["unusable"])  # the message alone: no traceback
    path, checkpoint, finished, notes = answer
    _Current.path, _Current.since = Path(path), time.time()
    return Path(path), checkpoint and Path(checkpoint), finished, notes


def _find_run(config: RunSettings, notes: list[str]) -> tuple[str, str | None, str] | None:
    """The newest run under ``output_dir`` with this config, except for the keys in MAY_CHANGE. A key its lock lacks
    (one added to the project since the run started) counts as its default, with which the run trained. When the
    newest run stopped with another config, ``notes`` says which keys keep it from continuing."""
    defaults = {key: field.default for key, field in type(config).model_fields.items()}
    current = _compared(as_dict(config))
    newest = None
    for lock in sorted(Path(config.output_dir).glob("*/config-lock.yaml"), reverse=True):  # newest first
        locked = read_run_file(lock, notes)
        if locked is None:
            continue
        locked = _compared({**defaults, **locked})
        if locked != current:
            newest = newest or (lock.parent, locked)
            continue
        status = read_run_file(lock.parent / STATUS_FILE, notes) if (lock.parent / STATUS_FILE).exists() else {}
        if status is not None:
            break
    else:
        if newest:
            _note_not_continued(*newest, current, notes)
        return None
    run_dir = lock.parent
    hold(run_dir)  # before anything is read or written: a command training there keeps it
    longer = status.get("reason") == "max_epochs" and config.max_epochs > status["epoch"]
    if status.get("status") == "finished" and not longer:
        return str(run_dir), None, f"{status['reason']} at epoch {status['epoch']}, iteration {status['iteration']}"
    checkpoint = newest_intact(run_dir, config.filename_prefix, notes) if config.save_training else None
    if checkpoint is None:  # stopped before its first checkpoint (or save_training is off): nothing to continue from
        release_run_dir()
        return None
    _lock_config(run_dir, config)  # with the keys that changed
    return str(run_dir), str(checkpoint), ""


def _compared(values: dict[str, Any]) -> dict[str, Any]:
    """The keys that tell two runs apart: all but MAY_CHANGE."""
    return {key: value for key, value in values.items() if key not in MAY_CHANGE}


def _note_not_continued(run_dir: Path, locked: dict[str, Any], current: dict[str, Any], notes: list[str]) -> None:
    """Say why the newest run, if it stopped, is not continued: the keys whose values differ (three at most)."""
    status = read_run_file(run_dir / STATUS_FILE, []) if (run_dir / STATUS_FILE).is_file() else None
    if not status or status.get("status") != "stopped":
        return
    keys = sorted(key for key in locked.keys() | current.keys() if locked.get(key, "?") != current.get(key, "?"))
    changes = ", ".join(f"{key}: {locked.get(key, '-')!r} there, {current.get(key, '-')!r} here" for key in keys[:3])
    more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
    notes.append(f"The stopped run in {run_dir} is not continued, its config differing ({changes}{more}): a new run")


def _new_run(config: RunSettings) -> tuple[str, None, str]:
    """Create a fresh run directory under ``output_dir``, hold it and save the config there."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(config.output_dir) / f"{stamp}-{config.backend or 'single'}"
    suffix = 1
    while path.exists():  # two runs started in the same second
        suffix += 1
        path = Path(config.output_dir) / f"{stamp}-{config.backend or 'single'}-{suffix}"
    path.mkdir(parents=True)
    hold(path)  # before config-lock.yaml, by which another command would find it
    _lock_config(path, config)
    return path.as_posix(), None, ""


def write_classes(run_dir: Path, classes: Sequence[str]) -> None:
    """Keep the class names beside the run's models (rank 0): predictions and exports name classes with them."""
    if idist.get_rank() == 0:
        (run_dir / CLASSES_FILE).write_text(json.dumps(list(classes), indent=1) + "\n")


def write_status(run_dir: Path, **outcome: Any) -> None:
    """Record how the run ended in its ``status.yaml``: ``status`` and ``reason`` first."""
    write_whole(run_dir / STATUS_FILE, yaml.safe_dump(outcome, sort_keys=False))


def run_recorded(local_rank: int, run: Callable[[int, RunSettings], None], config: RunSettings) -> None:
    """``run(local_rank, config)``; an error that ends it is recorded in the run directory, then raised again. Fixed
    (the data, say), the same command continues the run from its newest checkpoint (with save_training on)."""
    _Current.path = None  # a previous run's, in this process (a notebook, a test)
    try:
        run(local_rank, config)
    except (Exception, KeyboardInterrupt) as error:
        if _Current.path is not None:  # else it failed before it had a run directory
            record_failure(_Current.path, error)
        raise
    finally:
        if idist.get_rank() == 0:  # the hold is rank 0's; replicas that are threads of one process share it
            release_run_dir()


def record_failure(run_dir: Path, error: BaseException) -> None:
    """Log the error with its traceback in ``training.log``; record it in ``status.yaml``: failed, aborted (a second
    stop signal) or stopped (a full disk). status.yaml keeps this command's first (later ones often follow from it)."""
    message = str(error).strip()
    # A DataLoader worker's error holds the worker's traceback, whose last line is the error itself.
    worker = "Original Traceback" in message
    reason = message.splitlines()[-1] if worker else f"{type(error).__name__}: {message}".splitlines()[0]
    status = "aborted" if isinstance(error, KeyboardInterrupt) else "failed"
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        status = "stopped"  # a full disk: with space freed, the same command continues
    process = f" in process {idist.get_rank()}" if idist.get_world_size() > 1 else ""
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    with open(run_dir / "training.log", "a") as log:  # not the console: Python prints the traceback there
        log.write(f"{stamp} train ERROR: The run {status}{process}: {reason}\n{''.join(format_exception(error))}")
    path = run_dir / STATUS_FILE
    earlier = read_run_file(path, []) if path.is_file() and path.stat().st_mtime >= _Current.since else None
    if not _is_failure(earlier or {}):
        write_status(run_dir, status=status, reason=reason)


def _is_failure(status: dict[str, Any]) -> bool:
    """Whether ``status`` (status.yaml's content) records a failure, a full disk's stop included."""
    disk_full = status.get("status") == "stopped" and f"[Errno {errno.ENOSPC}]" in str(status.get("reason"))
    return status.get("status") in ("failed", "aborted") or disk_full


def _lock_config(run_dir: Path, config: RunSettings) -> None:
    write_whole(run_dir / "config-lock.yaml", yaml.safe_dump(as_dict(config), sort_keys=False))
