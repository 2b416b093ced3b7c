"""What a user looks at: grids of generated samples and a plot of the losses, as PNG files."""

import math
from pathlib import Path

import ignite.distributed as idist
import torch
from matplotlib.figure import Figure
from torch import nn
from torchvision.utils import save_image

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
