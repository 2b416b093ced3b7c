{% import "flags.j2" as flags with context %}
"""Train an image classifier with PyTorch-Ignite: read this file top to bottom."""

from types import SimpleNamespace

import ignite.distributed as idist
from ignite.handlers import PiecewiseLinear
from torch import nn, optim

from data import NUM_CLASSES, setup_data
from models import setup_model
from trainers import train_and_evaluate
from utils import cli, start_run
{% if flags.xla %}
from xla import device_loader, eval_device_loader, start_alike
{% endif %}


def run(local_rank: int, config: SimpleNamespace) -> None:
    """Train and evaluate in one process (one of several in distributed training)."""
    outputs = start_run(config)

    train_loader, eval_loader = setup_data(config)
{% if flags.xla %}
    train_loader = device_loader(train_loader)
    eval_loader = eval_device_loader(eval_loader)
{% endif %}
    epoch_length = config.train_epoch_length or len(train_loader)

    model = idist.auto_model(setup_model(config.model, num_classes=NUM_CLASSES))
{% if flags.xla %}
    start_alike(model)  # every replica begins from replica 0's weights
    # A plain optimizer on TPU: the trainer steps it with xm.optimizer_step, which also
    # all-reduces the gradients (ignite 0.5.5's auto_optim fails on XLA).
    optimizer = optim.Adam(model.parameters(), lr=config.lr)
{% else %}
    optimizer = idist.auto_optim(optim.Adam(model.parameters(), lr=config.lr))
{% endif %}
    loss_fn = nn.CrossEntropyLoss().to(idist.device())
    # Linear warm-up during the first epoch, then linear decay to zero.
    lr_scheduler = PiecewiseLinear(
        optimizer,
        "lr",
        milestones_values=[(0, 0.0), (epoch_length, config.lr), (config.max_epochs * epoch_length, 0.0)],
    )

    train_and_evaluate(config, model, optimizer, loss_fn, lr_scheduler, train_loader, eval_loader, outputs)


if __name__ == "__main__":
    cli(run)
