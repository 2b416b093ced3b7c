"""Where the suite's time goes: a pytest plugin that records, per test, its wall time, the CPU time of its
processes and the seconds it spent in each kind of work (bakes, training runs, notebooks, venvs, ...).

Loaded by conftest.py when ``IGNITE_TEMPLATES_COSTS`` names a directory; each pytest worker writes one JSON
lines file there. ``python scripts/suite_costs.py DIR --table`` prints CONTRIBUTING.md's "What the suite costs"
table from them (without ``--table``: every table: the work, the files, the slowest tests).
"""

import json
import os
import resource
import subprocess
import time
from pathlib import Path

import pytest

_current: dict | None = None  # the costs of the running test


def kind_of(argv: list[str]) -> str:
    """The kind of work a command the tests run does, from its arguments."""
    words = [os.path.basename(str(arg)) for arg in argv]
    text = " ".join(str(arg) for arg in argv)
    python = words[0].startswith("python") if words else False
    xla = ".venv-xla" in text
    if "run_notebook.py" in text:
        return "notebook (XLA)" if xla else "notebook"
    if words[:1] == ["bash"]:
        return "generated CI commands"
    if python and words[1:3] == ["-m", "venv"]:
        return "fresh venv"
    if "pip" in words[:3]:  # pip ..., python -m pip ...
        return "pip"
    if python and "pytest" in words[1:3]:
        return "project's own tests (XLA)" if xla else "project's own tests"
    if python and ("main.py" in words or "torch.distributed.run" in words):
        return "training run (XLA)" if xla else "training run"
    if words[:1] in (["cookiecutter"], ["cruft"], ["git"]):
        return "cookiecutter/cruft/git CLI"
    if words[:1] in (["ruff"], ["pre-commit"], ["check-jsonschema"]):
        return "lint and schema tools"
    return "other commands"


def add(kind: str, seconds: float, started: int = 0) -> None:
    if _current is not None:
        _current["kinds"][kind] = _current["kinds"].get(kind, 0.0) + seconds
        if started:
            _current["starts"][kind] = _current["starts"].get(kind, 0) + started


_init, _wait = subprocess.Popen.__init__, subprocess.Popen.wait


def _timed_init(self, args, *rest, **kwargs):
    self._costs_start = time.perf_counter()
    self._costs_kind = kind_of([args] if isinstance(args, str | os.PathLike) else list(args))
    _init(self, args, *rest, **kwargs)


def _timed_wait(self, *args, **kwargs):
    status = _wait(self, *args, **kwargs)
    if getattr(self, "_costs_start", None) is not None:
        add(self._costs_kind, time.perf_counter() - self._costs_start, started=1)
        self._costs_start = None  # counted once, however often it is waited for
    return status


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Costs:
    """Writes one JSON line per test: nodeid, worker, start, wall, cpu, kinds (seconds), starts (commands)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.out = (directory / f"{worker}.jsonl").open("a")
        self.worker = worker
        subprocess.Popen.__init__, subprocess.Popen.wait = _timed_init, _timed_wait

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report):
        if _current is not None and report.outcome != "passed":
            _current["outcome"] = report.outcome

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        global _current
        _current = {"kinds": {}, "starts": {}, "outcome": "passed"}
        start, cpu = time.time(), _cpu()
        yield
        record = {
            "nodeid": item.nodeid,
            "worker": self.worker,
            "start": start,
            "wall": time.time() - start,
            "cpu": _cpu() - cpu,
            "kinds": _current["kinds"],
            "starts": _current["starts"],
            "outcome": _current["outcome"],
        }
        _current = None
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()


def time_bake(seconds: float) -> None:
    """Count a pytest-cookies bake (in the test's own process)."""
    add("bakes", seconds)


def register(config) -> None:
    directory = os.environ.get("IGNITE_TEMPLATES_COSTS")
    if directory:
        config.pluginmanager.register(Costs(Path(directory)), "suite_costs")
