{% import "flags.j2" as flags with context %}
"""The engine around every training step: the losses it returns, one vector on the device; a new shuffle of the
data per pass{{ "; the random state seeded per iteration (deterministic)" if cookiecutter.deterministic }}."""

{% if cookiecutter.deterministic %}
import random
from collections.abc import Callable, Iterator
{% else %}
from collections.abc import Callable
{% endif %}
from typing import Any, NamedTuple

{% if cookiecutter.deterministic %}
import numpy as np
{% endif %}
import torch
{% if flags.xla %}
import torch_xla
{% endif %}
{% if cookiecutter.deterministic %}
from ignite.engine import DeterministicEngine, Engine, Events
from ignite.engine.deterministic import ReproducibleBatchSampler, update_dataloader
from ignite.utils import manual_seed
from torch.utils.data import BatchSampler, DataLoader
{% else %}
from ignite.engine import Engine, Events
{% endif %}
from torch.utils.data.distributed import DistributedSampler


class StepLosses(NamedTuple):
    """The trainer's output: the names of the training step's losses, and their values in one float32 vector."""

    names: tuple[str, ...]
    values: torch.Tensor


def training_engine(train_step: Callable[[Engine, Any], dict[str, torch.Tensor]]) -> Engine:
    """The engine that runs ``train_step`` on each batch.

    ``train_step`` returns its losses as a dict of tensors; the engine's output stacks them into one
    vector, on the device, so that ``handlers.setup_handlers`` reads them all in one transfer.
    """

    def step(engine: Engine, batch: Any) -> StepLosses:
        losses = train_step(engine, batch)
        values = torch.stack([value.detach().float() for value in losses.values()])
{% if flags.xla %}
        # The step's graph ends here, the stacked losses in it: every step runs the same compiled program,
        # and reading the losses or the weights (logging, checkpoints) at any iteration is a transfer,
        # never a program of its own.
        torch_xla.sync()
{% endif %}
        return StepLosses(tuple(losses), values)

{% if cookiecutter.deterministic %}
    # DeterministicEngine reseeds the random generators per pass over the data (its order), so a resumed
    # run sees the same batches; each iteration is seeded too (noise, dropout: _seed_iteration).
    trainer = DeterministicEngine(step)
    trainer.add_event_handler(Events.STARTED, _draw_order_at_iter)
    trainer.add_event_handler(Events.ITERATION_STARTED, _seed_iteration)
    return trainer
{% else %}
    return Engine(step)
{% endif %}


def shuffle_each_pass(trainer: Engine, train_loader: Any) -> None:
    """Give each pass over the training data its own shuffle, the same on every process (a DistributedSampler's)."""
{% if flags.xla %}
    # A device loader wraps the DataLoader; the sampler is on the DataLoader.
    sampler = getattr(getattr(train_loader, "_loader", train_loader), "sampler", None)
{% else %}
    sampler = getattr(train_loader, "sampler", None)
{% endif %}
    if isinstance(sampler, DistributedSampler):
        # Set before the pass's iterator is made: a run continued mid-pass (train_epoch_length shorter than
        # the data) takes the batches the uninterrupted run took.
        passes = Events.EPOCH_STARTED | Events.DATALOADER_STOP_ITERATION
        trainer.add_event_handler(passes, lambda engine: sampler.set_epoch(engine.state.iteration // len(train_loader)))
{% if cookiecutter.deterministic %}


class _OrderDrawnAtIter(ReproducibleBatchSampler):
    """ignite's reproducible batch sampler, drawing each pass's order from the random state at ``iter(loader)``,
    and each batch's random transforms (crops, flips) from a seed of the batch's own.

    ignite 0.5.5's draws the order at the first batch: after DeterministicEngine restores a mid-epoch checkpoint's
    random state, so a run continued mid-epoch would train on another order than the uninterrupted run. That
    restored state is the saving process's (rank 0's): with several processes, the others would transform their
    next batches with rank 0's random numbers, so each batch is seeded here, in its own process, just before
    it is read (in the loader's worker processes, with num_workers > 0, transforms draw from the workers' own
    generators instead).
    """

    def __iter__(self) -> Iterator[list[int]]:
        return self._batches(torch.get_rng_state())

    def _batches(self, rng_state: torch.Tensor) -> Iterator[list[int]]:
        first = self.start_iteration or 0  # the batches a run continued mid-pass skips
        current = torch.get_rng_state()
        torch.set_rng_state(rng_state)
        self.setup_batch_indices()
        pass_seed = int(torch.randint(2**31, (1,)))
        torch.set_rng_state(current)
        for index, batch in enumerate(self.batch_indices, start=first):
            # The host's generators only (not ignite's manual_seed): a TPU's device loader reads batches in a
            # thread of its own, which must not reseed the device's generator under the training step.
            seed = pass_seed + index
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
            yield batch


def _seed_iteration(engine: Engine) -> None:
    """Seed every random generator (CPU, GPU, TPU) from the run's seed and the iteration's number.

    DeterministicEngine's checkpoints hold the CPU's random state only: a run continued in the middle of
    an epoch would otherwise draw other noise and dropout on a GPU or TPU than the uninterrupted run.
    """
    manual_seed((engine.state.seed * 1_000_003 + engine.state.iteration) % 2**32)


def _draw_order_at_iter(engine: Engine) -> None:
    loader = engine.state.dataloader
    if isinstance(loader, DataLoader) and type(loader.batch_sampler) is BatchSampler:
        engine.state.dataloader = update_dataloader(loader, _OrderDrawnAtIter(loader.batch_sampler))
{% endif %}
