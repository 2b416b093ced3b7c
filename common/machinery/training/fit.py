{% import "flags.j2" as flags with context %}
"""The run around the engines: {{ "evaluation, " if flags.eval_metric }}loss logging, checkpoints, stopping rules, tracking, continuing."""

from collections.abc import Callable, Sequence
from typing import Any

{% if cookiecutter.logger != "none" %}
import ignite.distributed as idist
{% endif %}
{% if not cookiecutter.save_training or cookiecutter.logger != "none" %}
import torch
{% endif %}
from ignite.engine import Engine, Events
from ignite.handlers import ParamScheduler

from machinery.runs.preemption import setup_clean_stop
from machinery.runs.start import Run
from machinery.settings import RunSettings
{% if flags.sweep %}
from machinery.sweeps.pruning import setup_pruning
{% endif %}
{% if flags.xla %}
from machinery.tpu.counters import setup_xla_metrics
from machinery.tpu.replicas import follow_launcher
{% endif %}
{% if flags.ema %}
from machinery.training.ema import setup_ema
{% endif %}
from machinery.training.engine import shuffle_each_pass
{% if flags.eval_metric %}
from machinery.training.evaluation import log_metrics
{% endif %}
from machinery.training.handlers import (
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
{% if cookiecutter.logger != "none" %}
from machinery.training.tracking import setup_tracking
{% endif %}


def fit(
    config: RunSettings,
    this_run: Run,
    trainer: Engine,
    train_loader: Any,
    to_save: dict[str, Any],
{% if flags.eval_metric %}
    evaluator: Engine,
    eval_loader: Any,
{% endif %}
    handlers: Sequence[Callable[[Engine], None]] = (),
) -> None:
    """Train for ``max_epochs``{{ ", evaluating after each epoch" if flags.eval_metric }}: the same command continues a stopped run.
    ``to_save``: what a training checkpoint keeps besides the trainer (models, optimizers, a ``ParamScheduler``,
    stepped at each iteration's start). ``handlers``: functions that attach more handlers to the trainer (pictures,
    plots), after {{ "the evaluation and " if flags.eval_metric }}the loss reading."""
    run_dir, logger, checkpoint = this_run
    trainer.logger = logger
    shuffle_each_pass(trainer, train_loader)
    schedules = [obj for obj in to_save.values() if isinstance(obj, ParamScheduler)]
    for schedule in schedules:
        trainer.add_event_handler(Events.ITERATION_STARTED, schedule)
{% if flags.xla %}
    setup_xla_metrics(trainer, run_dir, logger)
{% endif %}
{% if flags.eval_metric %}

    @trainer.on(Events.EPOCH_COMPLETED)
    def evaluate(engine: Engine) -> None:
        evaluator.run(eval_loader, epoch_length=config.eval_epoch_length)
        log_metrics(logger, engine.state.epoch, "eval", evaluator.state.metrics)

{% endif %}
{% if flags.sweep %}
    setup_pruning(trainer, evaluator, config.score)  # in a sweep's trial (sweep.py): scores reported, pruned runs end
{% endif %}
    setup_handlers(trainer, config)
    for attach in handlers:
        attach(trainer)
{% if flags.save_best %}
    setup_best_models(evaluator, trainer, to_save["model"], config, run_dir)
{% endif %}
{% if flags.early_stopping %}
    setup_early_stopping(evaluator, trainer, config)
{% endif %}
{% if flags.ema %}
    # The weights' average, updated before a checkpoint saves it; evaluated, and saved as the best models (ema.py).
    ema_model, swap_back = setup_ema(trainer, evaluator, to_save["model"], config.ema_momentum)
    evaluator.add_event_handler(Events.COMPLETED, swap_back)
    to_save = {**to_save, "ema_model": ema_model}
{% endif %}
    to_save = {**to_save, "trainer": trainer}
{% if cookiecutter.save_training %}
    save_training = setup_checkpoints(trainer, to_save, config, run_dir)
    setup_clean_stop(trainer, config, run_dir, save_training)
    to_load = to_save
{% else %}
    setup_clean_stop(trainer, config, run_dir)
    # No training checkpoints: resume_from holds a model's weights (a best model, say), which are what it loads.
    to_load = {name: obj for name, obj in to_save.items() if isinstance(obj, torch.nn.Module)}
{% endif %}
{% if flags.xla %}
    # The replicas stop when their launcher is asked to, which stops at once if nothing is unsaved.
    follow_launcher(trainer, run_dir{{ ", save_training" if cookiecutter.save_training }})
{% endif %}
{% if cookiecutter.logger != "none" %}
    optimizers = {name: obj for name, obj in to_save.items() if isinstance(obj, torch.optim.Optimizer)}
    tracker = None
    if idist.get_rank() == 0:
        tracker = setup_tracking(trainer, {{ "evaluator, " if flags.eval_metric }}optimizers, config, run_dir)
{% endif %}

    checkpoint = checkpoint or config.resume_from  # a continued run's newest checkpoint first (preemption.py)
    if checkpoint:
        # A schedule follows this command's max_epochs: a run continued with a larger one trains longer.
        planned = [{key: schedule.state_dict()[key] for key in ("milestones", "values")} for schedule in schedules]
        resume_from(to_load, checkpoint, logger)
        for schedule, plan in zip(schedules, planned, strict=True):
            schedule.load_state_dict({**schedule.state_dict(), **plan})

    epoch_length = config.train_epoch_length or len(train_loader)
    trainer.run(train_loader, max_epochs=config.max_epochs, epoch_length=epoch_length)
{% if cookiecutter.logger != "none" %}
    if tracker is not None:
        tracker.close()
{% endif %}
