"""The data on the TPU: each loader in torch_xla's device loader, which sends batches ahead to the device; a loader's
errors raised where the batches are taken, the eval batches padded to one shape."""

import queue
import sys
from collections.abc import Callable, Iterator
from typing import Any

import ignite.distributed as idist
import torch_xla
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader

from machinery.data.loaders import EvalShard


def device_loader(loader: Any) -> Any:
    """The loader on the TPU (MpDeviceLoader); an EvalShard's batches padded: ``(batch, real rows)``."""
    if isinstance(loader.sampler, EvalShard):
        return _eval_device_loader(loader)
    if idist.get_world_size() > 1:
        loader = loader._loader  # ignite has wrapped it in an MpDeviceLoader: rewrapped here
    batches = _TrainingBatches(loader, idist.device(), batches_per_execution=sys.maxsize)
    batches.sampler = loader.sampler  # as ignite's has it
    return batches


class _DeviceBatches(pl.MpDeviceLoader):
    """A loader's batches on the TPU; an error reading them (an unreadable file, a loader worker's death) is raised
    in the loop that takes them. torch_xla's loader thread would print it and end the pass as if the data had run
    out (an epoch cut short), or, met as a pass starts, end with the loop waiting for a batch for ever."""

    def __iter__(self) -> Iterator[Any]:
        loader = self._loader  # the DataLoader itself between passes: engine.py reads and replaces it
        # Each pass keeps its own errors: the thread reads ahead, so a pass left early (an evaluation's
        # eval_epoch_length batches) may meet one that is not the next pass's.
        self._loader = kept = _ErrorsKept(loader)
        try:
            batches = super().__iter__()  # the pass's thread starts here, reading ``kept``
        finally:
            self._loader = loader
        yield from batches
        if not kept.errors.empty():
            raise kept.errors.get()


class _ErrorsKept:
    """A loader as the device loader's thread reads it in one pass: an error ends the pass, kept for _DeviceBatches."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.errors: queue.SimpleQueue[Exception] = queue.SimpleQueue()

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        try:  # a generator: even the pass's start (a persistent loader's workers resumed) runs in here
            yield from self.loader
        except Exception as error:
            self.errors.put(error)


class _TrainingBatches(_DeviceBatches):
    """Training batches on the TPU without the device loader's per-batch sync: the step ends with its own (engine.py),
    and a second would wait for the TPU to finish it, so the host could not trace the next step meanwhile (23-27% of
    host time a step on the XLA CPU device). Work pending at a pass's start (weights, a checkpoint) syncs before its
    first batch."""

    def __iter__(self) -> Iterator[Any]:
        torch_xla.sync()
        yield from super().__iter__()


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


def _eval_device_loader(loader: Any) -> _DeviceBatches:
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
    return _DeviceBatches(padded, idist.device())
