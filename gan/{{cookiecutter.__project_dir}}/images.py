"""What a user looks at: grids of generated samples and a plot of the losses, as PNG files."""

import math
from pathlib import Path

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from matplotlib.figure import Figure
from torch import nn
from torchvision.utils import save_image

from config import Config

# Up to this many points per line, each is marked.
MARKED_POINTS = 50


@torch.no_grad()
def save_samples(generator: nn.Module, noise: torch.Tensor, path: Path) -> None:
    """Generate one image per noise vector and save them as a square PNG grid (rank 0 writes).

    Every process generates: a DistributedDataParallel generator may sync its buffers in the forward
    pass, which all processes must join.
    """
    generator.eval()  # batch norm uses its running statistics: a sample does not depend on the others
    images = generator(noise).float().cpu()
    if idist.get_rank() == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        # The generator's output is in [-1, 1]; value_range maps it to the PNG's [0, 1].
        save_image(images, path, nrow=math.ceil(math.sqrt(len(images))), normalize=True, value_range=(-1, 1))


def plot_losses(history: list[tuple[int, dict[str, float]]], path: Path) -> None:
    """Plot the discriminator's and the generator's losses against the iteration, as a PNG."""
    # matplotlib's object API, without pyplot: no display or GUI backend is involved.
    figure = Figure(figsize=(8, 4), layout="constrained")
    axes = figure.subplots()
    iterations = [iteration for iteration, _ in history]
    # A marker on each point while there are few: a line through one point (a short run) draws nothing.
    marker = "o" if len(history) <= MARKED_POINTS else None
    for name, label in (("loss_d", "discriminator"), ("loss_g", "generator")):
        axes.plot(iterations, [values[name] for _, values in history], label=label, marker=marker, markersize=4)
    axes.set_xlabel("iteration")
    axes.set_ylabel("loss (BCE)")
    axes.legend()
    figure.savefig(path)


class SamplesAndLosses:
    """After each epoch, ``samples/epoch_NNNN.png``: the generator's images for the same fixed noise (in every
    process and after a resume: its own seeded generator), and ``losses.png``: every loss read so far.

    The losses read at each logging interval are kept in the trainer's state, so that a checkpoint holds them
    and a continued run plots what came before it too.
    """

    def __init__(self, generator: nn.Module, config: Config, run_dir: Path) -> None:
        self.generator, self.run_dir, self.every = generator, run_dir, config.log_every_iters
        noise_rng = torch.Generator().manual_seed(config.seed)
        self.noise = torch.randn(config.num_samples, config.z_dim, 1, 1, generator=noise_rng).to(idist.device())

    def attach(self, trainer: Engine) -> None:
        """Keep the losses each reading gives (after it: handlers.setup_handlers), draw after each epoch."""
        trainer.state.loss_history = []
        trainer.state_dict_user_keys.append("loss_history")
        trainer.add_event_handler(Events.STARTED, self.drop_history_ahead)
        trainer.add_event_handler(Events.ITERATION_COMPLETED(every=self.every), self.keep_losses)
        trainer.add_event_handler(Events.EPOCH_COMPLETED, self.save_samples)
        trainer.add_event_handler(Events.EPOCH_COMPLETED | Events.COMPLETED, self.plot_losses)

    def drop_history_ahead(self, engine: Engine) -> None:
        # A finished run started again restarts at iteration 0: its old points would be plotted twice.
        engine.state.loss_history = [point for point in engine.state.loss_history if point[0] <= engine.state.iteration]

    def keep_losses(self, engine: Engine) -> None:
        values = {name: engine.state.metrics[name] for name in engine.state.output.names}
        engine.state.loss_history.append((engine.state.iteration, values))

    def save_samples(self, engine: Engine) -> None:
        save_samples(self.generator, self.noise, self.run_dir / "samples" / f"epoch_{engine.state.epoch:04d}.png")

    def plot_losses(self, engine: Engine) -> None:
        if idist.get_rank() == 0 and engine.state.loss_history:
            plot_losses(engine.state.loss_history, self.run_dir / "losses.png")
