"""Each hosted or server-based experiment tracker receives a run for real, offline, and it is read back.

A vision project is baked with the tracker, trained briefly in the trackers venv (`.venv-trackers`:
every tracker's package, layered on the base venv) with the README's command, and what the tracker
recorded is read back (`tracker_records.py`) and compared with the run's `training.log`: the training
loss of every logged iteration, the eval metrics of each epoch, the learning rate and the config must
all be there, under the run's name (`tracker_checks.check_tracker_records`).

Each tracker runs in its local mode: an MLflow SQLite store; the offline modes of ClearML, Neptune,
Polyaxon and Weights & Biases, with the exact command the README gives; Visdom, which keeps nothing
offline, against a real Visdom server on a free loopback port. TensorBoard is checked the same way in
test_training_runs.py, in the base venv. Each tracker's run is stopped in iteration 2 (SIGTERM) and continued
by the same command, and must then hold every step once, as an uninterrupted run's, in one run (the offline
modes', MLflow's and Visdom's record tests are those runs; TensorBoard's has a test of its own), except
Neptune's offline runs, which cannot be continued: the log says so. A GAN run is read back too (its four
losses, both optimizers' learning rates, at a logging interval of 2, in the store MLFLOW_TRACKING_URI names);
each tracker's generated tests pass offline; W&B and Neptune without credentials, and Visdom without a
server, stop the run at once with their own message. What no test here can check: that a hosted service
(app.clear.ml, neptune.ai, wandb.ai, a Polyaxon or MLflow server) accepts the upload, and Visdom's web
page (the server is started without its first-run download of the page's scripts; the data API needs none).
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import tracker_records
from answers import OPTIONS, REPO
from environments import TRACKERS_PYTHON
from projects import (
    LEARNING_TESTS,
    free_port,
    make_offline,
    pytest_outcomes,
    readme_block,
    readme_train_command,
    run_cmd,
    run_dirs,
)
from tracker_checks import check_tracker_records

pytestmark = pytest.mark.slow  # they train generated projects with each tracker: not in the quick lane

# The trackers whose README section gives an offline training command, and what it must set.
OFFLINE_COMMANDS = {
    "clearml": {"CLEARML_OFFLINE_MODE": "1"},
    "neptune": {"NEPTUNE_MODE": "offline"},
    "polyaxon": {"POLYAXON_IS_OFFLINE": "true"},
    "wandb": {"WANDB_MODE": "offline"},
}


@pytest.fixture(autouse=True)
def trackers_environment() -> None:
    assert Path(TRACKERS_PYTHON).exists(), f"no trackers environment at {TRACKERS_PYTHON}: run `bash scripts/env.sh`"


def records(tracker: str, where: Path | str, cwd: Path) -> dict:
    """What the tracker recorded; the MLflow and W&B readers need their packages, so run in the trackers venv."""
    if tracker not in ("mlflow", "wandb"):
        return getattr(tracker_records, tracker)(str(where))
    proc = run_cmd([TRACKERS_PYTHON, str(REPO / "tests" / "tracker_records.py"), tracker, str(where)], cwd=cwd)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bake_and_train(
    bake,
    tmp_path: Path,
    logger: str,
    heading: str = "## Train",
    env: dict | None = None,
    template: str = "vision-classification",
    log_every_iters: int = 1,
    stop_and_continue: bool = False,
    **answers,
):
    """Bake with the tracker and train with the README command under ``heading``; return what the run made.

    With ``stop_and_continue``, a SIGTERM stops the command in iteration 2 of the 6 (tests/probes/stop_signals.py)
    and the same command, run again, continues the run.
    """
    project = bake(template, logger=logger, **answers)
    config = make_offline(project, log_every_iters=log_every_iters)  # 2 epochs of 3 iterations
    argv, command_env = readme_train_command(project, python=TRACKERS_PYTHON, heading=heading)
    home = tmp_path / "home"  # where trackers keep caches, settings and offline sessions
    home.mkdir(exist_ok=True)
    env = {"HOME": str(home), **command_env, **(env or {})}
    if stop_and_continue:
        probe = {"PYTHONPATH": str(REPO / "tests" / "probes"), "STOP_PROBE": "iteration:2"}
        run_cmd(argv, cwd=project, env={**env, **probe}, returncode=143)
    run_cmd(argv, cwd=project, env=env)
    (run_dir,) = run_dirs(project)
    if stop_and_continue:
        assert "Continuing the run in" in (run_dir / "training.log").read_text(), "the second command continues the run"
    return project, run_dir, config, command_env


def test_mlflow_sqlite_store_holds_a_stopped_and_continued_run_once_at_the_readmes_uri(bake, tmp_path: Path) -> None:
    project, run_dir, config, _ = bake_and_train(bake, tmp_path, "mlflow", stop_and_continue=True)
    viewer = readme_block(project, "## Experiment tracking")
    assert viewer == "mlflow ui --backend-store-uri 'sqlite:///./logs/mlflow.db'"
    assert (project / "logs" / "mlflow.db").is_file()
    # Read through the README's URI, from the project directory, as `mlflow ui` would: one run in the store,
    # holding every step once, as an uninterrupted run's.
    check_tracker_records(records("mlflow", "sqlite:///./logs/mlflow.db", project), run_dir, config)
    # The README's `mlflow ui`, as written (its default port, 5000): its API lists that one run, by its name.
    search = ("api/2.0/mlflow/runs/search", json.dumps({"experiment_ids": ["0"]}).encode())
    found = served(viewer, project, "http://127.0.0.1:5000", *search)
    assert [run["info"]["run_name"] for run in found["runs"]] == [run_dir.name], found


@pytest.mark.parametrize("tracker", sorted(OFFLINE_COMMANDS))
def test_offline_records_of_a_stopped_and_continued_run_hold_every_step_once(
    bake, tmp_path: Path, tracker: str
) -> None:
    """The README's offline command, stopped and run again: the tracker holds every step once, as an
    uninterrupted run's, in one run: one ClearML session, one Polyaxon run, W&B offline runs that `wandb sync`
    uploads as one. Neptune cannot continue a run offline: the log says so, and its two runs hold every step once.
    """
    plx_root = tmp_path / "polyaxon"  # POLYAXON_OFFLINE_ROOT, else /tmp/plx/offline
    project, run_dir, config, command_env = bake_and_train(
        bake,
        tmp_path,
        tracker,
        heading="## Experiment tracking",
        env={"POLYAXON_OFFLINE_ROOT": str(plx_root)},
        stop_and_continue=True,
    )
    assert command_env == OFFLINE_COMMANDS[tracker], "the README's offline command sets the tracker's offline mode"
    where = {
        "clearml": tmp_path / "home" / ".clearml" / "cache" / "offline",  # ~/.clearml/cache/offline, as the README says
        "neptune": project / ".neptune",
        "polyaxon": plx_root,
        "wandb": run_dir,
    }[tracker]
    if tracker == "neptune":
        log = (run_dir / "training.log").read_text()
        assert "Neptune cannot continue a run offline" in log, "training.log must say the continued part is a new run"
        runs = tracker_records.neptune(str(where))
        assert len(runs) == 2, f"one offline run per command, {len(runs)} found"
        assert runs[0]["name"] == runs[1]["name"] == run_dir.name, "both named after the run directory"
        recorded = tracker_records.one_after_the_other(runs)
    else:
        recorded = records(tracker, where, project)
    check_tracker_records(recorded, run_dir, config)


@pytest.fixture
def visdom_server(tmp_path: Path) -> Iterator[str]:
    """A Visdom server on a free loopback port; yields its URL."""
    port = free_port()
    # `python -m visdom.server` first downloads the web page's scripts (no network here): start the server itself.
    command = [TRACKERS_PYTHON, "-c", "from visdom.server.run_server import main; main()"]
    command += ["-port", port, "--hostname", "127.0.0.1", "-env_path", str(tmp_path / "visdom")]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "the Visdom server did not start"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # stuck: force it, rather than leave it running
            server.kill()
            server.wait(timeout=30)


def test_visdom_server_shows_a_stopped_and_continued_run_in_the_same_windows(
    bake, tmp_path: Path, visdom_server: str
) -> None:
    server, port = visdom_server.rsplit(":", 1)
    project, run_dir, config, _ = bake_and_train(
        bake, tmp_path, "visdom", env={"VISDOM_SERVER_URL": server, "VISDOM_PORT": port}, stop_and_continue=True
    )
    assert readme_block(project, "## Experiment tracking") == "python -m visdom.server"
    # What a user's browser gets from the server once training has ended: one window a plot, every point once.
    check_tracker_records(records("visdom", visdom_server, project), run_dir, config)


# TensorBoard's own tests run where this repository's CI runs the projects' own tests (test_project_tooling.py's
# CI_RUNS: each of those projects logs to TensorBoard).
@pytest.mark.parametrize("tracker", [t for t in OPTIONS["logger"] if t not in ("none", "tensorboard")])
def test_generated_tests_pass_with_the_tracker_offline(bake, tracker: str) -> None:
    """The project's own tests run the training: their fixtures keep the tracker local (offline or debug
    modes, a Visdom server of their own; MLflow is local anyway), so `pytest` passes with
    no account, server or network.
    """
    project = bake(logger=tracker, include_test=True)
    # Not tests/test_export.py: no tracker takes part in an export (the projects' own tests export without one).
    # Nor the learning test: it trains as the short run does, with the same tracker set-up, only longer; that
    # the project learns is shown where its own tests run without a tracker (test_project_tooling.py).
    argv = [TRACKERS_PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--deselect", "tests/test_export.py"]
    argv += ["--deselect", f"tests/test_training.py::{LEARNING_TESTS['vision-classification']}"]
    proc = run_cmd(argv, cwd=project)
    outcomes = pytest_outcomes(proc.stdout)
    assert set(outcomes) == {"passed", "deselected"} and outcomes["passed"] >= 4, f"every test passes: {outcomes}"
    assert outcomes["deselected"] == 2, f"only the export and learning tests are left out: {outcomes}"


def test_gan_losses_and_learning_rates_reach_the_store_that_mlflow_tracking_uri_names(bake, tmp_path: Path) -> None:
    """One GAN run shows three claims: its four losses and both optimizers' learning rates are recorded, at a
    logging interval that is not 1 (and does not divide the epoch), in the store MLFLOW_TRACKING_URI names
    instead of the local default."""
    store = tmp_path / "elsewhere.db"
    project, run_dir, config, _ = bake_and_train(
        bake, tmp_path, "mlflow", env={"MLFLOW_TRACKING_URI": f"sqlite:///{store}"}, template="gan", log_every_iters=2
    )
    assert store.is_file() and not (project / "logs" / "mlflow.db").exists(), (
        "MLFLOW_TRACKING_URI overrides the default"
    )
    recorded = records("mlflow", f"sqlite:///{store}", project)
    check_tracker_records(recorded, run_dir, config, optimizers=("optimizer_g", "optimizer_d"))
    assert {"train/loss_d", "train/loss_g", "train/d_real", "train/d_fake"} <= set(recorded["series"])


# What each tracker says when it has no credentials or server: it stops the run before the first iteration.
NO_CREDENTIALS = {
    "wandb": ("No API key configured", {"WANDB_BASE_URL": "http://127.0.0.1:9"}),  # a closed local port
    "neptune": ("NEPTUNE_API_TOKEN", {}),
    "visdom": ("Error connecting to Visdom server", {"VISDOM_SERVER_URL": "http://127.0.0.1"}),
}


@pytest.mark.parametrize("tracker", sorted(NO_CREDENTIALS))
def test_a_tracker_without_credentials_or_server_stops_at_once_with_its_own_message(
    bake, tmp_path: Path, tracker: str
) -> None:
    message, env = NO_CREDENTIALS[tracker]
    project = bake(logger=tracker)
    make_offline(project)
    argv, _ = readme_train_command(project, python=TRACKERS_PYTHON)
    home = tmp_path / "home"  # no saved login
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "VISDOM_PORT": free_port(), "HF_HUB_OFFLINE": "1", **env}
    proc = subprocess.run(
        argv, cwd=project, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )
    assert proc.returncode != 0, f"{tracker} without credentials must stop the run"
    assert message in proc.stdout + proc.stderr, f"{tracker}'s own message is missing:\n{proc.stderr[-3000:]}"
    (run_dir,) = run_dirs(project)
    assert " - iteration " not in (run_dir / "training.log").read_text(), "it stops before training starts"


def test_a_stopped_and_continued_run_is_one_tensorboard_run_with_every_step_once(bake, tmp_path: Path) -> None:
    """TensorBoard's events; MLflow's store, the offline modes' and Visdom's runs are stopped and continued in
    the tests above."""
    project, run_dir, config, _ = bake_and_train(bake, tmp_path, "tensorboard", launcher="none", stop_and_continue=True)
    # One run in the tracker, holding every step once, as an uninterrupted run's.
    check_tracker_records(records("tensorboard", project / "logs", project), run_dir, config)
    # The README's `tensorboard --logdir`, as written (its default port, 6006): it serves that one run.
    found = served(readme_block(project, "## Experiment tracking"), project, "http://127.0.0.1:6006", "data/runs")
    assert found == [f"{run_dir.name}/tensorboard"], found


def served(command: str, project: Path, server: str, path: str, body: bytes | None = None) -> dict | list:
    """Start a README's viewer command in ``project`` as written (the trackers venv's and the base venv's
    commands first on PATH), ask its server for ``path`` (JSON; a POST of ``body`` if given) once it answers,
    then stop it."""
    venvs = os.pathsep.join(str(Path(python).parent) for python in (TRACKERS_PYTHON, sys.executable))
    env = {**os.environ, "PATH": f"{venvs}{os.pathsep}{os.environ['PATH']}"}
    viewer = subprocess.Popen(
        ["bash", "-c", f"exec {command}"], cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    try:
        while True:
            assert viewer.poll() is None, f"`{command}` ended:\n{viewer.stdout.read().decode()[-3000:]}"
            try:
                request = urllib.request.Request(f"{server}/{path}", data=body, method="POST" if body else "GET")
                request.add_header("Content-Type", "application/json")
                with urllib.request.urlopen(request, timeout=5) as response:
                    return json.loads(response.read())
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, f"`{command}` did not serve {server}/{path} within 90 s"
                time.sleep(0.5)
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have ended on its own
            os.killpg(viewer.pid, signal.SIGKILL)
        viewer.wait()
