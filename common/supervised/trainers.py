{% import "flags.j2" as flags with context %}
"""The engines: a training step per batch (an optimizer step every ``accumulation_steps``), an evaluation after
each epoch, and the handlers."""

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from types import SimpleNamespace
from typing import Any

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from ignite.handlers import PiecewiseLinear
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
from metrics import attach_metrics
from preemption import setup_clean_stop
{% if cookiecutter.logger != "none" %}
from tracking import setup_tracking
{% endif %}
from utils import RunOutputs, log_metrics
{% if flags.xla %}
from xla import setup_xla_metrics, start_alike
{% endif %}


def setup_trainer(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: nn.Module,
    backprop: Backprop,
    train_loader: Any,
    accumulation_steps: int,
) -> Engine:
    """Build the engine that runs a training step per batch and an optimizer step every ``accumulation_steps``."""
    device = idist.device()

    def train_step(engine: Engine, batch: Batch) -> dict[str, torch.Tensor]:
        model.train()
        inputs, targets = prepare_batch(batch, device)
        with backprop.autocast():
            loss = loss_fn(model(*inputs), targets)
        # The batches' gradients add up until the optimizer steps: as one batch accumulation_steps times
        # larger, each loss scaled to their mean. A Python test of the iteration, not of a tensor: on a
        # TPU, the steps with and without the optimizer step are two compiled programs, each reused.
        backprop.backward(loss / accumulation_steps)
        if engine.state.iteration % accumulation_steps == 0:
            backprop.step(optimizer)
            backprop.update()
            # After the step: a checkpoint saved here holds no gradients (see AccumulatedGradients).
            optimizer.zero_grad()
        # Return the loss as a tensor: reading it (`.item()`) would wait for the device every step.
        return {"train_loss": loss.detach()}

    return training_engine(train_step, train_loader)


class AccumulatedGradients:
    """The gradients added up towards the next optimizer step, as part of the training state.

    A run stopped between two optimizer steps (``accumulation_steps`` > 1) continues with the gradients it
    had. None are left after an optimizer step, so a checkpoint saved there holds nothing more. On several
    TPU replicas each holds its own until the step sums them: a checkpoint keeps replica 0's.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {name: p.grad for name, p in self.model.named_parameters() if p.grad is not None}

    def load_state_dict(self, gradients: dict[str, torch.Tensor]) -> None:
        for name, parameter in self.model.named_parameters():
            grad = gradients.get(name)
            parameter.grad = None if grad is None else grad.to(parameter.device)


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
{% if flags.segmentation %}
            # torchvision's segmentation models return a dict: the main head's logits per pixel are "out".
            logits = model(*inputs)["out"]
{% else %}
            logits = model(*inputs)
{% endif %}
{% if flags.xla %}
        # Which rows are the batch's own, not padding: the metrics count those only. Nothing is read here.
        real = torch.arange(targets.shape[0], device=device) < real_rows
        return logits.float(), targets, real
{% else %}
        return logits.float(), targets
{% endif %}

{% if flags.xla %}
    evaluator = Engine(eval_step)
    # Each replica's BatchNorm statistics follow its own batches: all evaluate replica 0's model, as saved.
    evaluator.add_event_handler(Events.STARTED, lambda _: start_alike(model, buffers_only=True))
    return evaluator
{% else %}
    return Engine(eval_step)
{% endif %}


def train_and_evaluate(
    config: SimpleNamespace,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: nn.Module,
    lr_scheduler: PiecewiseLinear,
    train_loader: Any,
    eval_loader: Any,
    outputs: RunOutputs,
    epoch_handlers: Sequence[Callable[[Engine], None]] = (),
) -> None:
    """Train for ``max_epochs``, evaluating after each epoch: metrics, checkpoints, tracking, resuming.

    ``epoch_handlers`` run after each epoch's evaluation (e.g. pictures of the predictions).
    """
    run_dir, logger, _ = outputs
{% if cookiecutter.mixed_precision %}
    backprop = Backprop(config.use_amp)
{% else %}
    backprop = Backprop()
{% endif %}
    trainer = setup_trainer(model, optimizer, loss_fn, backprop, train_loader, config.accumulation_steps)
    trainer.logger = logger
    # At the iteration's start, so that each iteration trains with the scheduled learning rate.
    trainer.add_event_handler(Events.ITERATION_STARTED, lr_scheduler)
{% if flags.xla %}
    setup_xla_metrics(trainer, run_dir, logger)
{% endif %}
    evaluator = setup_evaluator(model, backprop.autocast)
    attach_metrics(evaluator, loss_fn)

    @trainer.on(Events.EPOCH_COMPLETED)
    def evaluate(engine: Engine) -> None:
        evaluator.run(eval_loader, epoch_length=config.eval_epoch_length)
        log_metrics(logger, engine.state.epoch, "eval", evaluator.state.metrics)

    for handler in epoch_handlers:
        trainer.add_event_handler(Events.EPOCH_COMPLETED, handler)

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
        "gradients": AccumulatedGradients(model),
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
