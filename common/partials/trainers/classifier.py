{#- The classifiers' engines (vision and text): one training step and one evaluation step per
    batch, on CUDA (optional float16 autocast + gradient scaler), TPU (xm.optimizer_step, optional
    bfloat16, CPU metrics) or CPU. The including trainers.py says how a batch becomes model inputs:
    batch_type (its annotation), batch_helpers (module-level code after the imports, may be empty),
    unpack_batch (a statement binding the tensors on `device`), forward (the model call) and
    targets (the labels' name). -#}
"""Training and evaluation engines."""

from typing import Any

import torch
{% if flags.xla %}
import torch_xla.core.xla_model as xm
{% endif %}
from ignite.engine import Engine
from torch import nn

from utils import training_engine
{% if batch_helpers %}

{{ batch_helpers | trim }}
{% endif %}


def setup_trainer(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: nn.Module,
    device: torch.device,
    train_loader: Any,
{% if flags.cuda_amp %}
    scaler: torch.amp.GradScaler,
{% elif flags.xla_amp %}
    use_amp: bool,
{% endif %}
) -> Engine:
    """Build the engine that runs one optimisation step per batch."""
{% if flags.cuda_amp %}
    use_amp = scaler.is_enabled()
{% endif %}

    def train_step(engine: Engine, batch: {{ batch_type }}) -> dict[str, torch.Tensor]:
        model.train()
        {{ unpack_batch }}
{% if flags.cuda_amp %}
        with torch.autocast(device.type, enabled=use_amp):
            loss = loss_fn({{ forward }}, {{ targets }})
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
{% elif flags.xla %}
{% if flags.xla_amp %}
        # TPUs compute in bfloat16 natively: no gradient scaler is needed.
        with torch.autocast("xla", dtype=torch.bfloat16, enabled=use_amp):
            loss = loss_fn({{ forward }}, {{ targets }})
{% else %}
        loss = loss_fn({{ forward }}, {{ targets }})
{% endif %}
        optimizer.zero_grad()
        loss.backward()
        # All-reduces the gradients across replicas, then steps. The engine ends the lazy graph
        # after the step (utils.training_engine), so every iteration runs the same compiled program.
        xm.optimizer_step(optimizer)
{% else %}
        loss = loss_fn({{ forward }}, {{ targets }})
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
{% endif %}
        # Return the loss as a tensor: reading it (`.item()`) would wait for the device every step.
        return {"train_loss": loss.detach()}

    return training_engine(train_step, train_loader)


{% if cookiecutter.mixed_precision %}
def setup_evaluator(model: nn.Module, device: torch.device, use_amp: bool) -> Engine:
{% else %}
def setup_evaluator(model: nn.Module, device: torch.device) -> Engine:
{% endif %}
    """Build the engine that computes predictions for the metrics."""

    @torch.no_grad()
    def eval_step(engine: Engine, batch: {{ batch_type }}) -> tuple[torch.Tensor, torch.Tensor]:
        model.eval()
        {{ unpack_batch }}
{% if flags.cuda_amp %}
        with torch.autocast(device.type, enabled=use_amp):
            logits = {{ forward }}
        return logits.float(), {{ targets }}
{% elif flags.xla %}
{% if flags.xla_amp %}
        with torch.autocast("xla", dtype=torch.bfloat16, enabled=use_amp):
            logits = {{ forward }}
{% else %}
        logits = {{ forward }}
{% endif %}
        # The metrics run on the CPU: one transfer per eval batch, none in the training step.
        return logits.float().cpu(), {{ targets }}.cpu()
{% else %}
        return {{ forward }}, {{ targets }}
{% endif %}

    return Engine(eval_step)
