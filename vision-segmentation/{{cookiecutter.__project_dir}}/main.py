{% import "flags.j2" as flags with context %}
"""Train a semantic segmentation model with PyTorch-Ignite: read this file top to bottom."""

from types import SimpleNamespace

import ignite.distributed as idist
from ignite.handlers import PiecewiseLinear
from torch import optim

from data import NUM_CLASSES, setup_data
from models import SegmentationLoss, setup_model
from pictures import PredictionPictures
from trainers import train_and_evaluate
from utils import cli, start_run
{% if flags.xla %}
from xla import device_loader, eval_device_loader, start_alike
{% endif %}


def run(local_rank: int, config: SimpleNamespace) -> None:
    """Train and evaluate in one process (one of several in distributed training)."""
    outputs = start_run(config)

    train_loader, eval_loader = setup_data(config)
    # The same few eval images are drawn with their predicted masks after each epoch. (On several TPU
    # replicas, ignite has wrapped the DataLoader in a device loader.)
    eval_set = getattr(eval_loader, "_loader", eval_loader).dataset
    samples = [eval_set[index] for index in range(config.num_pictures)]
{% if flags.xla %}
    train_loader = device_loader(train_loader)
    eval_loader = eval_device_loader(eval_loader)
{% endif %}
    epoch_length = config.train_epoch_length or len(train_loader)

    network = setup_model(config.model, NUM_CLASSES, config.weights_backbone)
    model = idist.auto_model(network)
{% if flags.xla %}
    start_alike(model)  # every replica begins from replica 0's weights
    # A plain optimizer on TPU: the trainer steps it with xm.optimizer_step, which also
    # all-reduces the gradients (ignite 0.5.5's auto_optim fails on XLA).
    optimizer = optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay)
{% else %}
    optimizer = idist.auto_optim(
        optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay)
    )
{% endif %}
    loss_fn = SegmentationLoss(config.aux_loss_weight).to(idist.device())
    # Linear warm-up during the first epoch, then linear decay to zero.
    lr_scheduler = PiecewiseLinear(
        optimizer,
        "lr",
        milestones_values=[(0, 0.0), (epoch_length, config.lr), (config.max_epochs * epoch_length, 0.0)],
    )

    pictures = PredictionPictures(network, samples, outputs.run_dir / "predictions")
    train_and_evaluate(
        config, model, optimizer, loss_fn, lr_scheduler, train_loader, eval_loader, outputs, epoch_handlers=[pictures]
    )


if __name__ == "__main__":
    cli(run)
