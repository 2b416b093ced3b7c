"""The data loaders: sharded across processes, their workers leaving stop signals to training and ending with it."""

import multiprocessing
import multiprocessing.util
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import ignite.distributed as idist
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from machinery.runs.preemption import STOP_SIGNALS


def train_loader(dataset: Dataset, batch_size: int, num_workers: int) -> DataLoader:
    """Shuffled batches of the global ``batch_size`` (ignite divides it among processes), full ones only: every step
    has the same shapes, which XLA needs to compile the step once."""
    loader = idist.auto_dataloader(
        dataset,
        batch_size=batch_size,
        num_workers=num_workers,
        worker_init_fn=ignore_stop_signals,
        shuffle=True,
        drop_last=True,
        **worker_start(num_workers),
    )
    return with_dataset(loader, dataset)


class EvalShard(DistributedSampler):
    """This process's share of the eval set: every ``world_size``-th sample from its rank on, in order. Each sample is
    scored once (torch's DistributedSampler evens the shares by repeating some: 7 of VOC's 1449 images on 8 TPU
    replicas, counted twice in the summed metrics); the shares differ by one sample at most."""

    def __init__(self, dataset: Dataset) -> None:
        super().__init__(dataset, num_replicas=idist.get_world_size(), rank=idist.get_rank(), shuffle=False)
        self.num_samples = len(range(self.rank, len(dataset), self.num_replicas))
        self.total_size = len(dataset)
        if self.num_samples == 0:
            raise ValueError(f"The eval set has {len(dataset)} samples, fewer than the {self.num_replicas} processes")

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.total_size, self.num_replicas))


def eval_loader(dataset: Dataset, batch_size: int, num_workers: int) -> DataLoader:
    """Batches of ``batch_size`` (global), in order; every sample is scored once, the last batch may be short."""
    loader = idist.auto_dataloader(
        dataset,
        batch_size=batch_size,
        num_workers=num_workers,
        worker_init_fn=ignore_stop_signals,
        sampler=EvalShard(dataset),
        generator=torch.Generator(),  # its iterators' seed drawn apart from the run's (the checkpoints' rng_states)
        **worker_start(num_workers),
    )
    return with_dataset(loader, dataset)


def worker_start(num_workers: int) -> dict[str, str | bool]:
    """How the loader's workers start: forked on Linux, as torchrun's processes fork theirs; else as Python's default
    has it (spawned), once, and kept for every pass (each would import torch anew at every pass): on macOS (some of
    its system libraries do not survive a fork) and under torch_xla's runtime (nor do its threads)."""
    if num_workers == 0:
        return {}
    forks = sys.platform == "linux" and idist.device().type != "xla"
    return {"multiprocessing_context": "fork"} if forks else {"persistent_workers": True}


def with_dataset(loader: Any, dataset: Dataset) -> Any:
    """The loader, with its ``dataset`` also where ignite wrapped it in a TPU device loader (several replicas)."""
    if not hasattr(loader, "dataset"):
        loader.dataset = dataset
    return loader


def ignore_stop_signals(_worker_id: int) -> None:
    """A DataLoader worker's init function: ignore stop signals, which Slurm or a shutdown sends every process (a
    killed worker would fail training at once); the training process decides when to stop."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def end_workers() -> None:
    """Kill this process's DataLoader workers (its daemon children) as it exits: Python would SIGTERM them, which they
    ignore, and wait for ever, so a run failing while they live (an unreadable image, say) would never end."""
    if hasattr(signal, "SIGCHLD") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # torch's handler would report each kill as a worker's failure
    for child in multiprocessing.active_children():
        if child.daemon:
            child.kill()


# Among multiprocessing's exit finalizers, which run before it signals its children and waits for them.
multiprocessing.util.Finalize(None, end_workers, exitpriority=100)
