"""The data loaders: sharded across processes, with workers that leave stop signals to the training process."""

from types import SimpleNamespace

import ignite.distributed as idist
from torch.utils.data import DataLoader, Dataset

from preemption import ignore_stop_signals


def train_loader(dataset: Dataset, config: SimpleNamespace) -> DataLoader:
    """Shuffled batches of ``batch_size``, global: ignite divides it by the number of processes.

    Full batches only (drop_last): every step has the same shapes, which XLA needs to compile the step once.
    """
    return idist.auto_dataloader(
        dataset,
        batch_size=config.batch_size,
        num_workers=config.num_workers,
        worker_init_fn=ignore_stop_signals,
        shuffle=True,
        drop_last=True,
    )


def eval_loader(dataset: Dataset, config: SimpleNamespace) -> DataLoader:
    """Batches of ``eval_batch_size`` (global), in order; every sample is scored, the last batch may be short."""
    return idist.auto_dataloader(
        dataset,
        batch_size=config.eval_batch_size,
        num_workers=config.num_workers,
        worker_init_fn=ignore_stop_signals,
        shuffle=False,
    )
