"""A sweep's worker: it trains the study's trials till exactly ``n_trials`` have finished (completed or pruned), however
many workers share the study. A worker stopped (SIGTERM, Ctrl-C) or killed (kill -9: its heartbeat ends) leaves its
trial to the next worker, which continues that trial's run from its newest checkpoint, with the same values. A trial
that fails (a crash, no score) stays failed, and the worker goes on to the next."""

import contextlib
import json
import os
import threading
import time
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, fail_stale_trials
from optuna.trial import FrozenTrial, TrialState

from machinery.config_files import with_values
from machinery.runs.files import write_whole
from machinery.sweeps.space import STORAGE_ENV, TRIAL_ENV, SweepSettings, suggest
from machinery.sweeps.trial import Stops, run_outcome, run_trial_command, trial_command, wait_released

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
RETRIES = 3  # times a trial is continued after its worker died (no heartbeat); stops are not counted
FAILURES_IN_A_ROW = 3  # a worker whose trials fail this many times in a row ends: the training command is broken


def work(
    study: optuna.Study, storage: RDBStorage, settings: SweepSettings, text: str, study_dir: Path, url: str
) -> int:
    """Train trials till the study has ``n_trials`` finished ones; the exit status (128 + a stop signal's number)."""
    stops, failed, waiting_for = Stops(), [], []
    while stops.signum is None:
        fail_stale_trials(study)  # a dead worker's trial: failed, and enqueued again (continue_later)
        trials = study.get_trials(deepcopy=False)
        finished = sum(trial.state in FINISHED for trial in trials)
        running = [trial.number for trial in trials if trial.state == TrialState.RUNNING]
        if finished >= settings.n_trials:
            print(f"The study {settings.study} has its {finished} finished trials.", flush=True)
            return 0
        if finished + len(running) >= settings.n_trials and not any(t.state == TrialState.WAITING for t in trials):
            if running != waiting_for:  # the last trials are other workers': one of them may die
                print(f"Waiting for trials {running} (other workers)...", flush=True)
                waiting_for = running
            time.sleep(storage.get_heartbeat_interval())
            continue
        trial = study.ask()
        with _Heartbeat(storage, trial._trial_id):
            try:
                ended, why = _train(trial, settings, text, study_dir, url, stops)
            except BaseException:  # the worker's own error (a config it cannot write): the trial is not left running
                with contextlib.suppress(Exception):
                    study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
                raise
        if ended == "stopped itself":  # a full disk, limit_sec: not to be tried again at once
            print(f"Its run stopped ({why}): the same command continues trial {trial.number}.", flush=True)
            return 1
        failed = [*failed, f"trial {trial.number}: {why}"] if ended == "failed" else []
        if len(failed) == FAILURES_IN_A_ROW:
            print(f"{len(failed)} trials failed in a row ({'; '.join(failed)}): fix the training, then run the same "
                  "command.", flush=True)  # fmt: skip
            return 1
    print("Stopped: the same command continues the sweep.", flush=True)
    return 128 + stops.signum


def _train(
    trial: optuna.Trial, settings: SweepSettings, text: str, study_dir: Path, url: str, stops: Stops
) -> tuple[str, str]:
    """One trial: its values, its config, its run (continued where a stopped trial of the same values left it), told
    to the study. How it ended (complete, pruned, surplus, taken over, stopped, stopped itself, failed), and why."""
    study, number = trial.study, trial.number
    trials = study.get_trials(deepcopy=False)
    first = _first(trials[number])
    if _surplus(trials, number, first, settings.n_trials):  # another worker started the last trial first
        trial.set_user_attr("surplus", True)
        study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
        return "surplus", ""
    values = suggest(trial, settings.space)
    run_name = f"trial-{first:04d}"  # a continued trial keeps its run
    trial.set_user_attr("run", run_name)
    trial_dir = study_dir / run_name
    trial_dir.mkdir(parents=True, exist_ok=True)
    write_whole(trial_dir / "config.yaml", with_values(text, {**values, "output_dir": trial_dir.as_posix()}))
    continued = f", continuing trial {first}'s run" if first != number else ""
    print(f"Trial {number}{continued}: {values}", flush=True)

    # The trial's id in the database (Optuna's Trial(study, id) opens it in the training process), not its number.
    found = {"study": study.study_name, "trial": trial._trial_id, "pruning": settings.pruning}
    found.update(startup_trials=settings.startup_trials, warmup_epochs=settings.warmup_epochs)
    env = {**os.environ, STORAGE_ENV: url, TRIAL_ENV: json.dumps(found)}
    # The trackers' runs of one study together: MLflow's in one experiment of one store, W&B's in one group.
    env.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{(study_dir / 'mlflow.db').resolve().as_posix()}")
    env.setdefault("MLFLOW_EXPERIMENT_NAME", study.study_name)
    env.setdefault("WANDB_RUN_GROUP", study.study_name)
    wait_released(trial_dir)  # a worker taken for dead may still be saving this run
    status = run_trial_command(trial_command(settings.command, trial_dir / "config.yaml"), env, stops)
    wait_released(trial_dir)
    outcome = run_outcome(trial_dir) if status is not None else {}
    now = study.get_trials(deepcopy=False)[number]
    if now.state != TrialState.RUNNING:  # its heartbeat came late: another worker has taken the trial over
        print(f"Trial {number} was taken over by another worker (this one's heartbeat was late).", flush=True)
        return "taken over", ""
    if status == 0 and outcome.get("status") == "pruned":
        print(f"Trial {number} pruned: {outcome['reason']}", flush=True)
        study.tell(trial, state=TrialState.PRUNED, skip_if_finished=True)
        return "pruned", outcome["reason"]
    scores = now.intermediate_values
    if status == 0 and outcome.get("status") == "finished" and scores:
        print(f"Trial {number} finished: score {scores[max(scores)]} at epoch {max(scores)}", flush=True)
        study.tell(trial, scores[max(scores)], skip_if_finished=True)
        return "complete", ""
    if stops.signum is not None or outcome.get("status") == "stopped":  # not a failure: continued as it is
        continue_later(study, now, died=False)
        reason = outcome.get("reason") or "before it started"
        trial.set_user_attr("stopped", reason)
        study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
        print(f"Trial {number} stopped ({reason}; {trial_dir}): a trial of its own continues it.", flush=True)
        return ("stopped" if stops.signum is not None else "stopped itself"), reason  # itself: not this worker's stop
    reason = outcome.get("reason") if outcome.get("status") == "finished" else f"exit status {status}"
    why = f"no score: {reason}" if status == 0 else reason
    trial.set_user_attr("failed", why)
    study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
    print(f"Trial {number} failed ({why}; its run: {trial_dir}).", flush=True)
    return "failed", why


def _first(trial: FrozenTrial) -> int:
    """The number of the trial whose run ``trial`` continues (its own if it continues none)."""
    return trial.system_attrs.get("failed_trial", trial.number)


def _surplus(trials: list[FrozenTrial], number: int, first: int, n_trials: int) -> bool:
    """Whether the study makes ``n_trials`` without trial ``number``: its finished trials and those started before
    it, a stopped trial and its continuation counted once (the retry of a trial still being told)."""
    ahead = {_first(t) for t in trials if t.state in FINISHED or (t.state == TrialState.RUNNING and t.number < number)}
    return len(ahead - {first}) >= n_trials


def continue_later(study: optuna.Study, trial: FrozenTrial, died: bool = True) -> None:
    """Enqueue ``trial`` again: its values, its scores so far, its run (continued from its checkpoint). A trial whose
    worker died more than RETRIES times stays failed (the storage's callback for a stale heartbeat)."""
    deaths = trial.user_attrs.get("deaths", 0) + died
    if deaths > RETRIES:
        print(f"Trial {trial.number}: its worker died {deaths} times; it stays failed.", flush=True)
        return
    # The attributes Optuna's RetryHeartbeatStaleTrialCallback gives a retry (its retried_trial_number reads them).
    history = [*trial.system_attrs.get("retry_history", []), trial.number]
    system_attrs = {**trial.system_attrs, "failed_trial": _first(trial), "retry_history": history}
    study.add_trial(
        optuna.create_trial(
            state=TrialState.WAITING, params=trial.params, distributions=trial.distributions,
            user_attrs={**trial.user_attrs, "deaths": deaths}, system_attrs=system_attrs,
            intermediate_values=trial.intermediate_values,
        )
    )  # fmt: skip


class _Heartbeat:
    """The trial's heartbeat, recorded every heartbeat_interval in a thread till the trial is told. A write the
    database refuses is tried again at the next beat: one hiccup does not make a live trial look dead."""

    def __init__(self, storage: RDBStorage, trial_id: int) -> None:
        self.storage, self.trial_id, self.done = storage, trial_id, threading.Event()

    def __enter__(self) -> None:
        threading.Thread(target=self.beat, daemon=True).start()

    def beat(self) -> None:
        while True:
            try:
                self.storage.record_heartbeat(self.trial_id)
            except Exception as error:  # its message may name the database: only its kind is shown
                print(f"The trial's heartbeat was not recorded ({type(error).__name__}); trying again.", flush=True)
            if self.done.wait(self.storage.get_heartbeat_interval()):
                return

    def __exit__(self, *_: object) -> None:
        self.done.set()
