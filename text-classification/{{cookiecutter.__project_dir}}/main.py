{% import "flags.j2" as flags with context %}
"""Fine-tune a transformer for sentiment classification with PyTorch-Ignite: read this file top to bottom."""

from types import SimpleNamespace

import ignite.distributed as idist
from ignite.handlers import PiecewiseLinear
from torch import nn, optim

from data import NUM_CLASSES, setup_data, setup_tokenizer
from models import setup_model
from trainers import train_and_evaluate
from utils import cli, start_run
{% if flags.xla %}
from xla import device_loader, eval_device_loader, start_alike
{% endif %}


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on the weight matrices only: biases and normalisation layers are left alone."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in parameters if p.ndim > 1], "weight_decay": weight_decay},
        {"params": [p for p in parameters if p.ndim <= 1], "weight_decay": 0.0},
    ]


def run(local_rank: int, config: SimpleNamespace) -> None:
    """Train and evaluate in one process (one of several in distributed training)."""
    outputs = start_run(config)

    tokenizer = setup_tokenizer(config)
    train_loader, eval_loader = setup_data(config, tokenizer)
{% if flags.xla %}
    train_loader = device_loader(train_loader)
    eval_loader = eval_device_loader(eval_loader)
{% endif %}
    epoch_length = config.train_epoch_length or len(train_loader)

    model = idist.auto_model(setup_model(config, vocab_size=len(tokenizer), num_classes=NUM_CLASSES))
{% if flags.xla %}
    start_alike(model)  # every replica begins from replica 0's weights
    # A plain optimizer on TPU: the trainer steps it with xm.optimizer_step, which also
    # all-reduces the gradients (ignite 0.5.5's auto_optim fails on XLA).
    optimizer = optim.AdamW(parameter_groups(model, config.weight_decay), lr=config.lr)
{% else %}
    optimizer = idist.auto_optim(optim.AdamW(parameter_groups(model, config.weight_decay), lr=config.lr))
{% endif %}
    loss_fn = nn.CrossEntropyLoss().to(idist.device())
    # Linear warm-up over the first `warmup_ratio` of the iterations, then linear decay to zero.
    total = config.max_epochs * epoch_length
    lr_scheduler = PiecewiseLinear(
        optimizer,
        "lr",
        milestones_values=[(0, 0.0), (round(config.warmup_ratio * total), config.lr), (total, 0.0)],
    )

    train_and_evaluate(config, model, optimizer, loss_fn, lr_scheduler, train_loader, eval_loader, outputs)


if __name__ == "__main__":
    cli(run)
