"""TPU training with torch_xla: ignite 0.5.5 compatibility, replica launch, replicas alike (the data: device_loaders).
Importing it adds back the torch_xla names ignite 0.5.5 calls (launch.py imports it before ignite uses torch_xla)."""

import logging
from collections.abc import Callable

import ignite.distributed as idist
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

from machinery.runs.directory import run_recorded
from machinery.runs.preemption import catch_stop_signals
from machinery.settings import RunSettings
from machinery.tpu.replicas import replica_failed, watch_replicas

# Removed from xla_model in torch_xla 2.7 (now torch_xla.runtime's), still called by ignite 0.5.5's xla-tpu backend.
REMOVED_NAMES = {
    "xrt_world_size": xr.world_size,
    "get_ordinal": xr.global_ordinal,
    "get_local_ordinal": xr.local_ordinal,
}


def add_removed_names() -> list[str]:
    """Add the removed names back where missing (an older torch_xla or a fixed ignite is left alone); return them."""
    added = [name for name in REMOVED_NAMES if not hasattr(xm, name)]
    for name in added:
        setattr(xm, name, REMOVED_NAMES[name])
    return added


add_removed_names()


def launch_replicas(run: Callable[[int, RunSettings], None], config: RunSettings) -> None:
    """Call ``run(local_rank, config)`` in one replica per TPU device (torch_xla.launch): ignite's own
    ``xmp.spawn(nprocs=8)`` is refused by PJRT (torch_xla >= 2.6 takes one per device, or 1); see check_replicas."""
    catch_stop_signals()  # a stop signal to this process stops the replicas cleanly (replicas.py)
    watch_replicas(lambda: torch_xla.launch(_xla_replica, args=(run, config)))


def _xla_replica(_index: int, run: Callable[[int, RunSettings], None], config: RunSettings) -> None:
    # torch_xla.launch passes the replica's index first; ignite joins the running replica (no nproc_per_node).
    with idist.Parallel(backend="xla-tpu") as parallel:
        try:
            parallel.run(run_recorded, run, config)
        except (Exception, KeyboardInterrupt) as error:  # not SystemExit: a finished run's exit, in every replica
            replica_failed(error)  # the launcher ends the other replicas: they would wait for this one
            raise


def check_replicas(config: RunSettings, logger: logging.Logger) -> None:
    """Say so when the TPU device count differs from ``nproc_per_node``: training goes on, on what is there."""
    world_size = idist.get_world_size()
    if world_size != config.nproc_per_node:
        logger.warning(
            "Expected %d TPU replicas (nproc_per_node) but this runtime has %d device(s): training on %d "
            "replica(s). A TPU v5e-1 (Colab) has one chip; Kaggle's TPU v5e-8 and 8-chip TPU VMs have eight.",
            config.nproc_per_node,
            world_size,
            world_size,
        )


def sync() -> None:
    """End the pending graph: what was computed since the last one runs as a program of its own."""
    torch_xla.sync()


def start_alike(*models: torch.nn.Module, buffers_only: bool = False) -> None:
    """Give every replica replica 0's weights (each seeded its own by rank), or its buffers only (BatchNorm's
    statistics follow each replica's batches; the weights stay alike through the all-reduce)."""
    for model in models if idist.get_world_size() > 1 else ():
        tensors = [*model.buffers()] if buffers_only else [*model.parameters(), *model.buffers()]
        if tensors:
            xm.collective_broadcast(tensors)
    torch_xla.sync()
