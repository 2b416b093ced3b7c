"""A sweep's trial, in its training processes: each evaluation's score reported to the study, and the run ended at
the epoch the study's pruner prunes it, by every process (torchrun's, spawned, TPU replicas) at once."""

import json
import os

import ignite.distributed as idist
import optuna
from ignite.engine import Engine, Events

# Set by sweep.py for a trial's command: the study, the trial and the pruner's settings (JSON).
TRIAL_ENV = "IGNITE_SWEEP_TRIAL"
# The study's database URL: only ever in the environment (it may hold a password), never in a file a run writes.
STORAGE_ENV = "OPTUNA_STORAGE"


def make_pruner(pruning: bool, startup_trials: int, warmup_epochs: int) -> optuna.pruners.BasePruner:
    """Optuna's median pruner: a trial ends at an evaluation worse than the median of earlier trials' at that epoch,
    once ``startup_trials`` trials finished and after its first ``warmup_epochs`` evaluations."""
    if not pruning:
        return optuna.pruners.NopPruner()
    # Optuna's steps are the epochs: the first that can prune is n_warmup_steps.
    return optuna.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=warmup_epochs + 1)


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
            trial.report(value, epoch)
            if trial.should_prune():
                why = f"the sweep pruned it at epoch {epoch} ({name} {value:.4f}: worse than the median of its trials)"
        if idist.get_world_size() > 1:
            why = idist.broadcast(why, src=0)  # every process ends at this epoch
        if why:
            engine.logger.info("Pruned: %s", why)
            engine.state.pruned = why
            engine.terminate()
