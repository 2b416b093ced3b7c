"""A sweep's trial, in its training processes: each evaluation's score reported to the study, and the run ended at
the epoch the study's pruner prunes it, by every process (torchrun's, spawned, TPU replicas) at once."""

import json
import os

import ignite.distributed as idist
import optuna
from ignite.engine import Engine, Events

from machinery.runs.preemption import STOP
from machinery.sweeps.space import STORAGE_ENV, TRIAL_ENV, make_pruner


def setup_pruning(trainer: Engine, evaluator: Engine, score: str) -> None:
    """In a run that sweep.py started, report the eval metric ``score`` names after each evaluation, and end the run
    (``status.yaml``: pruned) where the study prunes the trial. Nothing in a run started otherwise."""
    sweep = os.environ.get(TRIAL_ENV)
    if sweep is None:
        return
    found = json.loads(sweep)
    name = score.removeprefix("-")
    trial = None
    if idist.get_rank() == 0:  # one connection to the study: rank 0 reports and decides
        pruner = make_pruner(found["pruning"], found["startup_trials"], found["warmup_epochs"])
        study = optuna.load_study(study_name=found["study"], storage=os.environ[STORAGE_ENV], pruner=pruner)
        trial = optuna.Trial(study, found["trial"])

    @trainer.on(Events.EPOCH_COMPLETED)
    def report(engine: Engine) -> None:
        why = ""
        if trial is not None:
            epoch, value = engine.state.epoch, evaluator.state.metrics[name]
            try:
                trial.report(value, epoch)
                if trial.should_prune():
                    why = f"the sweep pruned it at epoch {epoch} ({name} {value:.4f}: worse than the median)"
            except optuna.exceptions.UpdateFinishedTrialError:  # its worker was taken for dead (a late heartbeat)
                # Stop as on a signal, saved: the worker that took the trial over continues this run.
                STOP.reason = STOP.reason or "another sweep worker took this trial over"
        if idist.get_world_size() > 1:
            why = idist.broadcast(why, src=0)  # every process ends at this epoch
        if why:
            engine.logger.info("Pruned: %s", why)
            engine.state.pruned = why
            engine.terminate()
