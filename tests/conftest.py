"""Fixtures: bake a template with pytest-cookies and check the result."""

import hashlib
import json
import os
import time
from pathlib import Path

import pytest
import suite_costs
from answers import REPO
from cookiecutter.environment import StrictEnvironment
from filelock import FileLock
from jinja2 import BytecodeCache
from pytest_cookies.plugin import Cookies
from scheduling import SharedRunScheduling

# One compute thread per process (PyTorch's OpenMP and MKL pools, which every training run, notebook kernel
# and project test the suite starts inherits): the suite keeps both cores busy with its two workers, and two
# processes each spinning two OpenMP threads on two cores took 4x the CPU time of one thread each (measured:
# two vision runs side by side, 17.5 s with 2 threads each, 4.6 s with 1). Set before the workers import torch.
for _pool in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")
# torch.compile's inductor compiles in the training process, not in a pool of worker processes (one per core, each
# importing torch): the same kernels (the compiled run stopped and continued: 62 -> 45 CPU seconds, measured).
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


class CompiledTemplates(BytecodeCache):
    """Jinja's compiled templates, kept in memory for the worker's whole run.

    Cookiecutter makes a new Jinja environment for every bake, which compiles every template anew: that was
    half of a bake (0.85 -> 0.40 s a segmentation bake on a busy machine). Jinja's own bytecode cache keys a
    template by its name and file and checks its source's checksum before using the code, so an edited
    template is compiled again; what a bake renders is the same. One cache per environment's settings (what
    the compiled code depends on besides the source: _SETTINGS).
    """

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket) -> None:
        if bucket.key in self._code:
            bucket.bytecode_from_string(self._code[bucket.key])

    def dump_bytecode(self, bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


# What Jinja's compiled code depends on besides the template's source: one cache for each set of them.
_SETTINGS = (
    "block_start_string",
    "block_end_string",
    "variable_start_string",
    "variable_end_string",
    "comment_start_string",
    "comment_end_string",
    "line_statement_prefix",
    "line_comment_prefix",
    "trim_blocks",
    "lstrip_blocks",
    "newline_sequence",
    "keep_trailing_newline",
    "optimized",
    "autoescape",
)
_COMPILED: dict[tuple, CompiledTemplates] = {}
_strict_init = StrictEnvironment.__init__


def _environment_with_compiled_templates(self, **kwargs) -> None:
    _strict_init(self, **kwargs)
    settings = (tuple(sorted(self.extensions)), *(repr(getattr(self, name)) for name in _SETTINGS))
    self.bytecode_cache = _COMPILED.setdefault(settings, CompiledTemplates())


# Every in-process bake (pytest-cookies) and render (tests/rendering.py) makes its environment through this class.
StrictEnvironment.__init__ = _environment_with_compiled_templates


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
def bake_for_a_shared_run(cookies_session):
    """``bake`` for a fixture wider than a test (a run several tests read): a new project each call."""

    def _bake(template: str = "vision-classification", **answers) -> Path:
        return baked_project(cookies_session, template, answers)

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
