"""The training engine: step losses as one device vector, a data shuffle per pass; with ``config.deterministic``,
seeded per pass, batch and iteration."""

import random
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import torch
from ignite.engine import DeterministicEngine, Engine, Events
from ignite.engine.deterministic import ReproducibleBatchSampler
from ignite.utils import manual_seed
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler
from torch.utils.data.distributed import DistributedSampler

from machinery.backend import Backend


class StepLosses(NamedTuple):
    """The trainer's output: the names of the training step's losses, and their values in one float32 vector."""

    names: tuple[str, ...]
    values: torch.Tensor


def training_engine(train_step: Callable[[Engine, Any], dict[str, torch.Tensor]], backend: Backend) -> Engine:
    """The engine that runs ``train_step`` on each batch, its dict of losses stacked into one vector on the device:
    ``handlers.setup_handlers`` reads them all in one transfer. Deterministic where ``backend.config`` asks for it."""

    def step_with_stacked_losses(engine: Engine, batch: Any) -> StepLosses:
        losses = train_step(engine, batch)
        values = torch.stack([value.detach().float() for value in losses.values()])
        backend.step_done()  # a TPU's step ends its graph here, the losses in it
        return StepLosses(tuple(losses), values)

    if not backend.config.deterministic:
        return Engine(step_with_stacked_losses)
    # A run continued mid-pass takes the uninterrupted run's batches and random transforms: each pass's order and
    # batch seeds come from the run's seed and the pass's number (_SeededPasses), set before DeterministicEngine makes
    # the pass's iterator (after these events). Each iteration is seeded too (noise, dropout: _seed_iteration).
    trainer = DeterministicEngine(step_with_stacked_losses)
    trainer.add_event_handler(Events.STARTED, _seed_batches)
    trainer.add_event_handler(Events.EPOCH_STARTED | Events.DATALOADER_STOP_ITERATION, _set_pass)
    trainer.add_event_handler(Events.ITERATION_STARTED, _seed_iteration)
    return trainer


def shuffle_each_pass(trainer: Engine, train_loader: Any) -> None:
    """Give each pass over the training data its own shuffle, the same on every process (a DistributedSampler's)."""
    # A TPU's device loader wraps the DataLoader; the sampler is on the DataLoader.
    sampler = getattr(getattr(train_loader, "_loader", train_loader), "sampler", None)
    if isinstance(sampler, DistributedSampler):
        # Set before the pass's iterator is made: a run continued mid-pass takes the uninterrupted run's batches.
        passes = Events.EPOCH_STARTED | Events.DATALOADER_STOP_ITERATION
        trainer.add_event_handler(passes, lambda engine: sampler.set_epoch(engine.state.iteration // len(train_loader)))


class _SeededBatch(list):
    """A batch's sample indices, with the seed its random transforms draw from: the seed travels with the indices
    to the process that reads the batch (a loader worker, with num_workers > 0)."""

    def __init__(self, indices: list[int], seed: int) -> None:
        super().__init__(indices)
        self.seed = seed


class _SeededItems(Dataset):
    """The training set, each batch read under its own seed (``_SeededBatch``): its random transforms (crops, flips)
    draw the same numbers whichever process or thread reads it and whenever its loader was made (loader workers seed
    from the main process when an iterator is made, which a pass continued mid-way does at another batch)."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[index]

    def __getitems__(self, batch: _SeededBatch) -> list[Any]:
        # The host's generators only (not ignite's manual_seed): on a TPU, with num_workers 0, the device
        # loader reads batches in a thread, which must not reseed the device's generator under the training step.
        random.seed(batch.seed)
        np.random.seed(batch.seed)
        torch.manual_seed(batch.seed)
        read_all = getattr(self.dataset, "__getitems__", None)  # a Hugging Face dataset reads a batch at once
        return read_all(list(batch)) if read_all else [self.dataset[index] for index in batch]


class _SeededPasses(ReproducibleBatchSampler):
    """ignite's reproducible batch sampler, each pass's order and batch seeds drawn from the run's seed and the pass's
    number only (``_set_pass``). ignite 0.5.5's draws the order from the random state at its first batch: after
    DeterministicEngine restores a mid-epoch checkpoint's random state (a continued run would train on another order),
    and in the thread where a TPU's device loader makes the pass's iterator, beside the training step. With several
    processes each has its own run seed (``runs.start.start_run``): its own transforms."""

    run_seed: int = 0  # set by _set_pass before each pass
    pass_number: int = 0

    def __iter__(self) -> Iterator[list[int]]:
        return self._batches(self.run_seed * 1_000_003 + self.pass_number)

    def _batches(self, pass_key: int) -> Iterator[list[int]]:
        first = self.start_iteration or 0  # the batches a run continued mid-pass skips
        seeds = torch.Generator().manual_seed(pass_key)
        if isinstance(self.sampler, RandomSampler):  # a DistributedSampler's order is its epoch's (shuffle_each_pass)
            self.sampler.generator = torch.Generator().manual_seed(int(torch.randint(2**62, (1,), generator=seeds)))
        self.setup_batch_indices()
        pass_seed = int(torch.randint(2**31, (1,), generator=seeds))
        for index, batch in enumerate(self.batch_indices, start=first):
            yield _SeededBatch(batch, pass_seed + index)


def _seed_iteration(engine: Engine) -> None:
    """Seed every random generator (CPU, GPU, TPU) from the run's seed and the iteration's number: DeterministicEngine's
    checkpoints hold the CPU's state only, so a continued run would draw other noise and dropout on a GPU or TPU."""
    manual_seed((engine.state.seed * 1_000_003 + engine.state.iteration) % 2**32)


def _data_loader(engine: Engine) -> DataLoader | None:
    """The trainer's DataLoader: its data, or the one a TPU's device loader wraps."""
    loader = getattr(engine.state.dataloader, "_loader", engine.state.dataloader)
    return loader if isinstance(loader, DataLoader) else None


def _seed_batches(engine: Engine) -> None:
    """Give the trainer's DataLoader (a TPU's device loader's) a ``_SeededPasses`` batch sampler and
    ``_SeededItems``: a copy of it, since a DataLoader's dataset and sampler are set once."""
    loader = _data_loader(engine)
    if loader is None or type(loader.batch_sampler) is not BatchSampler:
        return
    settings = {key: value for key, value in vars(loader).items() if not key.startswith("_")}
    for key in ("batch_size", "sampler", "drop_last", "batch_sampler", "dataset_kind"):  # the batch sampler's
        settings.pop(key, None)
    settings.update(dataset=_SeededItems(loader.dataset), batch_sampler=_SeededPasses(loader.batch_sampler))
    # The workers' base seed from a generator of the loader's own: a TPU's device loader makes the iterator in its
    # thread, which must not draw from the generators the training step shares (the batches' seeds replace it).
    settings.update(generator=torch.Generator(), multiprocessing_context=loader.multiprocessing_context)
    seeded = type(loader)(**settings)
    if hasattr(engine.state.dataloader, "_loader"):
        engine.state.dataloader._loader = seeded
    else:
        engine.state.dataloader = seeded


def _set_pass(engine: Engine) -> None:
    """Before a pass's iterator is made: its number, from the iterations trained (a continued run's too)."""
    loader = _data_loader(engine)
    if loader is not None and isinstance(loader.batch_sampler, _SeededPasses):
        loader.batch_sampler.run_seed = engine.state.seed
        loader.batch_sampler.pass_number = engine.state.iteration // len(loader)
