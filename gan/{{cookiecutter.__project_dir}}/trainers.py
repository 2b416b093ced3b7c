{% import "flags.j2" as flags with context %}
{% macro backward(loss) %}{{ "scaler.scale(%s).backward()" % loss if flags.cuda_amp else loss ~ ".backward()" }}{% endmacro %}
{% macro step(optimizer) %}
{% if flags.cuda_amp %}scaler.step({{ optimizer }}){% elif flags.xla %}xm.optimizer_step({{ optimizer }}){% else %}{{ optimizer }}.step(){% endif %}
{% endmacro %}
"""The training engine: one discriminator step, then one generator step, on each batch."""

{% if cookiecutter.mixed_precision %}
from functools import partial
{% endif %}
from types import SimpleNamespace
from typing import Any

import torch
{% if flags.xla %}
import torch_xla.core.xla_model as xm
{% endif %}
from ignite.engine import Engine
from torch import nn

from utils import training_engine


def setup_trainer(
    config: SimpleNamespace,
    generator: nn.Module,
    discriminator: nn.Module,
    optimizer_g: torch.optim.Optimizer,
    optimizer_d: torch.optim.Optimizer,
    loss_fn: nn.Module,
    device: torch.device,
    train_loader: Any,
{% if flags.cuda_amp %}
    scaler: torch.amp.GradScaler,
{% endif %}
) -> Engine:
    """Build the engine that trains both networks, adversarially, on batches of real images."""
{% if flags.cuda_amp %}
    # float16 autocast on CUDA. One gradient scaler serves both optimizers: it is updated once per step.
    autocast = partial(torch.autocast, device.type, enabled=scaler.is_enabled())
{% elif flags.xla_amp %}
    # TPUs compute in bfloat16 natively: no gradient scaler is needed.
    autocast = partial(torch.autocast, "xla", dtype=torch.bfloat16, enabled=config.use_amp)
{% endif %}

    def discriminate(images: torch.Tensor, target: float) -> tuple[torch.Tensor, torch.Tensor]:
        """The discriminator's logits for ``images`` and their loss against ``target`` (1: real, 0: generated)."""
{% if cookiecutter.mixed_precision %}
        with autocast():
            logits = discriminator(images)
            return logits, loss_fn(logits, torch.full_like(logits, target))
{% else %}
        logits = discriminator(images)
        return logits, loss_fn(logits, torch.full_like(logits, target))
{% endif %}

    def train_step(engine: Engine, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
        generator.train()
        discriminator.train()
        real = batch[0].to(device, non_blocking=True)  # the class labels are not used
        noise = torch.randn(real.shape[0], config.z_dim, 1, 1, device=device)
{% if cookiecutter.mixed_precision %}
        with autocast():
            fake = generator(noise)
{% else %}
        fake = generator(noise)
{% endif %}

        # Discriminator: tell real images from generated ones. Real and generated batches get a pass
        # and a backward each, so batch norm never mixes their statistics (as in the DCGAN paper).
        optimizer_d.zero_grad()
        logits_real, loss_real = discriminate(real, 1.0)
        {{ backward("loss_real") }}
        # detach(): this step trains the discriminator only.
        logits_fake, loss_fake = discriminate(fake.detach(), 0.0)
        {{ backward("loss_fake") }}
{% if flags.xla %}
        # All-reduces the gradients across replicas, then steps. The engine ends the lazy graph after the
        # training step (utils.training_engine), so every iteration runs the same compiled program.
{% endif %}
        {{ step("optimizer_d") }}

        # Generator: make the updated discriminator take the generated images for real ones.
        optimizer_g.zero_grad()
        _, loss_g = discriminate(fake, 1.0)
        {{ backward("loss_g") }}
        {{ step("optimizer_g") }}
{% if flags.cuda_amp %}
        scaler.update()
{% endif %}

        # Tensors, not numbers: reading them (`.item()`) would wait for the device every step.
        return {
            "loss_d": (loss_real + loss_fake).detach(),
            "loss_g": loss_g.detach(),
            # The discriminator's mean probability that real, then generated, images are real:
            # D(x) and D(G(z)) in the paper. Both near 0.5 means neither network is winning.
            "d_real": torch.sigmoid(logits_real.detach()).mean(),
            "d_fake": torch.sigmoid(logits_fake.detach()).mean(),
        }

    return training_engine(train_step, train_loader)
