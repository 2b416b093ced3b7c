"""Fine-tune a transformer for sentiment classification with PyTorch-Ignite: read this file top to bottom."""

from ignite.handlers import PiecewiseLinear
from torch import nn, optim

from config import Config
from data import setup_data, setup_tokenizer
from machinery.backend import setup_backend
from machinery.cli import cli
from machinery.runs.directory import write_classes
from machinery.runs.start import start_run
from machinery.training.fit import fit
from metrics import eval_metrics
from models import learning_rate, setup_model
from trainers import AccumulatedGradients, setup_evaluator, setup_trainer


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on the weight matrices only: biases and normalisation layers are left alone."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in parameters if p.ndim > 1], "weight_decay": weight_decay},
        {"params": [p for p in parameters if p.ndim <= 1], "weight_decay": 0.0},
    ]


def run(local_rank: int, config: Config) -> None:
    """Train and evaluate in one process (one of several in distributed training)."""
    this_run = start_run(config)
    # This run's devices and how a training step runs on them: the same code on every backend (machinery/backend.py).
    backend = setup_backend(config)

    tokenizer = setup_tokenizer(config)
    train_loader, eval_loader, classes = setup_data(config, tokenizer)
    write_classes(this_run.run_dir, classes)  # beside the models: what each output of the model means
    model = setup_model(config, vocab_size=len(tokenizer), num_classes=len(classes))
    lr = learning_rate(config)
    optimizer = optim.AdamW(parameter_groups(model, config.weight_decay), lr=lr)
    # Models, optimizers and loaders on the devices (wrapped for several processes, or TPU replicas).
    model, optimizer, train_loader, eval_loader = backend.prepare(model, optimizer, train_loader, eval_loader)
    loss_fn = nn.CrossEntropyLoss()
    # Linear warm-up over the first `warmup_ratio` of the iterations, then linear decay to zero.
    total = config.max_epochs * (config.train_epoch_length or len(train_loader))
    lr_scheduler = PiecewiseLinear(
        optimizer,
        "lr",
        milestones_values=[(0, 0.0), (round(config.warmup_ratio * total), lr), (total, 0.0)],
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
