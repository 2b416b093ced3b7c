"""Train an image classifier with PyTorch-Ignite: read this file top to bottom."""

from ignite.handlers import PiecewiseLinear
from torch import nn, optim

from config import Config
from data import setup_data
from machinery.backend import setup_backend
from machinery.cli import cli
from machinery.runs.directory import write_classes
from machinery.runs.start import start_run
from machinery.training.fit import fit
from metrics import eval_metrics
from models import check_model, setup_model
from trainers import AccumulatedGradients, setup_evaluator, setup_trainer


def run(local_rank: int, config: Config) -> None:
    """Train and evaluate in one process (one of several in distributed training)."""
    check_model(config.model, config.image_size, config.weights)  # a model that cannot take image_size stops here
    this_run = start_run(config)
    # This run's devices and how a training step runs on them: the same code on every backend (machinery/backend.py).
    backend = setup_backend(config)

    train_loader, eval_loader, classes = setup_data(config)
    write_classes(this_run.run_dir, classes)  # beside the models: predict.py names its predictions with them
    model = setup_model(config.model, num_classes=len(classes), weights=config.weights, image_size=config.image_size)
    optimizer = optim.Adam(model.parameters(), lr=config.lr)
    # Models, optimizers and loaders on the devices (wrapped for several processes, or TPU replicas).
    model, optimizer, train_loader, eval_loader = backend.prepare(model, optimizer, train_loader, eval_loader)
    loss_fn = nn.CrossEntropyLoss()
    # Linear warm-up during the first epoch, then linear decay to zero.
    epoch_length = config.train_epoch_length or len(train_loader)
    lr_scheduler = PiecewiseLinear(
        optimizer,
        "lr",
        milestones_values=[(0, 0.0), (epoch_length, config.lr), (config.max_epochs * epoch_length, 0.0)],
    )

    trainer = setup_trainer(model, optimizer, loss_fn, backend, config.accumulation_steps)
    evaluator = setup_evaluator(model, backend, eval_metrics(loss_fn))
    # What a training checkpoint keeps (with the trainer's state): a stopped run continues from it.
    to_save = {
        "model": model,
        "optimizer": optimizer,
        "lr_scheduler": lr_scheduler,
        "gradients": AccumulatedGradients(model),
        **backend.state_objects(),
    }
    fit(config, this_run, trainer, train_loader, to_save, evaluator, eval_loader)


if __name__ == "__main__":
    cli(run, Config)
