"""Fixtures: bake a template with pytest-cookies and check the result."""

import hashlib
import json
import os
import time
from pathlib import Path

import pytest
import suite_costs
from answers import REPO
from filelock import FileLock
from pytest_cookies.plugin import Cookies
from scheduling import SharedRunScheduling

# One compute thread per process (PyTorch's OpenMP and MKL pools, which every training run, notebook kernel
# and project test the suite starts inherits): the suite keeps both cores busy with its two workers, and two
# processes each spinning two OpenMP threads on two cores took 4x the CPU time of one thread each (measured:
# two vision runs side by side, 17.5 s with 2 threads each, 4.6 s with 1). Set before the workers import torch.
for _pool in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")


def pytest_configure(config) -> None:
    suite_costs.register(config)  # IGNITE_TEMPLATES_COSTS=DIR: where the time goes (scripts/suite_costs.py)


def pytest_collection_modifyitems(config, items) -> None:
    """The slow tests first (their order otherwise kept): the quick ones then fill both workers to the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent with -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    """With -n: the tests of one shared run on one worker (tests/scheduling.py)."""
    return SharedRunScheduling(config, log)


def timed_bake(cookies, template: str, answers: dict):
    """pytest-cookies' bake of ``template``, its seconds counted as a bake (tests/suite_costs.py)."""
    start = time.perf_counter()
    result = cookies.bake(extra_context=answers, template=str(REPO / template))
    suite_costs.time_bake(time.perf_counter() - start)
    return result


def baked_project(cookies, template: str, answers: dict) -> Path:
    """The project baked; fails the test with cookiecutter's error if generation fails."""
    result = timed_bake(cookies, template, answers)
    assert result.exception is None, f"baking {template} with {answers} failed: {result.exception!r}"
    assert result.exit_code == 0
    return Path(result.project_path)


@pytest.fixture
def bake(cookies):
    """Bake ``template`` with the given answers, a new project each call."""

    def _bake(template: str = "vision-classification", **answers) -> Path:
        return baked_project(cookies, template, answers)

    return _bake


@pytest.fixture(scope="session")
def baked(tmp_path_factory, _cookiecutter_config_file):
    """Like ``bake``, but one project per answer set for the whole run, shared by the tests that only read it
    (they must not write into it): a test that trains or edits a project takes its own from ``bake``.

    Both xdist workers share it: the first to ask for an answer set bakes it in the run's common temporary
    folder, under a file lock, and the other then reads the same project (half the bakes of a run that
    spreads one answer set's tests over both workers).
    """
    root = tmp_path_factory.getbasetemp()
    shared = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "baked"
    shared.mkdir(exist_ok=True)
    projects: dict[str, Path] = {}

    def _baked(template: str = "vision-classification", **answers) -> Path:
        key = json.dumps([template, answers], sort_keys=True)
        if key not in projects:
            folder = shared / hashlib.sha1(key.encode()).hexdigest()[:16]
            done = folder.with_suffix(".done")  # holds the project's path once it is baked
            with FileLock(folder.with_suffix(".lock")):
                if not done.exists():
                    cookies = Cookies(str(REPO), lambda _name: folder.mkdir() or folder, _cookiecutter_config_file)
                    project = baked_project(cookies, template, answers)
                    done.write_text(str(project))
                projects[key] = Path(done.read_text())
        return projects[key]

    return _baked


@pytest.fixture
def bake_result(cookies):
    """Bake and return pytest-cookies' raw result, for tests that expect generation to fail."""

    def _bake(template: str = "vision-classification", **answers):
        return timed_bake(cookies, template, answers)

    return _bake
