"""The evaluation: the evaluator's engine and its metrics, run after each epoch; the score that ranks evaluations, and
what it ranks (the best models, early stopping); the average of the weights that the evaluations score (ema.py)."""

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from ignite.handlers import Checkpoint, EarlyStopping, global_step_from_engine
from ignite.metrics import Metric, MetricsLambda
from torch import nn

from machinery.settings import RunSettings
from machinery.training.ema import setup_ema
from machinery.training.handlers import SaveThenRemove, count_saved_files


def evaluation_engine(
    eval_step: Callable[[Engine, Any], tuple[torch.Tensor, ...]], model: nn.Module, metrics: dict[str, Metric]
) -> Engine:
    """The engine that runs ``eval_step`` (``model`` in eval mode, no gradients), its outputs scored by ``metrics``.
    On a TPU every batch has one shape (device_loaders.device_loader pads the last one): eval_step gets the batch
    alone, the metrics score its real rows, and their state is read once per evaluation (tpu/metrics.py)."""
    on_tpu = idist.device().type == "xla"
    if on_tpu:
        from machinery.tpu.metrics import read_once, step_on_real_rows  # torch_xla: a TPU project's
        from machinery.tpu.xla import start_alike

        eval_step = step_on_real_rows(eval_step)
    evaluator = Engine(torch.no_grad()(eval_step))

    @evaluator.on(Events.STARTED)
    def eval_mode() -> None:
        model.eval()  # the training step sets train mode again
        if on_tpu:
            # Each replica's BatchNorm statistics follow its own batches: all evaluate replica 0's model, as saved.
            start_alike(model, buffers_only=True)

    # Metric states on the run's device (metrics.py names none): on ignite's default, the CPU, each batch would wait
    # for the accelerator; and ignite refuses to make metrics on a TPU.
    updated = metrics_used(metrics.values())
    for metric in updated:
        metric._device = idist.device()
        metric.reset()
    if on_tpu:
        read_once(evaluator, updated)  # before the metrics' own handlers: they compute from what it read
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


def setup_evaluation(
    trainer: Engine, evaluator: Engine, eval_loader: Any, to_save: dict[str, Any], config: RunSettings, run_dir: Path
) -> dict[str, Any]:
    """Evaluate after each epoch (``eval_epoch_length`` batches), and attach what ranks the evaluations by ``score``:
    the best models (``save_best_model``), early stopping (``patience``), and the average of the weights that they
    score (``ema_momentum``). Returns ``to_save`` with the average, which every training checkpoint keeps."""

    @trainer.on(Events.EPOCH_COMPLETED)
    def evaluate(engine: Engine) -> None:
        evaluator.run(eval_loader, epoch_length=config.eval_epoch_length)
        log_metrics(engine.logger, engine.state.epoch, "eval", evaluator.state.metrics)

    if config.save_best_model:
        setup_best_models(evaluator, trainer, to_save["model"], config, run_dir)
    if config.patience is not None:
        setup_early_stopping(evaluator, trainer, config)
    if config.ema_momentum is None:
        return to_save
    # The weights' average, updated before a checkpoint saves it; evaluated, and saved as the best models (ema.py).
    ema_model, swap_back = setup_ema(trainer, evaluator, to_save["model"], config.ema_momentum)
    evaluator.add_event_handler(Events.COMPLETED, swap_back)  # after the best models' saving
    return {**to_save, "ema_model": ema_model}


def log_metrics(logger: logging.Logger, epoch: int, tag: str, metrics: dict[str, float]) -> None:
    """Log metrics on one line, e.g. ``Epoch 2 - eval: accuracy=0.5100 loss=1.2000``."""
    values = " ".join(f"{name}={value:.4f}" for name, value in metrics.items())
    logger.info("Epoch %d - %s: %s", epoch, tag, values)


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


def setup_best_models(
    evaluator: Engine, trainer: Engine, model: torch.nn.Module, config: RunSettings, run_dir: Path
) -> None:
    """Keep the model of the ``n_saved`` best evaluations by ``config.score``, named after the epoch and the score."""
    name, score = score_of(config.score)
    save_best = Checkpoint(
        {"model": model},
        SaveThenRemove(run_dir, require_empty=False),
        filename_prefix="best",
        score_function=score,
        score_name=name,
        n_saved=config.n_saved,
        global_step_transform=global_step_from_engine(trainer),
    )
    best = [(float(path.stem.rsplit("=", 1)[1]), path) for path in run_dir.glob(f"best_model_*_{name}=*.pt")]
    count_saved_files(save_best, best)  # a continued run's best models (score in the name) compete with its next ones
    evaluator.add_event_handler(Events.COMPLETED, save_best)


def setup_early_stopping(evaluator: Engine, trainer: Engine, config: RunSettings) -> None:
    """Stop training when ``config.score`` has not improved for ``patience`` evaluations."""
    stopper = EarlyStopping(config.patience, score_function=score_of(config.score)[1], trainer=trainer)
    stopper.logger = trainer.logger
    evaluator.add_event_handler(Events.COMPLETED, stopper)
    # Its count goes in the trainer's state (and checkpoints): a continued run stops when the uninterrupted one would.
    trainer.state.early_stopping = stopper.state_dict()
    trainer.state_dict_user_keys.append("early_stopping")

    @evaluator.on(Events.COMPLETED)
    def keep_count(_: Engine) -> None:
        trainer.state.early_stopping = stopper.state_dict()

    @trainer.on(Events.STARTED)
    def restore_count(engine: Engine) -> None:
        stopper.load_state_dict(engine.state.early_stopping)
