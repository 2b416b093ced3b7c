{% import "flags.j2" as flags with context %}
"""The classifier's engines: one optimisation step per batch, an evaluation after each epoch, and the handlers."""

from collections.abc import Callable
from contextlib import AbstractContextManager
from types import SimpleNamespace
from typing import Any

import ignite.distributed as idist
import torch
{% if flags.xla %}
import torch_xla
{% endif %}
from ignite.engine import Engine, Events
from ignite.handlers import PiecewiseLinear
{% if flags.xla %}
from ignite.metrics import Metric
{% else %}
from ignite.metrics import Accuracy, Loss
{% endif %}
from torch import nn

from data import Batch, prepare_batch
from engine import Backprop, training_engine
from handlers import (
    resume_from,
{% if flags.save_best %}
    setup_best_models,
{% endif %}
{% if cookiecutter.save_training %}
    setup_checkpoints,
{% endif %}
{% if flags.early_stopping %}
    setup_early_stopping,
{% endif %}
    setup_handlers,
)
from preemption import setup_clean_stop
{% if cookiecutter.logger != "none" %}
from tracking import setup_tracking
{% endif %}
from utils import RunOutputs, log_metrics
{% if flags.xla %}
from xla import setup_xla_metrics
{% endif %}


def setup_trainer(
    model: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: nn.Module, backprop: Backprop, train_loader: Any
) -> Engine:
    """Build the engine that runs one optimisation step per batch."""
    device = idist.device()

    def train_step(engine: Engine, batch: Batch) -> dict[str, torch.Tensor]:
        model.train()
        inputs, targets = prepare_batch(batch, device)
        with backprop.autocast():
            loss = loss_fn(model(*inputs), targets)
        optimizer.zero_grad()
        backprop.backward(loss)
        backprop.step(optimizer)
        backprop.update()
        # Return the loss as a tensor: reading it (`.item()`) would wait for the device every step.
        return {"train_loss": loss.detach()}

    return training_engine(train_step, train_loader)


{% if flags.xla %}
class ClassifierMetrics(Metric):
    """Accuracy and mean loss, summed on the TPU as the evaluation runs and read once, at its end.

    Stands in for ignite's ``Accuracy`` and ``Loss``, which refuse an XLA device: fed from the CPU, they
    cost two device reads per eval batch, each waiting for the TPU. Here each batch adds its correct
    predictions, summed loss and examples (padding rows left out) to one vector on the device;
    ``compute`` sums it over the replicas and reads it in one transfer. It sets ``accuracy`` and
    ``loss`` in the evaluator's metrics, as ignite's two metrics would, with the same values (like
    them, it scores the samples a DistributedSampler repeats to give every replica as many).
    """

    def __init__(self, loss_fn: nn.Module) -> None:
        # Padding rows get the loss's ignore_index as their label: a mean over the real rows only.
        if getattr(loss_fn, "reduction", None) != "mean" or not hasattr(loss_fn, "ignore_index"):
            raise ValueError("ClassifierMetrics needs a loss with ignore_index and reduction='mean' (CrossEntropyLoss)")
        self.loss_fn = loss_fn
        # The sums live on the TPU (see reset): ignite's own state stays on the CPU, as it requires.
        super().__init__(device="cpu", metrics_result_mode="flatten")

    def reset(self) -> None:
        self.sums = torch.zeros(3, device=idist.device())

    def update(self, output: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> None:
        logits, targets, real = output
        correct = ((logits.argmax(dim=1) == targets) & real).sum()
        examples = real.sum()
        # The loss function's mean over the real rows, times their number: their summed loss.
        loss = self.loss_fn(logits, torch.where(real, targets, self.loss_fn.ignore_index)) * examples
        self.sums += torch.stack([correct.float(), loss.float(), examples.float()])

    def compute(self) -> dict[str, float]:
        sums = idist.all_reduce(self.sums)
        # Ends the evaluation's last graph, the last batch's outputs in it: left pending, they would join the
        # next training step's graph and make it a program of its own. Reading the sums is then a transfer.
        torch_xla.sync()
        correct, loss, examples = sums.tolist()
        return {"accuracy": correct / examples, "loss": loss / examples}


{% endif %}
def setup_evaluator(model: nn.Module, autocast: Callable[[], AbstractContextManager]) -> Engine:
    """Build the engine that computes predictions for the metrics{{ ", on padded batches (xla.eval_device_loader)" if flags.xla }}."""
    device = idist.device()

    @torch.no_grad()
{% if flags.xla %}
    def eval_step(engine: Engine, padded: tuple[Batch, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        batch, real_rows = padded
{% else %}
    def eval_step(engine: Engine, batch: Batch) -> tuple[torch.Tensor, ...]:
{% endif %}
        model.eval()
        inputs, targets = prepare_batch(batch, device)
        with autocast():
            logits = model(*inputs)
{% if flags.xla %}
        # Which rows are the batch's own, not padding: the metrics count those only. Nothing is read here.
        real = torch.arange(targets.shape[0], device=device) < real_rows
        return logits.float(), targets, real
{% else %}
        return logits.float(), targets
{% endif %}

    return Engine(eval_step)


def train_and_evaluate(
    config: SimpleNamespace,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: nn.Module,
    lr_scheduler: PiecewiseLinear,
    train_loader: Any,
    eval_loader: Any,
    outputs: RunOutputs,
) -> None:
    """Train for ``max_epochs``, evaluating after each epoch: metrics, checkpoints, tracking, resuming."""
    run_dir, logger, _ = outputs
{% if cookiecutter.mixed_precision %}
    backprop = Backprop(config.use_amp)
{% else %}
    backprop = Backprop()
{% endif %}
    trainer = setup_trainer(model, optimizer, loss_fn, backprop, train_loader)
    trainer.logger = logger
    # At the iteration's start, so that each iteration trains with the scheduled learning rate.
    trainer.add_event_handler(Events.ITERATION_STARTED, lr_scheduler)
{% if flags.xla %}
    setup_xla_metrics(trainer, run_dir, logger)
{% endif %}
    evaluator = setup_evaluator(model, backprop.autocast)
{% if flags.xla %}
    # Accuracy and loss summed on the TPU and read once per evaluation (ignite's metrics would read twice a batch).
    ClassifierMetrics(loss_fn).attach(evaluator, "metrics")
{% else %}
    Accuracy(device=idist.device()).attach(evaluator, "accuracy")
    Loss(loss_fn, device=idist.device()).attach(evaluator, "loss")
{% endif %}

    @trainer.on(Events.EPOCH_COMPLETED)
    def evaluate(engine: Engine) -> None:
        evaluator.run(eval_loader, epoch_length=config.eval_epoch_length)
        log_metrics(logger, engine.state.epoch, "eval", evaluator.state.metrics)

    setup_handlers(trainer, config)
{% if flags.save_best %}
    setup_best_models(evaluator, trainer, model, config, run_dir)
{% endif %}
{% if flags.early_stopping %}
    setup_early_stopping(evaluator, trainer, config)
{% endif %}
{% if cookiecutter.save_training %}
    to_save = {
        "model": model,
        "optimizer": optimizer,
        "trainer": trainer,
        "lr_scheduler": lr_scheduler,
        **backprop.state_objects(),
    }
    save_training = setup_checkpoints(trainer, to_save, config, run_dir)
    setup_clean_stop(trainer, config, run_dir, save_training)
{% else %}
    to_save = {"model": model}
    setup_clean_stop(trainer, config, run_dir)
{% endif %}
{% if cookiecutter.logger != "none" %}
    optimizers = {"optimizer": optimizer}
    tracker = setup_tracking(trainer, evaluator, optimizers, config, run_dir) if idist.get_rank() == 0 else None
{% endif %}

    checkpoint = outputs.checkpoint or config.resume_from
    if checkpoint:
        # The schedule follows this command's max_epochs: a run continued with a larger one trains longer.
        planned = {key: lr_scheduler.state_dict()[key] for key in ("milestones", "values")}
        resume_from(to_save, checkpoint, logger)
        lr_scheduler.load_state_dict({**lr_scheduler.state_dict(), **planned})

    epoch_length = config.train_epoch_length or len(train_loader)
    trainer.run(train_loader, max_epochs=config.max_epochs, epoch_length=epoch_length)
{% if cookiecutter.logger != "none" %}
    if tracker is not None:
        tracker.close()
{% endif %}
