{% import "flags.j2" as flags with context %}
"""The evaluation: the evaluator's engine, the metrics' log line{{ ", the score that ranks evaluations" if flags.ranked }}."""

import logging
from collections.abc import Callable
from typing import Any

import torch
from ignite.engine import Engine, Events
from torch import nn
{% if flags.xla %}

from machinery.xla import start_alike
{% endif %}


def evaluation_engine(eval_step: Callable[[Engine, Any], tuple[torch.Tensor, ...]], model: nn.Module) -> Engine:
    """The engine that runs ``eval_step`` on each batch, ``model`` in eval mode, without gradients.

    ``eval_step`` returns what the metrics score: the logits and the targets of its batch.{{ " On the TPU every
    batch has one shape (xla.device_loader pads the last one): the engine hands eval_step the batch alone,
    and its output gets a third tensor, which rows are real (the metrics count those only)." if flags.xla }}
    """

    @torch.no_grad()
{% if flags.xla %}
    def step(engine: Engine, padded: tuple[Any, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        batch, real_rows = padded
        logits, targets = eval_step(engine, batch)
        # Nothing is read from the device here: the mask stays on it.
        real = torch.arange(targets.shape[0], device=targets.device) < real_rows
        return logits, targets, real
{% else %}
    def step(engine: Engine, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return eval_step(engine, batch)
{% endif %}

    evaluator = Engine(step)

    @evaluator.on(Events.STARTED)
    def eval_mode() -> None:
        model.eval()  # the training step sets train mode again
{% if flags.xla %}
        # Each replica's BatchNorm statistics follow its own batches: all evaluate replica 0's model, as saved.
        start_alike(model, buffers_only=True)
{% endif %}

    return evaluator


def log_metrics(logger: logging.Logger, epoch: int, tag: str, metrics: dict[str, float]) -> None:
    """Log metrics on one line, e.g. ``Epoch 2 - eval: accuracy=0.5100 loss=1.2000``."""
    values = " ".join(f"{name}={value:.4f}" for name, value in metrics.items())
    logger.info("Epoch %d - %s: %s", epoch, tag, values)
{% if flags.ranked %}


def score_of(score: str) -> tuple[str, Callable[[Engine], float]]:
    """The name and function of the score that ranks evaluations, higher being better (as ignite ranks them):
    ``score`` (the config's) names an eval metric, after a "-" when lower is better (``-loss``: ``neg_loss``)."""
    name = score.removeprefix("-")
    sign = -1.0 if score.startswith("-") else 1.0

    def value(evaluator: Engine) -> float:
        metrics = evaluator.state.metrics
        if name not in metrics:
            raise ValueError(f"score: {score!r} names no eval metric; the evaluation gives {', '.join(metrics)}")
        return sign * metrics[name]

    return ("neg_" if sign < 0 else "") + name, value
{% endif %}
