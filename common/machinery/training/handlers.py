"""Handlers on the trainer: loss logging and progress, the NaN check, the timer, checkpoints, resuming."""

import logging
import os
import time
from pathlib import Path
from typing import Any

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from ignite.handlers import Checkpoint, DiskSaver, ParamScheduler, ProgressBar, TerminateOnNan, Timer

from machinery.runs.checkpoints import raise_if_disk_full, read_checkpoint, saved_training_checkpoints
from machinery.runs.preemption import STOP, asked_to_stop
from machinery.settings import RunSettings


def setup_handlers(trainer: Engine, config: RunSettings) -> None:
    """Attach loss logging, the progress bar and what the config asks for (the NaN check, the iteration timer, the first
    iteration's time when it compiles): the losses (one vector on the device) are read every ``log_every_iters``
    iterations in one transfer, for the NaN check too, where ignite's ``setup_common_training_handlers`` reads them
    every iteration (on a TPU each read waits for the device)."""
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
    if config.terminate_on_nan:
        terminate_on_nan = TerminateOnNan(lambda output: [trainer.state.metrics[name] for name in output.names])
        terminate_on_nan.logger = trainer.logger  # why training stopped goes to training.log too
        trainer.add_event_handler(every, terminate_on_nan)  # checks the values just read: no extra device read
    if config.timer:
        log_iteration_time(trainer)
    if config.compile:
        log_first_iteration(trainer)


def log_iteration_time(trainer: Engine) -> None:
    """Log the average time of this epoch's iterations (their steps, not the handlers between them) at its end."""
    timer = Timer(average=True)
    timer.attach(
        trainer,
        start=Events.EPOCH_STARTED,
        resume=Events.ITERATION_STARTED,
        pause=Events.ITERATION_COMPLETED,
        step=Events.ITERATION_COMPLETED,
    )

    @trainer.on(Events.EPOCH_COMPLETED)
    def log_time(engine: Engine) -> None:
        engine.logger.info("Epoch %d - %.4f s per iteration", engine.state.epoch, timer.value())


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


def setup_checkpoints(
    trainer: Engine, to_save: dict[str, Any], config: RunSettings, run_dir: Path
) -> Checkpoint | None:
    """Save the training state every ``save_every_iters`` iterations and after each epoch, so a run can continue; the
    handler, or None where ``config.save_training`` is off."""
    if not config.save_training:
        return None
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


def step_schedules(trainer: Engine, to_save: dict[str, Any]) -> list[ParamScheduler]:
    """Step each ``ParamScheduler`` of ``to_save`` at each iteration's start; return them (for resume_from)."""
    schedules = [obj for obj in to_save.values() if isinstance(obj, ParamScheduler)]
    for schedule in schedules:
        trainer.add_event_handler(Events.ITERATION_STARTED, schedule)
    return schedules


def resume_from(
    to_load: dict[str, Any],
    checkpoint_path: str | Path,
    logger: logging.Logger,
    schedules: list[ParamScheduler] | tuple = (),
) -> None:
    """Restore objects (model, optimizer, trainer state, ...) from a checkpoint file. ``schedules`` keep the plan this
    command made (its max_epochs: a run continued with a larger one trains longer), their step restored."""
    planned = [{key: schedule.state_dict()[key] for key in ("milestones", "values")} for schedule in schedules]
    path = Path(checkpoint_path)
    if not path.is_file():
        raise FileNotFoundError(f"resume_from: no checkpoint file at {path}")
    checkpoint = read_checkpoint(path)  # tensors and plain values only: no code that loading it would run
    if isinstance(checkpoint.get("trainer"), dict) and "rng_states" in checkpoint["trainer"]:
        # A deterministic run's: xm.save (TPU) rebuilds tuples as lists, Python's random state included.
        version, internal, gauss = checkpoint["trainer"]["rng_states"][0]
        checkpoint["trainer"]["rng_states"][0] = (version, tuple(internal), gauss)
    lacking = [name for name in to_load if name not in checkpoint] if "trainer" in checkpoint else []
    if lacking:  # a training checkpoint of another config (one without float16's scaler, or the weights' average)
        raise SystemExit(
            f"{path} holds no {', '.join(lacking)}, which this run trains with (main.py's to_save and the config's "
            "mixed_precision and ema_momentum): continue it with the config it was saved with"
        )
    if isinstance(checkpoint.get("trainer"), dict) and isinstance(to_load.get("trainer"), Engine):
        # State that handlers keep in the trainer (early stopping's count, ...), lacking from older checkpoints.
        trainer = to_load["trainer"]
        for key in trainer.state_dict_user_keys:
            checkpoint["trainer"].setdefault(key, getattr(trainer.state, key))
    Checkpoint.load_objects(to_load=to_load, checkpoint=checkpoint)
    for schedule, plan in zip(schedules, planned, strict=True):
        schedule.load_state_dict({**schedule.state_dict(), **plan})
    logger.info("Resumed from %s", path)
