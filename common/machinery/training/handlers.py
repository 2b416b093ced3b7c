{% import "flags.j2" as flags with context %}
"""Handlers on the engines: loss logging and progress, checkpoints, stopping rules, resuming."""

import logging
import os
import time
from pathlib import Path
from typing import Any

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from ignite.handlers import (
    Checkpoint,
{% if flags.save_checkpoints %}
    DiskSaver,
{% endif %}
{% if flags.early_stopping %}
    EarlyStopping,
{% endif %}
    ProgressBar,
{% if cookiecutter.terminate_on_nan %}
    TerminateOnNan,
{% endif %}
{% if cookiecutter.timer %}
    Timer,
{% endif %}
{% if flags.save_best %}
    global_step_from_engine,
{% endif %}
)

{% if cookiecutter.save_training %}
from machinery.runs.checkpoints import raise_if_disk_full, read_checkpoint, saved_training_checkpoints
{% elif flags.save_checkpoints %}
from machinery.runs.checkpoints import raise_if_disk_full, read_checkpoint
{% else %}
from machinery.runs.checkpoints import read_checkpoint
{% endif %}
from machinery.runs.preemption import STOP, asked_to_stop
from machinery.settings import RunSettings
{% if flags.ranked %}
from machinery.training.evaluation import score_of
{% endif %}


def setup_handlers(trainer: Engine, config: RunSettings) -> None:
    """Attach loss logging, the progress bar{{ ", the NaN check" if cookiecutter.terminate_on_nan }}{{ ", the iteration timer" if cookiecutter.timer }}: the losses (one vector
    on the device) are read every ``log_every_iters`` iterations in one transfer{{ ", for the NaN check too" if cookiecutter.terminate_on_nan }}, where ignite's
    ``setup_common_training_handlers`` reads them every iteration (on a TPU each read waits for the device)."""
    every = Events.ITERATION_COMPLETED(every=config.log_every_iters)
    world_size = idist.get_world_size()

    @trainer.on(every)
    def read_losses(engine: Engine) -> None:
        output = engine.state.output
        if world_size == 1:
            read = output.values.tolist()
        else:
            # One collective: the mean losses (a NaN on one process stops all together), the stop votes (preemption.py).
            vote = torch.tensor([float(asked_to_stop())], device=output.values.device)
            *sums, votes = idist.all_reduce(torch.cat([output.values, vote])).tolist()
            STOP.agreed = votes > 0
            read = [value / world_size for value in sums]
        values = dict(zip(output.names, read, strict=True))
        engine.state.metrics.update(values)
        losses = " ".join(f"{name}={value:.4f}" for name, value in values.items())
        engine.logger.info("Epoch %d - iteration %d: %s", engine.state.epoch, engine.state.iteration, losses)

    if idist.get_rank() == 0:
        # The losses last read (no device read), redrawn every TQDM_MININTERVAL s (0.1) at most: ignite's bar redraws
        # each iteration, 10% of a fast step.
        pace, drawn = float(os.environ.get("TQDM_MININTERVAL", 0.1)), [0.0]

        def redraw_due(_engine: Engine, _iteration: int) -> bool:
            due = time.monotonic() - drawn[0] >= pace
            drawn[0] = time.monotonic() if due else drawn[0]
            return due

        redraws = Events.ITERATION_COMPLETED(event_filter=redraw_due)
        ProgressBar(persist=True).attach(trainer, metric_names="all", event_name=redraws)
{% if cookiecutter.terminate_on_nan %}
    terminate_on_nan = TerminateOnNan(lambda output: [trainer.state.metrics[name] for name in output.names])
    terminate_on_nan.logger = trainer.logger  # why training stopped goes to training.log too
    trainer.add_event_handler(every, terminate_on_nan)  # checks the values just read: no extra device read
{% endif %}
{% if cookiecutter.timer %}
    timer = Timer(average=True)
    timer.attach(trainer, step=Events.ITERATION_COMPLETED)

    @trainer.on(Events.EPOCH_COMPLETED)
    def log_iteration_time(engine: Engine) -> None:
        engine.logger.info("Epoch %d - %.4f s per iteration", engine.state.epoch, timer.value())
{% endif %}
{% if flags.compiled %}

    if config.compile:
        log_first_iteration(trainer)


def log_first_iteration(trainer: Engine) -> None:
    """Log how long this command's first iteration took: torch.compile compiles the models in it."""
    started = []

    def start(_engine: Engine) -> None:
        started.append(time.monotonic())
        trainer.remove_event_handler(start, Events.ITERATION_STARTED)

    def log(engine: Engine) -> None:
        took = time.monotonic() - started[0]
        engine.logger.info("The first iteration took %.1f s: torch.compile compiled the model in it", took)
        trainer.remove_event_handler(log, Events.ITERATION_COMPLETED)

    trainer.add_event_handler(Events.ITERATION_STARTED, start)
    trainer.add_event_handler(Events.ITERATION_COMPLETED, log)
{% endif %}
{% if cookiecutter.save_training %}


def setup_checkpoints(trainer: Engine, to_save: dict[str, Any], config: RunSettings, run_dir: Path) -> Checkpoint:
    """Save the training state every ``save_every_iters`` iterations and after each epoch, so a run can continue."""
    save_training = Checkpoint(
        to_save,
        SaveThenRemove(run_dir, require_empty=False),
        filename_prefix=config.filename_prefix,
        n_saved=config.n_saved,
    )
    count_saved_files(save_training, saved_training_checkpoints(run_dir, config.filename_prefix))
    # The epoch's last iteration saves after the epoch's handlers (evaluation, best models, early stopping) ran.
    mid_epoch = Events.ITERATION_COMPLETED(
        event_filter=lambda engine, it: it % config.save_every_iters == 0 and it % engine.state.epoch_length != 0
    )
    trainer.add_event_handler(mid_epoch | Events.EPOCH_COMPLETED, save_training)
    return save_training
{% endif %}
{% if flags.save_checkpoints %}


class SaveThenRemove(DiskSaver):
    """DiskSaver that removes a file ignite's Checkpoint drops only once the next one is complete: Checkpoint removes
    first, so a run killed in between would keep ``n_saved - 1`` (none with ``n_saved: 1``). Rank 0 alone saves: on
    TPU, ignite 0.5.5's DiskSaver has each replica rename its file (empty but replica 0's) onto it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dropped: list[str] = []

    def remove(self, filename: str) -> None:
        self.dropped.append(filename)

    def __call__(self, checkpoint: Any, filename: str, metadata: Any = None) -> None:
        if idist.get_rank() != self.save_on_rank:
            return
        try:
            super().__call__(checkpoint, filename, metadata)
        except Exception as error:
            raise_if_disk_full(checkpoint, self.dirname / filename, error)
            raise
        for dropped in self.dropped:
            if dropped != filename:  # rewritten in place
                super().remove(dropped)
        self.dropped.clear()


def count_saved_files(handler: Checkpoint, saved: list[tuple[float, Path]]) -> None:
    """Give a checkpoint handler the files it saved before (priority, path): it keeps ``n_saved`` of them all."""
    handler.load_state_dict({"_saved": [(priority, path.name) for priority, path in sorted(saved)]})
{% endif %}
{% if flags.save_best %}


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
{% endif %}
{% if flags.early_stopping %}


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
{% endif %}


def resume_from(to_load: dict[str, Any], checkpoint_path: str | Path, logger: logging.Logger) -> None:
    """Restore objects (model, optimizer, trainer state, ...) from a checkpoint file."""
    path = Path(checkpoint_path)
    if not path.is_file():
        raise FileNotFoundError(f"resume_from: no checkpoint file at {path}")
    checkpoint = read_checkpoint(path)  # tensors and plain values only: no code that loading it would run
{% if cookiecutter.deterministic %}
    if isinstance(checkpoint.get("trainer"), dict) and "rng_states" in checkpoint["trainer"]:
        # xm.save (TPU) rebuilds tuples as lists, Python's random state included.
        version, internal, gauss = checkpoint["trainer"]["rng_states"][0]
        checkpoint["trainer"]["rng_states"][0] = (version, tuple(internal), gauss)
{% endif %}
    if isinstance(checkpoint.get("trainer"), dict) and isinstance(to_load.get("trainer"), Engine):
        # State that handlers keep in the trainer (early stopping's count, ...), lacking from older checkpoints.
        trainer = to_load["trainer"]
        for key in trainer.state_dict_user_keys:
            checkpoint["trainer"].setdefault(key, getattr(trainer.state, key))
    Checkpoint.load_objects(to_load=to_load, checkpoint=checkpoint)
    logger.info("Resumed from %s", path)
