{% import "flags.j2" as flags with context %}
"""Train a generative adversarial network (DCGAN) with PyTorch-Ignite: read this file top to bottom."""

from types import SimpleNamespace

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from torch import nn, optim

from data import setup_data
from engine import Backprop
from handlers import (
    resume_from,
{% if cookiecutter.save_training %}
    setup_checkpoints,
{% endif %}
    setup_handlers,
)
from images import plot_losses, save_samples
from models import Discriminator, Generator
from preemption import setup_clean_stop
{% if cookiecutter.logger != "none" %}
from tracking import setup_tracking
{% endif %}
from trainers import setup_trainer
from utils import cli, start_run
{% if flags.xla %}
from xla import device_loader, setup_xla_metrics, start_alike
{% endif %}


def run(local_rank: int, config: SimpleNamespace) -> None:
    """Train the generator and the discriminator in one process (one of several in distributed training)."""
    run_dir, logger, checkpoint = start_run(config)
    rank = idist.get_rank()

    train_loader = setup_data(config)
{% if flags.xla %}
    train_loader = device_loader(train_loader)
{% endif %}
    epoch_length = config.train_epoch_length or len(train_loader)

    generator = idist.auto_model(Generator(config.z_dim, config.g_filters, config.channels, config.image_size))
    discriminator = idist.auto_model(Discriminator(config.channels, config.d_filters, config.image_size))
    # Adam with beta1 = 0.5 (instead of 0.9), as in the DCGAN paper: less momentum, steadier training.
    betas = (config.beta1, 0.999)
{% if flags.xla %}
    start_alike(generator, discriminator)  # every replica begins from replica 0's weights
    # Plain optimizers on TPU: the trainer steps them with xm.optimizer_step, which also all-reduces
    # the gradients (ignite 0.5.5's auto_optim fails on XLA).
    optimizer_g = optim.Adam(generator.parameters(), lr=config.lr, betas=betas)
    optimizer_d = optim.Adam(discriminator.parameters(), lr=config.lr, betas=betas)
{% else %}
    optimizer_g = idist.auto_optim(optim.Adam(generator.parameters(), lr=config.lr, betas=betas))
    optimizer_d = idist.auto_optim(optim.Adam(discriminator.parameters(), lr=config.lr, betas=betas))
{% endif %}
    loss_fn = nn.BCEWithLogitsLoss()

{% if cookiecutter.mixed_precision %}
    backprop = Backprop(config.use_amp)
{% else %}
    backprop = Backprop()
{% endif %}
    trainer = setup_trainer(config, generator, discriminator, optimizer_g, optimizer_d, loss_fn, backprop, train_loader)
    trainer.logger = logger
{% if flags.xla %}
    setup_xla_metrics(trainer, run_dir, logger)
{% endif %}

    networks = {"generator": generator, "discriminator": discriminator}
    setup_handlers(trainer, config)
{% if cookiecutter.save_training %}
    to_save = {
        **networks,
        "optimizer_g": optimizer_g,
        "optimizer_d": optimizer_d,
        "trainer": trainer,
        **backprop.state_objects(),
    }
    save_training = setup_checkpoints(trainer, to_save, config, run_dir)
    setup_clean_stop(trainer, config, run_dir, save_training)
{% else %}
    to_save = networks
    setup_clean_stop(trainer, config, run_dir)
{% endif %}
{% if cookiecutter.logger != "none" %}
    optimizers = {"generator": optimizer_g, "discriminator": optimizer_d}
    tracker = setup_tracking(trainer, optimizers, config, run_dir) if rank == 0 else None
{% endif %}

    # The same noise at every epoch, in every process and after a resume (its own seeded generator):
    # the grids show how the generator's images for fixed inputs change as it trains.
    noise_rng = torch.Generator().manual_seed(config.seed)
    fixed_noise = torch.randn(config.num_samples, config.z_dim, 1, 1, generator=noise_rng).to(idist.device())

    @trainer.on(Events.EPOCH_COMPLETED)
    def save_epoch_samples(engine: Engine) -> None:
        save_samples(generator, fixed_noise, run_dir / "samples" / f"epoch_{engine.state.epoch:04d}.png")

    @trainer.on(Events.EPOCH_COMPLETED | Events.COMPLETED)
    def save_loss_plot(engine: Engine) -> None:
        # The losses read at each logging interval (setup_handlers), restored with the trainer on resume.
        if rank == 0 and engine.state.loss_history:
            plot_losses(engine.state.loss_history, run_dir / "losses.png")

    # An interrupted run's newest checkpoint when this command continues it (preemption.py), or resume_from.
    checkpoint = checkpoint or config.resume_from
    if checkpoint:
        resume_from(to_save, checkpoint, logger)

    trainer.run(train_loader, max_epochs=config.max_epochs, epoch_length=epoch_length)
{% if cookiecutter.logger != "none" %}
    if tracker is not None:
        tracker.close()
{% endif %}


if __name__ == "__main__":
    cli(run)
