"""What a user looks at: eval images beside their true and predicted masks, a PNG per epoch."""

from pathlib import Path

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from PIL import Image
from torch import nn

from data import Statistics
from models import logits_of

# White space between the pictures, in pixels.
GAP = 4


def voc_palette() -> list[int]:
    """VOC's colour map, as its mask PNGs carry it: class 0 black, 1 dark red, ..., 255 (borders) cream; any dataset's
    classes take the colours of their labels. Each label's bits are spread over the three channels, most significant
    first."""
    palette = []
    for label in range(256):
        rgb = [0, 0, 0]
        for bit in range(8):
            for channel in range(3):
                rgb[channel] |= ((label >> (3 * bit + channel)) & 1) << (7 - bit)
        palette += rgb
    return palette


PALETTE = voc_palette()


def palette_mask(mask: torch.Tensor) -> Image.Image:
    """A mask of labels (class indices, 255) as a palette image, each pixel's value its label, in VOC's colours."""
    picture = Image.fromarray(mask.to(torch.uint8).numpy())  # "L", made "P" by the palette
    picture.putpalette(PALETTE)
    return picture


def coloured(mask: torch.Tensor) -> Image.Image:
    """A mask of labels (class indices, 255) as an RGB picture in VOC's colours."""
    return palette_mask(mask).convert("RGB")


def unnormalised(image: torch.Tensor, normalisation: Statistics) -> Image.Image:
    """An image tensor normalised with ``normalisation`` (a mean and std per channel) back as its RGB picture."""
    mean, std = (torch.tensor(values).view(3, 1, 1) for values in normalisation)
    pixels = ((image * std + mean).clamp(0, 1) * 255).round().to(torch.uint8)
    return Image.fromarray(pixels.permute(1, 2, 0).numpy())


class PredictionPictures:
    """After each epoch, ``epoch_NNNN.png`` in ``folder``: a row per fixed eval image, with its true mask and
    the predicted one beside it, in VOC's colours (pixels VOC leaves unlabelled are cream).

    ``model`` is the network itself, not its DistributedDataParallel wrapper: only rank 0 draws, and the
    wrapper's forward pass would wait for the other processes.
    """

    def __init__(
        self,
        model: nn.Module,
        samples: list[tuple[torch.Tensor, torch.Tensor]],
        folder: Path,
        normalisation: Statistics,
    ) -> None:
        self.model, self.folder, self.normalisation = model, folder, normalisation
        self.images = torch.stack([image for image, _ in samples])
        self.masks = [mask for _, mask in samples]

    def attach(self, trainer: Engine) -> None:
        """Draw after each epoch's evaluation."""
        trainer.add_event_handler(Events.EPOCH_COMPLETED, self)

    @torch.no_grad()
    def __call__(self, engine: Engine) -> None:
        if idist.get_rank() != 0:
            return
        self.model.eval()  # batch norm uses its running statistics
        logits = logits_of(self.model(self.images.to(idist.device())))
        predicted = logits.argmax(dim=1).cpu()
        side = self.images.shape[-1]
        rows = len(self.masks)
        sheet = Image.new("RGB", (3 * side + 2 * GAP, rows * side + (rows - 1) * GAP), "white")
        for row, (image, mask, prediction) in enumerate(zip(self.images, self.masks, predicted, strict=True)):
            top = row * (side + GAP)
            pictures = (unnormalised(image, self.normalisation), coloured(mask), coloured(prediction))
            for column, picture in enumerate(pictures):
                sheet.paste(picture, (column * (side + GAP), top))
        self.folder.mkdir(parents=True, exist_ok=True)
        sheet.save(self.folder / f"epoch_{engine.state.epoch:04d}.png")
