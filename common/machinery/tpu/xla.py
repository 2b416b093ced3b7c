{% import "flags.j2" as flags with context %}
"""TPU training with torch_xla: ignite 0.5.5 compatibility, replica launch, replicas alike, device loaders.

Importing this module adds back the torch_xla names that ignite 0.5.5 calls (see ``add_removed_names``):
launch.py imports it before ignite asks torch_xla anything.
"""

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

# torch_xla 2.7 removed these names of torch_xla.core.xla_model in favour of torch_xla.runtime; ignite
# 0.5.5's xla-tpu backend still calls them, so every idist call on a TPU would fail with AttributeError.
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
    """Start one replica per TPU device and call ``run(local_rank, config)`` in each.

    Not ``idist.Parallel(backend="xla-tpu", nproc_per_node=8)``: ignite would call ``xmp.spawn(nprocs=8)``,
    which PJRT refuses (torch_xla >= 2.6 takes one replica per device or 1). ``torch_xla.launch`` starts
    one per device, and each replica compares the count with ``nproc_per_node`` (``check_replicas``).
    """
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
        # Colab's TPUs (v5e-1, v6e-1) have one chip.
        logger.warning(
            "Expected %d TPU replicas (nproc_per_node) but this runtime has %d device(s): training on %d "
            "replica(s). A TPU v5e-1 (Colab) has one chip; Kaggle's TPU v5e-8 and 8-chip TPU VMs have eight.",
            config.nproc_per_node,
            world_size,
            world_size,
        )


def start_alike(*models: torch.nn.Module, buffers_only: bool = False) -> None:
    """Give every replica replica 0's weights (each initialised its own, seeded by rank: start_run), or its
    buffers only (BatchNorm's statistics follow each replica's batches)."""
    for model in models if idist.get_world_size() > 1 else ():
        tensors = [*model.buffers()] if buffers_only else [*model.parameters(), *model.buffers()]
        if tensors:
            xm.collective_broadcast(tensors)
    torch_xla.sync()


def device_loader(loader: Any) -> Any:
    """A loader on the TPU, in torch_xla's MpDeviceLoader, which copies the next batches while a step runs{{ ".
    An eval loader's (loaders.EvalShard) batches come padded to one shape: ``(batch, number of real rows)``" if flags.eval_metric }}."""
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
    """The training batches on the TPU, without the device loader's sync before each batch.

    The training step ends with its own sync (engine.py): a second one, with nothing left to run, waits for the
    TPU to finish the step, so the host could not trace the next step while the TPU runs this one (measured on
    the XLA CPU device: 23-27% of the host's time a step). What is pending at a pass's start (weights copied to
    the device, a checkpoint loaded) runs there, apart from the steps, as before.
    """

    def __iter__(self) -> Iterator[Any]:
        torch_xla.sync()
        return super().__iter__()
{% if flags.eval_metric %}


class _PadToBatchSize:
    """A collate function whose batches all have ``batch_size`` rows, each with its number of real rows.

    A short last batch repeats its first sample: the model then runs one compiled program whatever the eval
    set's length (a batch of another shape would be compiled anew); the metrics score the real rows only.
    """

    def __init__(self, collate_fn: Callable[[list[Any]], Any], batch_size: int) -> None:
        self.collate_fn = collate_fn
        self.batch_size = batch_size

    def __call__(self, samples: list[Any]) -> tuple[Any, int]:
        real = len(samples)
        padded = samples + samples[:1] * (self.batch_size - real)
        return self.collate_fn(padded), real  # a number the host keeps: the device loader copies tensors only


def _eval_device_loader(loader: Any) -> pl.MpDeviceLoader:
    """The eval loader on the TPU, its batches padded to one shape: ``(batch, number of real rows)``. The
    DataLoader is rebuilt with the same dataset, sampler (a replica's shard), settings and a padding collate."""
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
