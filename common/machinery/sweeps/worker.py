"""A sweep's worker: it trains the study's trials till exactly ``n_trials`` have finished (completed or pruned), however
many workers share the study. Each trial runs the training command in a process of its own, on its own copy of the
config. A worker stopped (SIGTERM, Ctrl-C) or killed (kill -9: its heartbeat ends) leaves its trial to the next
worker, which continues that trial's run from its newest checkpoint, with the same values."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import RetryHeartbeatStaleTrialCallback, fail_stale_trials
from optuna.trial import TrialState

from machinery.runs.directory import STATUS_FILE
from machinery.runs.files import Unusable, hold, read_run_file, release_run_dir, write_whole
from machinery.sweeps.pruning import STORAGE_ENV, TRIAL_ENV
from machinery.sweeps.space import SweepSettings, suggest, trial_config

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
RETRIES = 3  # times a trial's run is continued after a stop or a failure; then the trial stays failed
# A stop signal's exit status (128 + its number): the trial's run stopped cleanly, to be continued.
STOPPED = {128 + signal.SIGTERM, 128 + signal.SIGINT}


class Interrupted(Exception):
    """The trial's run stopped (a stop signal) or failed: the worker ends with ``status``, the trial continued later."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Surplus(Exception):
    """The study's finished and running trials make ``n_trials`` already: this one ends before it trains."""


def work(study: optuna.Study, settings: SweepSettings, text: str, study_dir: Path, url: str) -> int:
    """Train trials till the study has ``n_trials`` finished ones; the exit status (128 + a stop signal's number)."""
    stops = _Stops()
    waiting_for: list[int] = []
    while stops.signum is None:
        fail_stale_trials(study)  # a dead worker's trial: failed, and enqueued again with its values
        trials = study.get_trials(deepcopy=False)
        finished = sum(trial.state in FINISHED for trial in trials)
        running = [trial.number for trial in trials if trial.state == TrialState.RUNNING]
        if finished >= settings.n_trials:
            print(f"The study {settings.study} has its {finished} finished trials.", flush=True)
            return 0
        if finished + len(running) >= settings.n_trials and not any(t.state == TrialState.WAITING for t in trials):
            if running != waiting_for:  # the last trials are other workers': one of them may have died
                print(f"Waiting for trials {running} (other workers)...", flush=True)
                waiting_for = running
            time.sleep(settings.heartbeat_interval)
            continue
        try:
            train = partial(_train, settings=settings, text=text, study_dir=study_dir, url=url, stops=stops)
            study.optimize(train, n_trials=1, catch=Surplus)
        except Interrupted as stop:
            print(stop, flush=True)
            return stop.status
    return 128 + stops.signum


class _Stops:
    """This worker's stop signals, each passed on to the trial's command (a second one, a second later, aborts it)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.trial: subprocess.Popen | None = None
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.stop)

    def stop(self, signum: int, _frame: Any) -> None:
        self.signum = signum
        if self.trial is not None and self.trial.poll() is None:
            self.trial.send_signal(signum)  # the same request as one from the terminal or scheduler: it stops once


def _train(trial: optuna.Trial, settings: SweepSettings, text: str, study_dir: Path, url: str, stops: _Stops) -> float:
    """One trial: its values, its config, its run (continued where a stopped trial of the same values left it)."""
    study = trial.study
    frozen = study.get_trials(deepcopy=False)[trial.number]
    trials = study.get_trials(deepcopy=False)
    ahead = [t for t in trials if t.state in FINISHED or (t.state == TrialState.RUNNING and t.number < trial.number)]
    if len(ahead) >= settings.n_trials:  # another worker started the last trial first
        trial.set_user_attr("surplus", True)
        raise Surplus
    values = suggest(trial, settings.space)
    first = RetryHeartbeatStaleTrialCallback.retried_trial_number(frozen)
    run_name = f"trial-{trial.number if first is None else first:04d}"  # a continued trial keeps its run
    trial.set_user_attr("run", run_name)
    trial_dir = study_dir / run_name
    trial_dir.mkdir(parents=True, exist_ok=True)
    write_whole(trial_dir / "config.yaml", trial_config(text, {**values, "output_dir": trial_dir.as_posix()}))
    continued = f", continuing trial {first}'s run" if first is not None else ""
    print(f"Trial {trial.number}{continued}: {values}", flush=True)

    command = trial_command(settings.command, trial_dir / "config.yaml")
    # The trial's id in the database (Optuna's Trial(study, id) opens it in the training process), not its number.
    found = {"study": study.study_name, "trial": trial._trial_id, "pruning": settings.pruning}
    found.update(startup_trials=settings.startup_trials, warmup_epochs=settings.warmup_epochs)
    env = {**os.environ, **command.env, STORAGE_ENV: url, TRIAL_ENV: json.dumps(found)}
    # The trackers' runs of one study together: MLflow's in one experiment of one store, W&B's in one group.
    env.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{(study_dir / 'mlflow.db').resolve().as_posix()}")
    env.setdefault("MLFLOW_EXPERIMENT_NAME", study.study_name)
    env.setdefault("WANDB_RUN_GROUP", study.study_name)
    worker = [sys.executable, "-m", "machinery.sweeps.orphans", str(os.getpid())]
    if stops.signum is not None:  # stopped while the trial was being made: it waits, untrained, for the next worker
        _retry_later(study, trial.number)
        raise Interrupted(128 + stops.signum, f"Trial {trial.number} not started: stopped ({trial_dir}).")
    stops.trial = subprocess.Popen([*worker, *command.argv], env=env)
    status = stops.trial.wait()
    stops.trial = None
    _wait_released(trial_dir)
    outcome = _outcome(trial_dir)
    if status == 0 and outcome.get("status") == "pruned":
        print(f"Trial {trial.number} pruned: {outcome['reason']}", flush=True)
        raise optuna.TrialPruned(outcome["reason"])
    scores = study.get_trials(deepcopy=False)[trial.number].intermediate_values
    if status == 0 and outcome.get("status") == "finished" and scores:
        print(f"Trial {trial.number} finished: score {scores[max(scores)]} at epoch {max(scores)}", flush=True)
        return scores[max(scores)]
    _retry_later(study, trial.number)
    if status in STOPPED:
        raise Interrupted(status, f"Trial {trial.number} stopped: the same command continues it ({trial_dir}).")
    raise Interrupted(
        1,
        f"Trial {trial.number} failed ({trial_dir}: {outcome.get('reason', f'exit status {status}')}). Once fixed, the "
        "same command continues it.",
    )


class _Command:
    """A trial's training command: sweep.yaml's ``command`` with the trial's config, and its ``NAME=value`` prefix."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.argv, self.env = argv, env


def trial_command(template: str, config: Path) -> _Command:
    """``template`` (sweep.yaml's ``command``) for the config file ``config``: ``{config}``, or Hydra's ``{dir}`` (made
    absolute: Hydra reads a relative one from machinery/) and ``{name}``. A leading ``python`` is the sweep's own."""
    where = {"config": config, "dir": config.parent.resolve(), "name": config.stem}
    words = [word.format(**where) for word in shlex.split(template)]
    env = {}
    while words and "=" in words[0] and words[0].split("=")[0].isidentifier():
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    if words and words[0] == "python":
        words[0] = sys.executable
    return _Command(words, env)


def _wait_released(trial_dir: Path, timeout: float = 120) -> None:
    """Wait till no process holds the trial's runs: a launcher (torchrun's agent, signalled twice) may exit before its
    training processes have saved and ended."""
    end = time.monotonic() + timeout
    for run_dir in (path.parent for path in trial_dir.glob("*/config-lock.yaml")):
        while True:
            try:
                hold(run_dir)
            except Unusable:
                if time.monotonic() < end:
                    time.sleep(0.5)
                    continue
            release_run_dir()
            break


def _outcome(trial_dir: Path) -> dict[str, Any]:
    """How the trial's run ended (its status.yaml), or nothing if it has none yet."""
    runs = sorted(trial_dir.glob(f"*/{STATUS_FILE}"), key=lambda path: path.stat().st_mtime)
    return (read_run_file(runs[-1], []) or {}) if runs else {}


def _retry_later(study: optuna.Study, number: int) -> None:
    """Enqueue trial ``number`` again, with its values and scores, as a stale heartbeat would (Optuna fails it)."""
    retry_callback()(study, study.get_trials(deepcopy=False)[number])


def retry_callback() -> RetryHeartbeatStaleTrialCallback:
    """What enqueues a stopped or dead worker's trial again: its values, its scores so far, at most RETRIES times."""
    return RetryHeartbeatStaleTrialCallback(max_retry=RETRIES, inherit_intermediate_values=True)
