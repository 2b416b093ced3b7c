{% import "flags.j2" as flags with context %}
"""Training and evaluation engines."""

from types import SimpleNamespace
from typing import Any

import torch
{% if flags.xla %}
import torch_xla.core.xla_model as xm
{% endif %}
from ignite.engine import Engine
from torch import nn

from utils import training_engine

Batch = dict[str, torch.Tensor]


def unpack(batch: Batch, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The token ids, attention mask and labels of a batch, on the device."""
    return tuple(batch[key].to(device, non_blocking=True) for key in ("input_ids", "attention_mask", "label"))


def setup_trainer(
    config: SimpleNamespace,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: nn.Module,
    device: torch.device,
    train_loader: Any,
{% if flags.cuda_amp %}
    scaler: torch.amp.GradScaler,
{% endif %}
) -> Engine:
    """Build the engine that runs one optimisation step per batch."""
{% if flags.cuda_amp %}
    use_amp = scaler.is_enabled()
{% elif flags.xla_amp %}
    use_amp = config.use_amp
{% endif %}

    def train_step(engine: Engine, batch: Batch) -> dict[str, torch.Tensor]:
        model.train()
        input_ids, attention_mask, labels = unpack(batch, device)
{% if flags.cuda_amp %}
        with torch.autocast(device.type, enabled=use_amp):
            loss = loss_fn(model(input_ids, attention_mask), labels)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
{% elif flags.xla %}
{% if flags.xla_amp %}
        # TPUs compute in bfloat16 natively: no gradient scaler is needed.
        with torch.autocast("xla", dtype=torch.bfloat16, enabled=use_amp):
            loss = loss_fn(model(input_ids, attention_mask), labels)
{% else %}
        loss = loss_fn(model(input_ids, attention_mask), labels)
{% endif %}
        optimizer.zero_grad()
        loss.backward()
        # All-reduces the gradients across replicas, then steps. The device loader ends the
        # lazy graph after each step, so every iteration runs the same compiled program.
        xm.optimizer_step(optimizer)
{% else %}
        loss = loss_fn(model(input_ids, attention_mask), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
{% endif %}
        # Return the loss as a tensor: reading it (`.item()`) would wait for the device every step.
        return {"train_loss": loss.detach()}

    return training_engine(train_step, train_loader)


def setup_evaluator(config: SimpleNamespace, model: nn.Module, device: torch.device) -> Engine:
    """Build the engine that computes predictions for the metrics."""
{% if flags.cuda_amp %}
    use_amp = config.use_amp and device.type == "cuda"
{% elif flags.xla_amp %}
    use_amp = config.use_amp
{% endif %}

    @torch.no_grad()
    def eval_step(engine: Engine, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        model.eval()
        input_ids, attention_mask, labels = unpack(batch, device)
{% if flags.cuda_amp %}
        with torch.autocast(device.type, enabled=use_amp):
            logits = model(input_ids, attention_mask)
        return logits.float(), labels
{% elif flags.xla %}
{% if flags.xla_amp %}
        with torch.autocast("xla", dtype=torch.bfloat16, enabled=use_amp):
            logits = model(input_ids, attention_mask)
{% else %}
        logits = model(input_ids, attention_mask)
{% endif %}
        # The metrics run on the CPU: one transfer per eval batch, none in the training step.
        return logits.float().cpu(), labels.cpu()
{% else %}
        return model(input_ids, attention_mask), labels
{% endif %}

    return Engine(eval_step)
