"""Experiment tracking (the tracker: tracker.py): the config, training losses, learning rates and eval metrics, from
rank 0, every curve against the training iteration."""

from pathlib import Path
from typing import Any

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from ignite.handlers import global_step_from_engine

from machinery.settings import RunSettings
from machinery.training.tracker import open_tracker


def setup_tracking(
    trainer: Engine, evaluator: Engine | None, to_save: dict[str, Any], config: RunSettings, run_dir: Path
) -> None:
    """On rank 0, send the config, training losses, learning rates (of ``to_save``'s optimizers, by their names there)
    and eval metrics to the tracker; it closes as training ends.

    Every curve is plotted against the training iteration (losses and learning rates every ``log_every_iters``, eval
    metrics after each epoch), the run named after its directory. Not ignite's ``setup_*_logging``: they plot eval
    metrics against the epoch (except for W&B), and record neither the run's name nor its config.
    """
    if idist.get_rank() != 0:
        return
    tracker = open_tracker(trainer, config, run_dir)
    every = config.log_every_iters
    tracker.attach_output_handler(
        trainer, event_name=Events.ITERATION_COMPLETED(every=every), tag="train", metric_names="all"
    )
    optimizers = {name: obj for name, obj in to_save.items() if isinstance(obj, torch.optim.Optimizer)}
    for name, optimizer in optimizers.items():
        # At the iteration's start: the learning rate that iteration trains with.
        tracker.attach_opt_params_handler(
            trainer, event_name=Events.ITERATION_STARTED(every=every), optimizer=optimizer, tag=name
        )
    if evaluator is not None:
        # At the trainer's iteration too, not its epoch: W&B refuses a step below one already logged.
        tracker.attach_output_handler(
            evaluator,
            event_name=Events.COMPLETED,
            tag="eval",
            metric_names="all",
            global_step_transform=global_step_from_engine(trainer, Events.ITERATION_COMPLETED),
        )
    trainer.add_event_handler(Events.COMPLETED, lambda: tracker.close())
