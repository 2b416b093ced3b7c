"""A run's checkpoint files: the training checkpoints by name and found intact, a full disk told from a failed save,
and any checkpoint read without running its code."""

import errno
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from ignite.handlers import Checkpoint

from machinery.runs.files import Unusable


def checkpoint_name(filename_prefix: str, iteration: int | str) -> str:
    """The file name ignite's Checkpoint gives the training checkpoint of ``iteration`` ("*": the pattern of all)."""
    return f"{filename_prefix}_checkpoint_{iteration}.pt"


def saved_at(save_training: Checkpoint | None, iteration: int) -> bool:
    """Whether the newest training checkpoint ``save_training`` wrote (None: none are) holds ``iteration``."""
    if save_training is None:
        return False
    return Path(str(save_training.last_checkpoint)).name == checkpoint_name(save_training.filename_prefix, iteration)


def saved_training_checkpoints(run_dir: Path, filename_prefix: str) -> list[tuple[int, Path]]:
    """The complete training checkpoints in ``run_dir``, as (iteration, path), oldest first. DiskSaver renames each
    once complete: a file of this name that is not a whole zip archive (as torch.save writes) is left out."""
    prefix, suffix = checkpoint_name(filename_prefix, "*").split("*")
    paths = Path(run_dir).glob(f"{prefix}*{suffix}")
    names = {path: path.name.removeprefix(prefix).removesuffix(suffix) for path in paths}
    saved = [(int(iteration), path) for path, iteration in names.items() if iteration.isdigit()]
    return sorted((iteration, path) for iteration, path in saved if zipfile.is_zipfile(path))


def newest_intact(run_dir: Path, filename_prefix: str, notes: list[str]) -> Path | None:
    """The newest intact training checkpoint (a damaged one is renamed ``*.corrupt`` and noted); None if none saved."""
    saved = saved_training_checkpoints(run_dir, filename_prefix)
    for _, path in reversed(saved):
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()  # each part against the checksum written with it
        if damaged is None:
            return path
        path.rename(path.with_name(path.name + ".corrupt"))
        notes.append(f"{path.name} does not load ({damaged} is damaged): renamed {path.name}.corrupt")
    if saved:
        raise Unusable(
            f"None of the training checkpoints in {run_dir} loads (renamed *.corrupt): to train anew, move the "
            "run directory away."
        )
    return None


class _ByteCount:
    """A file that only counts what is written to it."""

    size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        pass


def raise_if_disk_full(checkpoint: Any, path: Path, error: Exception) -> None:
    """After saving ``path`` failed (torch.save says only "unexpected pos"): raise ENOSPC if its disk lacks space
    (record_failure then records the run as stopped)."""
    for leftover in path.parent.glob("tmp*"):  # DiskSaver's temporary file, if closing it failed too
        if re.fullmatch(r"tmp[a-z0-9_]{8}", leftover.name):
            leftover.unlink()
    needed, free = _ByteCount(), shutil.disk_usage(path.parent).free
    torch.save(checkpoint, needed)
    if needed.size > free:
        raise OSError(
            errno.ENOSPC,
            f"No space left on device for {path.name} in {path.parent}: it takes {needed.size / 2**20:.1f} MiB, "
            f"{free / 2**20:.1f} MiB are free. The checkpoints saved before it are kept: free some space and run "
            "the same command to continue",
        ) from error


def read_checkpoint(path: Path) -> dict[str, Any]:
    """A checkpoint file's contents, loaded ``weights_only``: loading one from someone else runs no code."""
    # DeterministicEngine saves NumPy's random state: allow its array's types (unpickler, array, dtype, dtype class).
    numpy_key = np.random.get_state()[1]
    torch.serialization.add_safe_globals([numpy_key.__reduce__()[0], np.ndarray, np.dtype, type(numpy_key.dtype)])
    return torch.load(path, map_location="cpu", weights_only=True)
