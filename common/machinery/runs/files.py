"""A run directory's files: the training command's hold on it, its files written whole and read with care. Without
torch: sweep.py's worker reads and holds run directories too (checkpoints.py has the checkpoints)."""

import os
import tempfile
from pathlib import Path
from typing import IO

import yaml

if os.name == "posix":
    import fcntl
else:  # Windows: no hold (two commands of one config there must not run at once)
    fcntl = None

# How the run ended: stopped (to continue), finished (preemption.setup_clean_stop), failed or aborted (record_failure).
STATUS_FILE = "status.yaml"
# Locked while a command trains in the run directory (flock: the lock goes with the process), holding its PID.
RUN_HOLD = "run.lock"


class Unusable(Exception):
    """The run this command would continue cannot be continued: the message says why, and what to do."""


class _Hold:
    """This process's hold on its run directory (rank 0's open ``RUN_HOLD``), if any."""

    file: IO[str] | None = None


def release_run_dir() -> None:
    """End this process's hold on its run directory (it ends with the process anyway)."""
    if _Hold.file is not None:
        _Hold.file.close()
        _Hold.file = None


def hold(run_dir: Path) -> None:
    """Hold ``run_dir`` till the process ends (kill -9 too) or release_run_dir, or raise Unusable naming its holder."""
    if fcntl is None:
        return
    file = open(run_dir / RUN_HOLD, "a+")  # noqa: SIM115  (open while this process trains: release_run_dir)
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        file.seek(0)
        holder = file.read().strip() or "unknown"
        file.close()
        raise Unusable(
            f"Another process (PID {holder}) is training in {run_dir}, the run this command would continue: "
            "wait for it to end, or stop it. Nothing was changed."
        ) from None
    file.truncate(0)
    file.write(f"{os.getpid()}\n")
    file.flush()
    _Hold.file = file


def read_run_file(path: Path, notes: list[str]) -> dict | None:
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


def write_whole(path: Path, text: str) -> None:
    """Write ``path`` via a temporary file renamed once complete: a kill or a full disk never leaves half a file."""
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as temporary:
        try:
            temporary.write(text)
            temporary.flush()
        except BaseException:
            temporary.close()
            os.remove(temporary.name)
            raise
    os.replace(temporary.name, path)
