"""Training and evaluation engines."""

from types import SimpleNamespace
from typing import Any

import torch
{% if cookiecutter.deterministic %}
from ignite.engine import DeterministicEngine, Engine, Events
{% else %}
from ignite.engine import Engine, Events
{% endif %}
from torch import nn
from torch.utils.data.distributed import DistributedSampler


def setup_trainer(
    config: SimpleNamespace,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: nn.Module,
    device: torch.device,
    train_sampler: Any,
{% if cookiecutter.mixed_precision %}
    scaler: torch.amp.GradScaler,
{% endif %}
) -> Engine:
    """Build the engine that runs one optimisation step per batch."""
{% if cookiecutter.mixed_precision %}
    use_amp = scaler.is_enabled()
{% endif %}

    def train_step(engine: Engine, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
        model.train()
        x, y = (t.to(device, non_blocking=True) for t in batch)
{% if cookiecutter.mixed_precision %}
        with torch.autocast(device.type, enabled=use_amp):
            loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
{% else %}
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
{% endif %}
        # Return the loss as a tensor: reading it (`.item()`) would wait for the device every step.
        return {"train_loss": loss.detach()}

{% if cookiecutter.deterministic %}
    # DeterministicEngine reseeds the data order per epoch, so a resumed run sees the same batches.
    trainer = DeterministicEngine(train_step)
{% else %}
    trainer = Engine(train_step)
{% endif %}
    if isinstance(train_sampler, DistributedSampler):
        # Each epoch gets its own shuffle, the same on every process.
        trainer.add_event_handler(Events.EPOCH_STARTED, lambda engine: train_sampler.set_epoch(engine.state.epoch - 1))
    return trainer


def setup_evaluator(config: SimpleNamespace, model: nn.Module, device: torch.device) -> Engine:
    """Build the engine that computes predictions for the metrics."""
{% if cookiecutter.mixed_precision %}
    use_amp = config.use_amp and device.type == "cuda"
{% endif %}

    @torch.no_grad()
    def eval_step(engine: Engine, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        model.eval()
        x, y = (t.to(device, non_blocking=True) for t in batch)
{% if cookiecutter.mixed_precision %}
        with torch.autocast(device.type, enabled=use_amp):
            y_pred = model(x)
        return y_pred.float(), y
{% else %}
        return model(x), y
{% endif %}

    return Engine(eval_step)
