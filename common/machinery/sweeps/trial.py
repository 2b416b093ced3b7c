"""A sweep's trial as a process: its training command (sweep.yaml's ``command``) on the trial's config, started so that
the worker's stop signals reach it, and how its run ended."""

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from machinery.runs.files import STATUS_FILE, Unusable, hold, read_run_file, release_run_dir


class Stops:
    """The worker's stop signals, each passed on to the trial's command (a second one, a second later, aborts it)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.trial: subprocess.Popen | None = None
        self.passed_on = False
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.stop)

    def stop(self, signum: int, _frame: Any) -> None:
        self.signum = signum
        if self.trial is not None and self.trial.poll() is None:
            self.trial.send_signal(signum)  # the same request as one from the terminal or scheduler: it stops once
            self.passed_on = True


class Command:
    """A trial's training command: sweep.yaml's ``command`` with the trial's config, and its ``NAME=value`` prefix."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.argv, self.env = argv, env


def trial_command(template: str, config: Path) -> Command:
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
    return Command(words, env)


def run_trial_command(command: Command, env: dict[str, str], stops: Stops) -> int | None:
    """Run ``command``; its exit status, or None if the worker was asked to stop before it started. Killed with the
    worker (kill -9 too), the command gets SIGTERM: it stops cleanly, its checkpoint saved (orphans.py)."""
    if stops.signum is not None:
        return None
    orphans = [sys.executable, "-m", "machinery.sweeps.orphans", str(os.getpid())]
    stops.trial, stops.passed_on = subprocess.Popen([*orphans, *command.argv], env={**env, **command.env}), False
    if stops.signum is not None and not stops.passed_on:  # a stop that came while the command was being started
        stops.trial.send_signal(stops.signum)
    status = stops.trial.wait()
    stops.trial = None
    return status


def wait_released(trial_dir: Path, timeout: float = 120) -> None:
    """Wait till no process holds the trial's runs: a launcher (torchrun's agent, signalled twice) may exit before its
    training processes have saved and ended, and a worker taken for dead may still be stopping its trial."""
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


def run_outcome(trial_dir: Path) -> dict[str, Any]:
    """How the trial's run ended (its status.yaml: status, reason, epoch), or nothing if it has none yet."""
    runs = sorted(trial_dir.glob(f"*/{STATUS_FILE}"), key=lambda path: path.stat().st_mtime)
    return (read_run_file(runs[-1], []) or {}) if runs else {}
