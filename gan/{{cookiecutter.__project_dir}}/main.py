"""Train a generative adversarial network (DCGAN) with PyTorch-Ignite: read this file top to bottom."""

from torch import nn, optim

from config import Config
from data import setup_data
from images import SamplesAndLosses
from machinery.backend import setup_backend
from machinery.cli import cli
from machinery.runs.start import start_run
from machinery.training.fit import fit
from models import Discriminator, Generator
from trainers import setup_trainer


def run(local_rank: int, config: Config) -> None:
    """Train the generator and the discriminator in one process (one of several in distributed training)."""
    this_run = start_run(config)
    # This run's devices and how a training step runs on them: the same code on every backend (machinery/backend.py).
    backend = setup_backend(config)

    train_loader = setup_data(config)
    generator = Generator(config.z_dim, config.g_filters, config.channels, config.image_size)
    discriminator = Discriminator(config.channels, config.d_filters, config.image_size)
    # Adam with beta1 = 0.5 (instead of 0.9), as in the DCGAN paper: less momentum, steadier training.
    betas = (config.beta1, 0.999)
    optimizer_g = optim.Adam(generator.parameters(), lr=config.lr, betas=betas)
    optimizer_d = optim.Adam(discriminator.parameters(), lr=config.lr, betas=betas)
    # Models, optimizers and loaders on the devices (wrapped for several processes, or TPU replicas).
    generator, discriminator, optimizer_g, optimizer_d, train_loader = backend.prepare(
        generator, discriminator, optimizer_g, optimizer_d, train_loader
    )
    loss_fn = nn.BCEWithLogitsLoss()

    trainer = setup_trainer(config, generator, discriminator, optimizer_g, optimizer_d, loss_fn, backend)
    pictures = SamplesAndLosses(generator, config, this_run.run_dir)
    # What a training checkpoint keeps (with the trainer's state, the losses read so far in it): a stopped run
    # continues from it.
    to_save = {
        "generator": generator,
        "discriminator": discriminator,
        "optimizer_g": optimizer_g,
        "optimizer_d": optimizer_d,
        **backend.state_objects(),
    }
    fit(config, this_run, trainer, train_loader, to_save, handlers=[pictures.attach])


if __name__ == "__main__":
    cli(run, Config)
