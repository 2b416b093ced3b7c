{% import "flags.j2" as flags with context %}
"""The run around the engines: evaluation, loss logging, checkpoints, stopping rules, tracking, continuing: each
behaviour switched by its config key (config.yaml, the command line), attached here once."""

from collections.abc import Callable, Sequence
from typing import Any

from ignite.engine import Engine
from torch import nn

from machinery.runs.preemption import setup_clean_stop
from machinery.runs.start import Run
from machinery.settings import RunSettings
{% if flags.sweep %}
from machinery.sweeps.pruning import setup_pruning
{% endif %}
from machinery.training.engine import shuffle_each_pass
from machinery.training.handlers import resume_from, setup_checkpoints, setup_handlers, step_schedules
{% if cookiecutter.logger != "none" %}
from machinery.training.tracking import setup_tracking
{% endif %}


def fit(
    config: RunSettings,
    this_run: Run,
    trainer: Engine,
    train_loader: Any,
    to_save: dict[str, Any],
    evaluator: Engine | None = None,
    eval_loader: Any = None,
    handlers: Sequence[Callable[[Engine], None]] = (),
) -> None:
    """Train for ``max_epochs``, evaluating after each epoch with ``evaluator``, if given: the same command continues a
    stopped run. ``to_save``: what a training checkpoint keeps besides the trainer (models, optimizers, a
    ``ParamScheduler``, stepped at each iteration's start). ``handlers``: functions that attach more handlers to the
    trainer (pictures, plots), after the evaluation and the loss reading."""
    run_dir, logger, checkpoint = this_run
    trainer.logger = logger
    on_tpu = config.backend == "xla-tpu"
    shuffle_each_pass(trainer, train_loader)
    schedules = step_schedules(trainer, to_save)
    if on_tpu:
        from machinery.tpu.counters import setup_xla_metrics  # torch_xla: a TPU project's

        setup_xla_metrics(trainer, run_dir, logger)
    if evaluator is not None:
        from machinery.training.evaluation import setup_evaluation  # a project that evaluates (not the GAN's)

        # After each epoch; the best models, early stopping and the average of the weights, as the config asks.
        to_save = setup_evaluation(trainer, evaluator, eval_loader, to_save, config, run_dir)
{% if flags.sweep %}
        setup_pruning(trainer, evaluator, config.score)  # a sweep's trial (sweep.py): scores reported, pruned runs end
{% endif %}
    setup_handlers(trainer, config)  # the losses read and logged, the NaN check, the timer
    for attach in handlers:
        attach(trainer)
    to_save = {**to_save, "trainer": trainer}
    save_training = setup_checkpoints(trainer, to_save, config, run_dir)  # None where save_training is off
    setup_clean_stop(trainer, config, run_dir, save_training)
    if on_tpu:
        from machinery.tpu.replicas import follow_launcher

        # The replicas stop when their launcher is asked to, which stops at once if nothing is unsaved.
        follow_launcher(trainer, run_dir, save_training)
{% if cookiecutter.logger != "none" %}
    setup_tracking(trainer, evaluator, to_save, config, run_dir)  # rank 0's, closed as training ends
{% endif %}

    checkpoint = checkpoint or config.resume_from  # a continued run's newest checkpoint first (preemption.py)
    if checkpoint:
        # Without training checkpoints, resume_from holds a model's weights (a best model, say): what it loads.
        models = {name: obj for name, obj in to_save.items() if isinstance(obj, nn.Module)}
        resume_from(to_save if config.save_training else models, checkpoint, logger, schedules)
    epoch_length = config.train_epoch_length or len(train_loader)
    trainer.run(train_loader, max_epochs=config.max_epochs, epoch_length=epoch_length)
