"""The training processes: ``run`` called in each process the config and the command ask for (one; several, spawned
here or started by torchrun; a TPU's replicas), then this one ended with the run's exit status. The command line that
reads the config is ``cli.py``."""

import multiprocessing
import os
from collections.abc import Callable
from multiprocessing.sharedctypes import Synchronized
from typing import Any, NoReturn

import ignite.distributed as idist
import torch

from machinery.runs.directory import run_recorded
from machinery.runs.preemption import STOP, catch_stop_signals, end_process, exit_status
from machinery.settings import RunSettings

# The function each training process runs: main.py's ``run(local_rank, config)``, config a ``config.Config``.
RunFn = Callable[[int, Any], None]
ConfigClass = type[RunSettings]  # config.py's Config
# How a command line sets a key, for the advice a check gives: "--{key} {value}" (argparse), "--{key}={value}" (fire).
Override = str


def launch(run: RunFn, config: RunSettings, override: Override) -> NoReturn:
    """Call ``run(local_rank, config)`` in every training process, then end this one: 128 + the signal's number after
    a stop, else 0."""
    try:
        train_processes(run, config, override)
    finally:
        if config.backend != "xla-tpu":
            idist.finalize()  # the process group, if any: what ignite does once ``run`` returns
    end_command(exit_status(), config.backend)


def end_command(status: int, backend: str | None) -> NoReturn:
    """End the command's process with ``status``: a TPU launcher through Python's exit, the others once their exit
    handlers have run (end_process: gloo's threads outlive the process group)."""
    if backend == "xla-tpu":
        raise SystemExit(status)
    end_process(status)


def train_processes(run: RunFn, config: RunSettings, override: Override) -> None:
    """Call ``run(local_rank, config)`` in every training process: a TPU's replicas; the processes of
    ``nproc_per_node`` (and ``nnodes``), spawned here, where a backend is given and torchrun did not start this one;
    else this one (and torchrun's others). The group outlives the run (``launch`` ends it) for a multirun's jobs."""
    if config.backend == "xla-tpu":
        from machinery.tpu.xla import launch_replicas  # torch_xla: a TPU project's

        launch_replicas(run, config)
        return
    check_processes(config, override)
    catch_stop_signals()  # a stop signal is forwarded to the processes started here (torchrun forwards its own)
    if config.backend is not None and "WORLD_SIZE" not in os.environ:
        spawn_processes(run, config)
        return
    if idist.backend() != config.backend:  # the command's first run (or a multirun's grid changed the backend)
        idist.finalize()
        # torchrun (or no launcher at all) has already started the processes: ignite joins them.
        if config.backend is not None:
            idist.initialize(config.backend)
    with idist.Parallel() as parallel:  # the group as it is
        parallel.run(run_recorded, run, config)


def check_processes(config: RunSettings, override: Override) -> None:
    """Fail early, with a fix, when the backend cannot run here or the processes disagree with the config."""
    if config.backend == "nccl" and not torch.cuda.is_available():
        # The fix in this script's own command-line syntax: the last backend given wins.
        raise SystemExit(
            "backend 'nccl' needs a CUDA GPU, and none is visible here. Train on the CPU with backend 'gloo' "
            f"instead: add `{override.format(key='backend', value='gloo')}` at the end of the command."
        )
    started = int(os.environ.get("WORLD_SIZE", "1"))  # by torchrun
    if started > 1 and config.backend is None:
        raise SystemExit(
            f"backend: null (one process) is not allowed where torchrun started {started} processes: give "
            f"`{override.format(key='backend', value='nccl')}` (GPUs) or "
            f"`{override.format(key='backend', value='gloo')}` (CPUs)"
        )
    if "WORLD_SIZE" in os.environ and config.nproc_per_node != 1:
        raise SystemExit(
            f"nproc_per_node: {config.nproc_per_node} is not allowed where torchrun started the processes: it must be "
            "1 (it counts the processes this command spawns); give torchrun its own --nproc_per_node"
        )


def spawn_processes(run: RunFn, config: RunSettings) -> None:
    """Start ``nproc_per_node`` processes on this node (of ``nnodes``), each calling ``run``."""
    # The signal that stopped a training process but maybe not this one: the command exits with it too (spawn context).
    stopped_by = multiprocessing.get_context("spawn").Value("i", 0)
    group = {
        "nproc_per_node": config.nproc_per_node,
        "nnodes": config.nnodes,
        "node_rank": config.node_rank,
        "master_addr": config.master_addr,
        "master_port": config.master_port,
    }
    with idist.Parallel(backend=config.backend, **group) as parallel:
        parallel.run(spawned_process, run, config, stopped_by)
    if STOP.signum is None and stopped_by.value:
        STOP.signum = stopped_by.value


def spawned_process(local_rank: int, run: RunFn, config: RunSettings, stopped_by: Synchronized) -> None:
    """``run`` in a process ``spawn_processes`` started, which then ends (end_process): the command's own process,
    which started it, reports a stop with its own status."""
    run_recorded(local_rank, run, config)
    if STOP.signum is not None:
        stopped_by.value = STOP.signum
    idist.finalize()  # what ignite does once ``run`` returns
    end_process(0)
