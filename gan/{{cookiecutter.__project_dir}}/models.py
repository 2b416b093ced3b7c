"""The DCGAN networks (Radford et al., 2016), sized by the image size.

The generator grows a 4x4 map to the full image with stride-2 transposed convolutions, halving the
width at each step; the discriminator mirrors it. Both use batch norm (not on the discriminator's
input) and the paper's initialisation.
"""

from torch import nn


def doublings(image_size: int) -> int:
    """How many stride-2 layers lead from 4x4 to ``image_size`` x ``image_size``."""
    if image_size < 8 or image_size & (image_size - 1):
        raise ValueError(f"image_size={image_size} is not supported: use a power of 2, at least 8 (e.g. 32 or 64)")
    return image_size.bit_length() - 3


def init_weights(module: nn.Module) -> None:
    """DCGAN initialisation: convolution weights from N(0, 0.02), batch-norm scales from N(1, 0.02)."""
    for layer in module.modules():
        if isinstance(layer, nn.Conv2d | nn.ConvTranspose2d):
            nn.init.normal_(layer.weight, 0.0, 0.02)
        elif isinstance(layer, nn.BatchNorm2d):
            nn.init.normal_(layer.weight, 1.0, 0.02)
            nn.init.zeros_(layer.bias)


class Generator(nn.Sequential):
    """Noise of shape (z_dim, 1, 1) to an image of shape (channels, image_size, image_size) in [-1, 1]."""

    def __init__(self, z_dim: int, filters: int, channels: int, image_size: int) -> None:
        n = doublings(image_size)
        width = filters * 2 ** (n - 1)
        # 1x1 -> 4x4
        layers = [nn.ConvTranspose2d(z_dim, width, 4, 1, 0, bias=False), nn.BatchNorm2d(width), nn.ReLU(True)]
        for _ in range(n - 1):  # double the size, halve the width
            layers += [nn.ConvTranspose2d(width, width // 2, 4, 2, 1, bias=False), nn.BatchNorm2d(width // 2)]
            layers.append(nn.ReLU(True))
            width //= 2
        # The last doubling makes the image; tanh matches the data, scaled to [-1, 1].
        layers += [nn.ConvTranspose2d(width, channels, 4, 2, 1, bias=False), nn.Tanh()]
        super().__init__(*layers)
        init_weights(self)


class Discriminator(nn.Sequential):
    """An image to one logit per image, high for real and low for generated: shape (batch,).

    No sigmoid: the loss is ``BCEWithLogitsLoss``, which is numerically stable and safe under autocast.
    """

    def __init__(self, channels: int, filters: int, image_size: int) -> None:
        n = doublings(image_size)
        # Halve the size, double the width; no batch norm on the input layer, as in the paper.
        layers = [nn.Conv2d(channels, filters, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True)]
        width = filters
        for _ in range(n - 1):
            layers += [nn.Conv2d(width, width * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 2)]
            layers.append(nn.LeakyReLU(0.2, True))
            width *= 2
        # 4x4 -> 1x1, then one logit per image.
        layers += [nn.Conv2d(width, 1, 4, 1, 0, bias=False), nn.Flatten(0)]
        super().__init__(*layers)
        init_weights(self)
