{% import "flags.j2" as flags with context %}
"""What every training step shares: the backend's backward pass and optimizer step, and the engine around the step."""

{% if cookiecutter.deterministic %}
from collections.abc import Callable, Iterator
{% else %}
from collections.abc import Callable
{% endif %}
{% if cookiecutter.mixed_precision %}
from contextlib import AbstractContextManager
{% else %}
from contextlib import AbstractContextManager, nullcontext
{% endif %}
from typing import Any, NamedTuple

{% if flags.cuda_amp %}
import ignite.distributed as idist
{% endif %}
import torch
{% if flags.xla %}
import torch_xla
import torch_xla.core.xla_model as xm
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


class Backprop:
    """Autocast, backward pass and optimizer step {{ flags.backprop }}.

    Every training step is written with these four calls, so that it reads the same on every backend.
    """
{% if flags.cuda_amp %}

    def __init__(self, use_amp: bool) -> None:
        # Mixed precision runs on CUDA only. The scaler is part of the training state (checkpoints).
        self.scaler = torch.amp.GradScaler("cuda", enabled=use_amp and idist.device().type == "cuda")
{% elif flags.xla_amp %}

    def __init__(self, use_amp: bool) -> None:
        self.use_amp = use_amp
{% endif %}

    def autocast(self) -> AbstractContextManager:
{% if flags.cuda_amp %}
        return torch.autocast("cuda", enabled=self.scaler.is_enabled())
{% elif flags.xla_amp %}
        # TPUs compute in bfloat16 natively: no gradient scaler is needed.
        return torch.autocast("xla", dtype=torch.bfloat16, enabled=self.use_amp)
{% else %}
        return nullcontext()
{% endif %}

    def backward(self, loss: torch.Tensor) -> None:
{% if flags.cuda_amp %}
        self.scaler.scale(loss).backward()
{% else %}
        loss.backward()
{% endif %}

    def step(self, optimizer: torch.optim.Optimizer) -> None:
{% if flags.cuda_amp %}
        self.scaler.step(optimizer)
{% elif flags.xla %}
        # All-reduces the gradients across replicas, then steps. The engine ends the lazy graph after the
        # training step (training_engine), so every iteration runs the same compiled program.
        xm.optimizer_step(optimizer)
{% else %}
        optimizer.step()
{% endif %}

    def update(self) -> None:
{% if flags.cuda_amp %}
        """Once per iteration, after the optimizer steps: adjust the loss scale."""
        self.scaler.update()
{% else %}
        """Nothing to do once the optimizers have stepped: there is no gradient scaler."""
{% endif %}

    def state_objects(self) -> dict[str, Any]:
        """What a training checkpoint keeps of the step: {{ "the gradient scaler" if flags.cuda_amp else "nothing (no gradient scaler)" }}."""
{% if flags.cuda_amp %}
        return {"scaler": self.scaler}
{% else %}
        return {}
{% endif %}


class StepLosses(NamedTuple):
    """The trainer's output: the names of the training step's losses, and their values in one float32 vector."""

    names: tuple[str, ...]
    values: torch.Tensor


def training_engine(train_step: Callable[[Engine, Any], dict[str, torch.Tensor]], train_loader: Any) -> Engine:
    """The engine that runs ``train_step`` on each batch, with a new shuffle of the data each epoch.

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
{% else %}
    trainer = Engine(step)
{% endif %}
{% if flags.xla %}
    # A device loader wraps the DataLoader; the sampler is on the DataLoader.
    sampler = getattr(getattr(train_loader, "_loader", train_loader), "sampler", None)
{% else %}
    sampler = getattr(train_loader, "sampler", None)
{% endif %}
    if isinstance(sampler, DistributedSampler):
        # Each pass over the data gets its own shuffle, the same on every process, set before the pass's
        # iterator is made: a run continued mid-pass (train_epoch_length shorter than the data) takes the
        # batches the uninterrupted run took.
        passes = Events.EPOCH_STARTED | Events.DATALOADER_STOP_ITERATION
        trainer.add_event_handler(passes, lambda engine: sampler.set_epoch(engine.state.iteration // len(train_loader)))
    return trainer
{% if cookiecutter.deterministic %}


class _OrderDrawnAtIter(ReproducibleBatchSampler):
    """ignite's reproducible batch sampler, drawing each pass's order from the random state at ``iter(loader)``.

    ignite 0.5.5's draws it at the first batch: after DeterministicEngine restores a mid-epoch checkpoint's
    random state, so a run continued mid-epoch would train on another order than the uninterrupted run.
    """

    def __iter__(self) -> Iterator[list[int]]:
        return self._batches(torch.get_rng_state())

    def _batches(self, rng_state: torch.Tensor) -> Iterator[list[int]]:
        current = torch.get_rng_state()
        torch.set_rng_state(rng_state)
        self.setup_batch_indices()
        torch.set_rng_state(current)
        yield from self.batch_indices


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
