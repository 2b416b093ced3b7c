{% import "flags.j2" as flags with context %}
"""The evaluation: the evaluator's engine and its metrics, the metrics' log line{{ ", the score that ranks evaluations" if flags.ranked }}."""

import logging
from collections.abc import Callable, Iterable
from typing import Any

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from ignite.metrics import Metric, MetricsLambda
from torch import nn
{% if flags.xla %}

from machinery.tpu.metrics import read_once
from machinery.tpu.xla import start_alike
{% endif %}


def evaluation_engine(
    eval_step: Callable[[Engine, Any], tuple[torch.Tensor, ...]], model: nn.Module, metrics: dict[str, Metric]
) -> Engine:
    """The engine that runs ``eval_step`` (``model`` in eval mode, no gradients), its outputs scored by ``metrics``.{{ "
    On a TPU every batch has one shape (device_loaders.device_loader pads the last one): eval_step gets the batch
    alone, and the metrics score its real rows." if flags.xla }}"""

{% if flags.xla %}
    @torch.no_grad()
    def step_on_real_rows(engine: Engine, padded: tuple[Any, int]) -> tuple[torch.Tensor, ...]:
        batch, real_rows = padded
        outputs = eval_step(engine, batch)
        # Padding rows cut by a host-known slice: a short last batch's metrics are one more program (compiled at the
        # first evaluation); the model ran on the padded batch, in the one program.
        return outputs if real_rows == len(outputs[0]) else tuple(output[:real_rows] for output in outputs)

    evaluator = Engine(step_on_real_rows)
{% else %}
    evaluator = Engine(torch.no_grad()(eval_step))
{% endif %}

    @evaluator.on(Events.STARTED)
    def eval_mode() -> None:
        model.eval()  # the training step sets train mode again
{% if flags.xla %}
        # Each replica's BatchNorm statistics follow its own batches: all evaluate replica 0's model, as saved.
        start_alike(model, buffers_only=True)
{% endif %}

    # Metric states on the run's device (metrics.py names none): on ignite's default, the CPU, each batch would wait
    # for the accelerator{{ ";
    # and ignite refuses to make metrics on a TPU" if flags.xla }}.
    updated = metrics_used(metrics.values())
    for metric in updated:
        metric._device = idist.device()
        metric.reset()
{% if flags.xla %}
    read_once(evaluator, updated)  # before the metrics' own handlers: they compute from what it read
{% endif %}
    for name, metric in metrics.items():
        metric.attach(evaluator, name)
    return evaluator


def metrics_used(metrics: Iterable[Metric]) -> list[Metric]:
    """The metrics the evaluation updates: the given ones and, through ignite's MetricsLambda, those they use."""
    found: list[Metric] = []
    pending = list(metrics)
    while pending:
        metric = pending.pop(0)
        if not any(metric is seen for seen in found):
            found.append(metric)
            if isinstance(metric, MetricsLambda):
                pending += [arg for arg in (*metric.args, *metric.kwargs.values()) if isinstance(arg, Metric)]
    return found


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
