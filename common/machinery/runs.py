{% import "flags.j2" as flags with context %}
"""The run directory: a new one, or the interrupted run's, which the same command continues (preemption.py).

A run is the same when its ``config-lock.yaml`` matches the config, except for the keys in ``MAY_CHANGE``.
A run that finished is not trained again; one that stopped continues from its newest complete checkpoint.
A command holds its run directory while it trains (``RUN_HOLD``): the same command run again meanwhile
stops at once, and the hold ends with the process, however it ends.
"""

import errno
import json
import os
import tempfile
import time
{% if cookiecutter.save_training %}
import zipfile
{% endif %}
from collections.abc import Callable{{ ", Sequence" if flags.eval_metric }}
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from traceback import format_exception
from typing import Any, NamedTuple

import ignite.distributed as idist
import yaml

from config import Config

if os.name == "posix":
    import fcntl
else:  # Windows: no hold (two commands of one config there must not run at once)
    fcntl = None

# Config keys that may differ between a run and the command that continues it: none changes what the
# iterations already trained would have been. A larger max_epochs trains a finished run longer.
MAY_CHANGE = ("max_epochs", "log_every_iters", "save_every_iters", "n_saved", "limit_sec", "num_workers")
# How the run ended: stopped (to continue), finished (preemption.setup_clean_stop), failed or aborted (record_failure).
STATUS_FILE = "status.yaml"
# Locked while a command trains in the run directory (flock: the lock goes with the process), holding its PID.
RUN_HOLD = "run.lock"
{% if flags.eval_metric %}
# The class names, in the order of the model's outputs, beside the run's models (write_classes).
CLASSES_FILE = "classes.json"
{% endif %}


class _Current:
    """This process's run directory once ``setup_run_dir`` found it, since when (``record_failure``), and its
    hold (rank 0's open ``RUN_HOLD``)."""

    path: Path | None = None
    since = 0.0
    hold: Any = None


class RunDir(NamedTuple):
    """Where this run writes, and the checkpoint it continues from (None for a new run)."""

    path: Path
    checkpoint: Path | None = None
    finished: str = ""  # why an earlier run of this config is finished: then there is nothing to train
    notes: tuple[str, ...] = ()  # what was found unreadable on the way, for the log


class _Unusable(Exception):
    """The run this command would continue cannot be continued: the message says why, and what to do."""


def setup_run_dir(config: Config) -> RunDir:
    """The run directory of the last run of this config if it can continue, else a new one (rank 0 decides)."""
    found = ""
    if idist.get_rank() == 0:
        release_run_dir()  # a previous run's, in this process (a notebook, a test)
        notes: list[str] = []
        try:
            found = json.dumps([*(_find_run(config, notes) or _new_run(config)), notes])
        except _Unusable as error:
            found = json.dumps({"unusable": str(error)})
    # Every process needs the same answer.
    answer = json.loads(idist.broadcast(found, src=0))
    if "unusable" in answer:
        raise SystemExit(answer["unusable"])  # the message alone: no traceback
    path, checkpoint, finished, notes = answer
    _Current.path, _Current.since = Path(path), time.time()
    return RunDir(Path(path), checkpoint and Path(checkpoint), finished, tuple(notes))


def release_run_dir() -> None:
    """End this process's hold on its run directory (it ends with the process anyway)."""
    if _Current.hold is not None:
        _Current.hold.close()
        _Current.hold = None


def _hold(run_dir: Path) -> None:
    """Hold ``run_dir`` for this process, or stop, naming the process that holds it."""
    if fcntl is None:
        return
    hold = open(run_dir / RUN_HOLD, "a+")  # noqa: SIM115  (open while this process trains: release_run_dir)
    try:
        fcntl.flock(hold, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        hold.seek(0)
        holder = hold.read().strip() or "unknown"
        hold.close()
        raise _Unusable(
            f"Another process (PID {holder}) is training in {run_dir}, the run this command would continue: "
            "wait for it to end, or stop it. Nothing was changed."
        ) from None
    hold.truncate(0)
    hold.write(f"{os.getpid()}\n")
    hold.flush()
    _Current.hold = hold


def _read_yaml(path: Path, notes: list[str]) -> dict | None:
    """The mapping in the YAML file ``path``, or None, noted, if it is unreadable (empty, cut short, not YAML)."""
    try:
        content = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        why = type(error).__name__
    else:
        if isinstance(content, dict):
            return content
        why = "empty" if content is None else "not a YAML mapping"
    notes.append(f"Skipped {path.parent}: its {path.name} cannot be read ({why})")
    return None


def _find_run(config: Config, notes: list[str]) -> tuple[str, str | None, str] | None:
    """The newest run under ``output_dir`` with this config, except for the keys in MAY_CHANGE."""
    current = {key: value for key, value in asdict(config).items() if key not in MAY_CHANGE}
    for lock in sorted(Path(config.output_dir).glob("*/config-lock.yaml"), reverse=True):  # newest first
        locked = _read_yaml(lock, notes)
        if locked is None or {key: value for key, value in locked.items() if key not in MAY_CHANGE} != current:
            continue
        status = _read_yaml(lock.parent / STATUS_FILE, notes) if (lock.parent / STATUS_FILE).exists() else {}
        if status is not None:
            break
    else:
        return None
    run_dir = lock.parent
    _hold(run_dir)  # before anything is read or written: a command training there keeps it
    longer = status.get("reason") == "max_epochs" and config.max_epochs > status["epoch"]
    if status.get("status") == "finished" and not longer:
        return str(run_dir), None, f"{status['reason']} at epoch {status['epoch']}, iteration {status['iteration']}"
{% if cookiecutter.save_training %}
    checkpoint = _newest_intact(run_dir, config.filename_prefix, notes)
    if checkpoint is None:  # stopped before its first checkpoint: nothing to continue from
        release_run_dir()
        return None
    _lock_config(run_dir, config)  # with the keys that changed
    return str(run_dir), str(checkpoint), ""
{% else %}
    release_run_dir()
    return None  # without training checkpoints (save_training is off), nothing to continue from
{% endif %}


def _new_run(config: Config) -> tuple[str, None, str]:
    """Create a fresh run directory under ``output_dir``, hold it and save the config there."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(config.output_dir) / f"{stamp}-{config.backend or 'single'}"
    suffix = 1
    while path.exists():  # two runs started in the same second
        suffix += 1
        path = Path(config.output_dir) / f"{stamp}-{config.backend or 'single'}-{suffix}"
    path.mkdir(parents=True)
    _hold(path)  # before config-lock.yaml, by which another command would find it
    _lock_config(path, config)
    return path.as_posix(), None, ""


{% if flags.eval_metric %}
def write_classes(run_dir: Path, classes: Sequence[str]) -> None:
    """Keep the class names beside the run's models (rank 0): predictions and exports name classes with them."""
    if idist.get_rank() == 0:
        (run_dir / CLASSES_FILE).write_text(json.dumps(list(classes), indent=1) + "\n")


{% endif %}
def write_status(run_dir: Path, **outcome: Any) -> None:
    """Record how the run ended in its ``status.yaml``: ``status`` and ``reason`` first."""
    write_whole(run_dir / STATUS_FILE, yaml.safe_dump(outcome, sort_keys=False))


def write_whole(path: Path, text: str) -> None:
    """Write ``path`` as the checkpoints are: to a temporary file, renamed once complete. A process killed
    meanwhile, or a full disk, leaves the previous file whole, never half of the new one."""
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as temporary:
        try:
            temporary.write(text)
            temporary.flush()
        except BaseException:
            temporary.close()
            os.remove(temporary.name)
            raise
    os.replace(temporary.name, path)


def run_recorded(local_rank: int, run: Callable[[int, Config], None], config: Config) -> None:
    """``run(local_rank, config)``; an error that ends it is recorded in the run directory, then raised again.

    {{ "Fixed (the data, say), the same command continues the run from its newest checkpoint." if cookiecutter.save_training else "With no training checkpoints (save_training is off), the same command starts a new run." }}
    """
    _Current.path = None  # a previous run's, in this process (a notebook, a test)
    try:
        run(local_rank, config)
    except (Exception, KeyboardInterrupt) as error:
        if _Current.path is not None:  # else it failed before it had a run directory
            record_failure(_Current.path, error)
        raise
    finally:
        release_run_dir()


def record_failure(run_dir: Path, error: BaseException) -> None:
    """Log the error in ``training.log`` with its traceback, and record it in ``status.yaml``: failed,
    aborted (a second stop signal), or stopped (a full disk). Each process that fails logs its error;
    status.yaml keeps this command's first (the others' often follow from it: a peer gone from a collective)."""
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
    earlier = _read_yaml(path, []) if path.is_file() and path.stat().st_mtime >= _Current.since else None
    if (earlier or {}).get("status") not in ("failed", "aborted"):
        write_status(run_dir, status=status, reason=reason)


def _lock_config(run_dir: Path, config: Config) -> None:
    write_whole(run_dir / "config-lock.yaml", yaml.safe_dump(asdict(config), sort_keys=False))
{% if cookiecutter.save_training %}


def checkpoint_name(filename_prefix: str, iteration: int | str) -> str:
    """The file name of the training checkpoint of ``iteration`` (ignite's Checkpoint names it so; "*": the
    pattern of them all)."""
    return f"{filename_prefix}_checkpoint_{iteration}.pt"


def saved_training_checkpoints(run_dir: Path, filename_prefix: str) -> list[tuple[int, Path]]:
    """The complete training checkpoints in ``run_dir``, as (iteration, path), oldest first.

    DiskSaver writes each to a temporary file that it renames when complete: a file of this name that
    is not a whole zip archive (as torch.save writes) was not written by it, and is left out.
    """
    prefix, suffix = checkpoint_name(filename_prefix, "*").split("*")
    paths = Path(run_dir).glob(f"{prefix}*{suffix}")
    names = {path: path.name.removeprefix(prefix).removesuffix(suffix) for path in paths}
    saved = [(int(iteration), path) for path, iteration in names.items() if iteration.isdigit()]
    return sorted((iteration, path) for iteration, path in saved if zipfile.is_zipfile(path))


def _newest_intact(run_dir: Path, filename_prefix: str, notes: list[str]) -> Path | None:
    """The newest training checkpoint whose contents are intact; one that is not (a whole file, but with
    bytes changed since it was written) is renamed ``*.corrupt`` and noted. None when none was saved."""
    saved = saved_training_checkpoints(run_dir, filename_prefix)
    for _, path in reversed(saved):
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()  # each part against the checksum written with it
        if damaged is None:
            return path
        path.rename(path.with_name(path.name + ".corrupt"))
        notes.append(f"{path.name} does not load ({damaged} is damaged): renamed {path.name}.corrupt")
    if saved:
        raise _Unusable(
            f"None of the training checkpoints in {run_dir} loads (renamed *.corrupt): to train anew, move the "
            "run directory away."
        )
    return None
{% endif %}
