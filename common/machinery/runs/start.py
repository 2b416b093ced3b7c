"""A run's start in each process: the seed, the run directory (a new one, or the stopped run's), and the log."""

import logging
import sys
from pathlib import Path
from typing import NamedTuple

import ignite.distributed as idist
import torch
from ignite.utils import manual_seed, setup_logger
from tqdm import tqdm

from machinery.runs.directory import setup_run_dir
from machinery.runs.preemption import catch_stop_signals
from machinery.settings import RunSettings


class Run(NamedTuple):
    """This process's run: its directory, the logger of its ``training.log``, the checkpoint it continues from."""

    run_dir: Path
    logger: logging.Logger
    checkpoint: Path | None


def start_run(config: RunSettings) -> Run:
    """Seed this process, open the run directory (a new one, or the interrupted run's) and the log."""
    catch_stop_signals()
    manual_seed(config.seed + idist.get_rank())
    # Reproducible cuDNN kernels where deterministic (the trainer reseeds the rest: data order, noise), cuDNN's
    # defaults otherwise (a previous run's in this process, a multirun's job, is not this one's).
    torch.backends.cudnn.deterministic = config.deterministic
    torch.backends.cudnn.benchmark = False
    run_dir, checkpoint, finished, notes = setup_run_dir(config)
    logger = setup_logging(run_dir)
    for note in notes:  # unreadable files met on the way (directory.py)
        logger.warning(note)
    if finished:
        logger.info("The run in %s finished (%s): nothing to train.", run_dir, finished)
        logger.info("To train it longer, raise max_epochs; to train anew, set another output_dir.")
        raise SystemExit(0)
    if checkpoint:
        logger.info("Continuing the run in %s from %s", run_dir, checkpoint)
    else:
        logger.info("Run directory: %s", run_dir)
    logger.info("World size: %d, backend: %s, device: %s", idist.get_world_size(), idist.backend(), idist.device())
    if idist.backend() == "xla-tpu":
        from machinery.tpu.replicas import replicas_started  # torch_xla: a TPU project's
        from machinery.tpu.xla import check_replicas

        check_replicas(config, logger)
        replicas_started()  # they all reached setup_run_dir's broadcast
    return Run(run_dir, logger, checkpoint)


class _AboveProgressBar:
    """The log's console stream: tqdm.write puts each record above the live progress bar, on a line of its own (written
    straight to stderr, it would land mid-bar and leave a stale copy of the bar above)."""

    def write(self, text: str) -> None:
        tqdm.write(text, file=sys.stderr, end="")

    def flush(self) -> None:
        sys.stderr.flush()


def setup_logging(run_dir: Path) -> logging.Logger:
    """Log to the console and to ``training.log`` in the run directory, on rank 0 only."""
    for handler in logging.getLogger("train").handlers:
        handler.close()  # a previous run's training.log, in this process (see reset below)
    return setup_logger(
        name="train",
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
        stream=_AboveProgressBar(),
        filepath=run_dir / "training.log",
        distributed_rank=idist.get_rank(),
        # Without reset, a second run in this process (a notebook, a test) gets the first's logger and training.log.
        reset=True,
    )
