{% import "flags.j2" as flags with context %}
"""TPU training with torch_xla: ignite 0.5.5 compatibility, replica launch, replicas alike, device loaders.
Importing it adds back the torch_xla names ignite 0.5.5 calls (launch.py imports it before ignite uses torch_xla)."""

import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

import ignite.distributed as idist
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.runtime as xr
{% if flags.eval_metric %}
from torch.utils.data import DataLoader
{% endif %}

{% if flags.eval_metric %}
from machinery.data.loaders import EvalShard
{% endif %}
from machinery.runs.directory import run_recorded
from machinery.runs.preemption import catch_stop_signals, exit_if_stopped
from machinery.settings import RunSettings
from machinery.tpu.replicas import launch_replicas, replica_failed

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


def launch(run: Callable[[int, RunSettings], None], config: RunSettings) -> None:
    """Call ``run(local_rank, config)`` in one replica per TPU device (torch_xla.launch): ignite's own
    ``xmp.spawn(nprocs=8)`` is refused by PJRT (torch_xla >= 2.6 takes one per device, or 1); see check_replicas."""
    catch_stop_signals()  # a stop signal to this process stops the replicas cleanly (replicas.py)
    launch_replicas(lambda: torch_xla.launch(_xla_replica, args=(run, config)))
    exit_if_stopped()


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


def start_alike(*models: torch.nn.Module, buffers_only: bool = False) -> None:
    """Give every replica replica 0's weights (each seeded its own by rank), or its buffers only (BatchNorm's
    statistics follow each replica's batches; the weights stay alike through the all-reduce)."""
    for model in models if idist.get_world_size() > 1 else ():
        tensors = [*model.buffers()] if buffers_only else [*model.parameters(), *model.buffers()]
        if tensors:
            xm.collective_broadcast(tensors)
    torch_xla.sync()


def device_loader(loader: Any) -> Any:
    """The loader on the TPU (MpDeviceLoader){{ "; an EvalShard's batches padded: ``(batch, real rows)``" if flags.eval_metric }}."""
{% if flags.eval_metric %}
    if isinstance(loader.sampler, EvalShard):
        return _eval_device_loader(loader)
{% endif %}
    if idist.get_world_size() > 1:
        loader = loader._loader  # ignite has wrapped it in an MpDeviceLoader: rewrapped here
    batches = _TrainingBatches(loader, idist.device(), batches_per_execution=sys.maxsize)
    batches.sampler = loader.sampler  # as ignite's has it
    return batches


class _TrainingBatches(pl.MpDeviceLoader):
    """Training batches on the TPU without the device loader's per-batch sync: the step ends with its own (engine.py),
    and a second would wait for the TPU to finish it, so the host could not trace the next step meanwhile (23-27% of
    host time a step on the XLA CPU device). Work pending at a pass's start (weights, a checkpoint) syncs first."""

    def __iter__(self) -> Iterator[Any]:
        torch_xla.sync()
        return super().__iter__()
{% if flags.eval_metric %}


class _PadToBatchSize:
    """A collate function: ``batch_size`` rows and the number of real ones. A short last batch repeats its first sample,
    so one compiled program serves any eval set length (another shape compiles anew); metrics score real rows only."""

    def __init__(self, collate_fn: Callable[[list[Any]], Any], batch_size: int) -> None:
        self.collate_fn = collate_fn
        self.batch_size = batch_size

    def __call__(self, samples: list[Any]) -> tuple[Any, int]:
        real = len(samples)
        padded = samples + samples[:1] * (self.batch_size - real)
        return self.collate_fn(padded), real  # a number the host keeps: the device loader copies tensors only


def _eval_device_loader(loader: Any) -> pl.MpDeviceLoader:
    """The eval loader rebuilt (same dataset, shard and settings) with a padding collate, on the TPU."""
    loader = getattr(loader, "_loader", loader)  # on several replicas, ignite has wrapped it already
    if loader.batch_size is None:
        raise ValueError("an eval loader on the TPU needs a DataLoader with a batch_size, not a batch_sampler")
    workers = {}
    if loader.num_workers > 0:  # settings DataLoader accepts only with worker processes
        workers = {"prefetch_factor": loader.prefetch_factor, "persistent_workers": loader.persistent_workers}
    padded = DataLoader(
        loader.dataset,
        batch_size=loader.batch_size,
        sampler=loader.sampler,
        num_workers=loader.num_workers,
        collate_fn=_PadToBatchSize(loader.collate_fn, loader.batch_size),
        pin_memory=loader.pin_memory,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context,
        generator=loader.generator,
        **workers,
    )
    return pl.MpDeviceLoader(padded, idist.device())
{% endif %}
