{#- The generated tests' fixtures. TINY holds keys of every template's config.yaml, the eval keys of a
    template with an evaluator, and the keys a template's conftest.py sets in `tiny_extras` (dict items,
    one a line) before the include: only keys its own config.yaml has. A template's conftest.py may set
    `tiny_batch_size` and `tiny_eval_batch_size` (4 otherwise): its learning test's, so that on a TPU (or
    the XLA CPU device) every test runs the programs the first one compiled. -#}
{% import "flags.j2" as flags with context %}
{#- What collections.abc gives the fixtures below, in the one import line ruff wants. -#}
{% set abc_names = (["Callable"] if flags.eval_metric else []) + (["Iterator"] if cookiecutter.logger == "visdom" else []) %}
"""Shared fixtures: a small, offline configuration built from config.yaml{{ ", and a local Visdom server" if cookiecutter.logger == "visdom" }}."""

{% if flags.eval_metric %}
import re
{% endif %}
{% if cookiecutter.logger == "visdom" %}
import socket
import subprocess
import sys
import time
{% endif %}
{% if abc_names %}
from collections.abc import {{ abc_names | join(", ") }}
{% endif %}
from pathlib import Path
from types import ModuleType
{% if flags.eval_metric %}
from typing import Any
{% endif %}

import pytest
import yaml

from config import Config
from machinery.config_files import load_config
{% if flags.eval_metric %}
from main import run
{% endif %}

PROJECT_DIR = Path(__file__).resolve().parents[1]


# Small, fast values for some of the keys of config.yaml.
TINY = {
    "dataset": "synthetic",
    "batch_size": {{ tiny_batch_size | default(4) }},
{% if flags.eval_metric %}
    "eval_batch_size": {{ tiny_eval_batch_size | default(4) }},
{% endif %}
    "num_workers": 0,
    "max_epochs": 2,
    "train_epoch_length": 2,
{% if flags.eval_metric %}
    "eval_epoch_length": 2,
{% endif %}
    "log_every_iters": 1,
{% if tiny_extras is defined %}
    {{ tiny_extras | trim }}
{% endif %}
}


@pytest.fixture
def config(tmp_path: Path) -> Config:
    """config.yaml with synthetic data, two tiny epochs and outputs under ``tmp_path``; its backend (one process on a
    GPU or CPU, the XLA device in a TPU project): ``run`` is called here, in this process."""
    outputs = {"data_path": str(tmp_path / "data"), "output_dir": str(tmp_path / "runs")}
    return load_config(PROJECT_DIR / "config.yaml", Config, **TINY, **outputs)


@pytest.fixture
def onnxruntime() -> ModuleType:
    """onnxruntime, where export.py's packages are installed (requirements-export.txt); else the test is skipped."""
    reason = "export.py's packages: pip install -r requirements-export.txt"
    for package in ("onnx", "onnxscript"):
        pytest.importorskip(package, reason=reason)
    return pytest.importorskip("onnxruntime", reason=reason)


@pytest.fixture
def run_dir(config: Config) -> Path:
    """A run directory of ``config`` as training starts it (its config-lock.yaml), for a test to save models in."""
    path = Path(config.output_dir) / "20260101-000000-single"
    path.mkdir(parents=True)
    (path / "config-lock.yaml").write_text(yaml.safe_dump(config.model_dump()))
    return path
{% if flags.eval_metric %}


@pytest.fixture
def train_for_eval_scores(config: Config) -> Callable[..., list[float]]:
    """A function that trains with ``config`` and the given overrides and returns each epoch's eval
    {{ flags.eval_metric }}, as training.log shows it."""

    def train(**overrides: Any) -> list[float]:
        run(0, config.model_copy(update=overrides))
        (run_dir,) = (path for path in Path(config.output_dir).iterdir() if path.is_dir())
        log = (run_dir / "training.log").read_text()
        return [float(value) for value in re.findall(r" - eval: {{ flags.eval_metric }}=([0-9.]+)", log)]

    return train
{% endif %}
{% if cookiecutter.logger == "clearml" %}


@pytest.fixture(autouse=True)
def offline_tracking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the tracker's records on this machine, under ``tmp_path``: no account or server needed."""
    monkeypatch.setenv("CLEARML_OFFLINE_MODE", "1")
    monkeypatch.setenv("CLEARML_CACHE_DIR", str(tmp_path / "clearml"))
    # ClearML looks for the git repository in a thread while it forks its reporting process: a fork that
    # lands while that thread starts `git` keeps the pipe `git` reports on open, and closing the second run
    # in one process then waits 300 s for it. Detecting in the main thread leaves nothing to race.
    settings = tmp_path / "clearml.conf"
    settings.write_text("sdk.development.vcs_repo_detect_async: false\n")
    monkeypatch.setenv("CLEARML_CONFIG_FILE", str(settings))
{% elif cookiecutter.logger == "neptune" %}


@pytest.fixture(autouse=True)
def offline_tracking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the tracker's records on this machine: no account or server needed."""
    monkeypatch.setenv("NEPTUNE_MODE", "debug")
{% elif cookiecutter.logger == "polyaxon" %}


@pytest.fixture(autouse=True)
def offline_tracking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the tracker's records on this machine, under ``tmp_path``: no account or server needed."""
    monkeypatch.setenv("POLYAXON_IS_OFFLINE", "true")
    monkeypatch.setenv("POLYAXON_OFFLINE_ROOT", str(tmp_path / "polyaxon"))
{% elif cookiecutter.logger == "wandb" %}


@pytest.fixture(autouse=True)
def offline_tracking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the tracker's records on this machine: no account or server needed."""
    monkeypatch.setenv("WANDB_MODE", "offline")
{% elif cookiecutter.logger == "visdom" %}


def start_visdom_server(env_path: Path, output: Path) -> tuple[subprocess.Popen, int]:
    """Start a Visdom server on a free local port; return it and its port once it listens.

    The port is free when chosen, but another program could take it before the server binds it: the
    server then exits, and another port is tried.
    """
    for _attempt in range(3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        # Not `python -m visdom.server`: that first downloads the web page's scripts, which the API does not need.
        command = [sys.executable, "-u", "-c", "from visdom.server.run_server import main; main()"]
        command += ["-port", str(port), "--hostname", "127.0.0.1", "-env_path", str(env_path)]
        with open(output, "w") as log:
            server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        # Printed once the server listens: then the port is its own, never another program's.
        while "You can navigate to" not in output.read_text():
            if server.poll() is not None:
                break  # it could not start, e.g. the port was taken meanwhile: try another
            if time.monotonic() > deadline:
                stop_server(server)
                pytest.fail(f"the Visdom server did not start within 60 s; its output:\n{output.read_text()}")
            time.sleep(0.2)
        else:
            return server, port
    pytest.fail(f"the Visdom server exited 3 times on start; its last output:\n{output.read_text()}")


def stop_server(server: subprocess.Popen) -> None:
    """Stop a server, forcing it after 10 s: a stuck server must not hang the tests."""
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=10)


@pytest.fixture(autouse=True)
def visdom_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A Visdom server on a free local port for the training runs to log to."""
    server, port = start_visdom_server(tmp_path / "visdom", tmp_path / "visdom.log")
    try:
        monkeypatch.setenv("VISDOM_SERVER_URL", "http://127.0.0.1")
        monkeypatch.setenv("VISDOM_PORT", str(port))
        yield
    finally:
        stop_server(server)
{% endif %}
