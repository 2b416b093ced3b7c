"""Each hosted or server-based experiment tracker receives a run for real, offline, and it is read back.

A vision project is baked with the tracker, trained briefly in the trackers venv (`.venv-trackers`:
every tracker's package, layered on the base venv) with the README's command, and what the tracker
recorded is read back (`tracker_records.py`) and compared with the run's `training.log`: the training
loss of every logged iteration, the eval metrics of each epoch, the learning rate and the config must
all be there, under the run's name (`helpers.check_tracker_records`).

Each tracker runs in its local mode: an MLflow SQLite store; the offline modes of ClearML, Neptune,
Polyaxon and Weights & Biases, with the exact command the README gives; Visdom, which keeps nothing
offline, against a real Visdom server on a free loopback port. TensorBoard is checked the same way in
test_training_runs.py, in the base venv. What no test here can check: that a hosted service
(app.clear.ml, neptune.ai, wandb.ai, a Polyaxon or MLflow server) accepts the upload, and Visdom's web
page (the server is started without its first-run download of the page's scripts; the data API needs none).
"""

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tracker_records
from helpers import (
    REPO,
    TRACKERS_PYTHON,
    check_tracker_records,
    free_port,
    make_offline,
    pytest_outcomes,
    readme_block,
    readme_train_command,
    run_cmd,
    run_dirs,
)

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


def bake_and_train(bake, tmp_path: Path, logger: str, heading: str = "## Train", env: dict | None = None, **answers):
    """Bake with the tracker and train with the README command under ``heading``; return what the run made."""
    project = bake(logger=logger, **answers)
    config = make_offline(project)
    argv, command_env = readme_train_command(project, python=TRACKERS_PYTHON, heading=heading)
    home = tmp_path / "home"  # where trackers keep caches, settings and offline sessions
    home.mkdir(exist_ok=True)
    run_cmd(argv, cwd=project, env={"HOME": str(home), **command_env, **(env or {})})
    (run_dir,) = run_dirs(project, answers.get("output_dir", "./logs"))
    return project, run_dir, config, command_env


def test_mlflow_sqlite_store_holds_the_run(bake, tmp_path: Path) -> None:
    # A space in output_dir: it reaches both the store's URI and the README's `mlflow ui` command.
    project, run_dir, config, _ = bake_and_train(bake, tmp_path, "mlflow", output_dir="./my runs")
    viewer = readme_block(project, "## Experiment tracking")
    assert viewer == "mlflow ui --backend-store-uri 'sqlite:///./my runs/mlflow.db'"
    assert (project / "my runs" / "mlflow.db").is_file()
    # Read through the README's URI, from the project directory, as `mlflow ui` would.
    check_tracker_records(records("mlflow", "sqlite:///./my runs/mlflow.db", project), run_dir, config)


@pytest.mark.parametrize("tracker", sorted(OFFLINE_COMMANDS))
def test_offline_mode_records_the_run(bake, tmp_path: Path, tracker: str) -> None:
    plx_root = tmp_path / "polyaxon"  # POLYAXON_OFFLINE_ROOT, else /tmp/plx/offline
    project, run_dir, config, command_env = bake_and_train(
        bake, tmp_path, tracker, heading="## Experiment tracking", env={"POLYAXON_OFFLINE_ROOT": str(plx_root)}
    )
    assert command_env == OFFLINE_COMMANDS[tracker], "the README's offline command sets the tracker's offline mode"
    where = {
        "clearml": tmp_path / "home" / ".clearml" / "cache" / "offline",  # ~/.clearml/cache/offline, as the README says
        "neptune": project / ".neptune",
        "polyaxon": plx_root,
        "wandb": run_dir,
    }[tracker]
    check_tracker_records(records(tracker, where, project), run_dir, config)


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
        server.wait(timeout=30)


def test_visdom_server_shows_the_run_after_training(bake, tmp_path: Path, visdom_server: str) -> None:
    server, port = visdom_server.rsplit(":", 1)
    project, run_dir, config, _ = bake_and_train(
        bake, tmp_path, "visdom", env={"VISDOM_SERVER_URL": server, "VISDOM_PORT": port}
    )
    assert readme_block(project, "## Experiment tracking") == "python -m visdom.server"
    # What a user's browser gets from the server once training has ended: every window, every point.
    check_tracker_records(records("visdom", f"{visdom_server}/{run_dir.name}", project), run_dir, config)


@pytest.mark.parametrize("tracker", ["neptune", "visdom"])
def test_generated_tests_pass_with_the_tracker_offline(bake, tracker: str) -> None:
    """The project's own tests run the training: their fixtures keep the tracker local (Neptune's debug
    mode) or start a Visdom server, so `pytest` passes with no account, server or network.
    """
    project = bake(logger=tracker, include_test=True)
    proc = run_cmd([TRACKERS_PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project)
    assert pytest_outcomes(proc.stdout) == {"passed": 3}, proc.stdout
