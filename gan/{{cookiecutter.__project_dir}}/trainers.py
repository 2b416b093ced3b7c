"""The training engine: one discriminator step, then one generator step, on each batch."""

import ignite.distributed as idist
import torch
from ignite.engine import Engine
from torch import nn

from config import Config
from machinery.backend import Backend
from machinery.training.engine import training_engine


def setup_trainer(
    config: Config,
    generator: nn.Module,
    discriminator: nn.Module,
    optimizer_g: torch.optim.Optimizer,
    optimizer_d: torch.optim.Optimizer,
    loss_fn: nn.Module,
    backend: Backend,
) -> Engine:
    """Build the engine that trains both networks, adversarially, on batches of real images."""
    device = idist.device()

    def discriminate(images: torch.Tensor, target: float) -> tuple[torch.Tensor, torch.Tensor]:
        """The discriminator's logits for ``images`` and their loss against ``target`` (1: real, 0: generated)."""
        with backend.autocast():
            logits = discriminator(images)
            return logits, loss_fn(logits, torch.full_like(logits, target))

    def train_step(engine: Engine, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
        generator.train()
        discriminator.train()
        real = batch[0].to(device, non_blocking=True)  # the class labels are not used
        noise = torch.randn(real.shape[0], config.z_dim, 1, 1, device=device)
        with backend.autocast():
            fake = generator(noise)

        # Discriminator: tell real images from generated ones. Real and generated batches get a pass
        # and a backward each, so batch norm never mixes their statistics (as in the DCGAN paper).
        optimizer_d.zero_grad()
        logits_real, loss_real = discriminate(real, 1.0)
        backend.backward(loss_real)
        # detach(): this step trains the discriminator only.
        logits_fake, loss_fake = discriminate(fake.detach(), 0.0)
        backend.backward(loss_fake)
        backend.optimizer_step(optimizer_d)

        # Generator: make the updated discriminator take the generated images for real ones.
        optimizer_g.zero_grad()
        _, loss_g = discriminate(fake, 1.0)
        backend.backward(loss_g)
        backend.optimizer_step(optimizer_g)
        # Once per iteration, after both optimizers have stepped (a CUDA gradient scaler serves both).
        backend.update()

        # Tensors, not numbers: reading them (`.item()`) would wait for the device every step.
        return {
            "loss_d": (loss_real + loss_fake).detach(),
            "loss_g": loss_g.detach(),
            # The discriminator's mean probability that real, then generated, images are real:
            # D(x) and D(G(z)) in the paper. Both near 0.5 means neither network is winning.
            "d_real": torch.sigmoid(logits_real.detach()).mean(),
            "d_fake": torch.sigmoid(logits_fake.detach()).mean(),
        }

    return training_engine(train_step, backend)
