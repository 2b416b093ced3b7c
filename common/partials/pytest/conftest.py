{#- The generated tests' fixtures. TINY holds keys of every template's config.yaml, the eval keys of a
    template with an evaluator, and the keys a template's conftest.py sets in `tiny_extras` (dict items,
    one a line) before the include: only keys its own config.yaml has. -#}
{% import "flags.j2" as flags with context %}
"""Shared fixtures: a small, offline configuration built from config.yaml{{ ", and a local Visdom server" if cookiecutter.logger == "visdom" }}."""

{% if cookiecutter.logger == "visdom" %}
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
{% endif %}
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

PROJECT_DIR = Path(__file__).resolve().parents[1]


# Small, fast values for some of the keys of config.yaml.
TINY = {
    "dataset": "synthetic",
    "batch_size": 4,
{% if flags.eval_metric %}
    "eval_batch_size": 4,
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
def config(tmp_path: Path) -> SimpleNamespace:
    """config.yaml with synthetic data, two tiny epochs, one process and outputs under ``tmp_path``."""
    values = yaml.safe_load((PROJECT_DIR / "config.yaml").read_text())
    for hydra_key in ("defaults", "hydra"):
        values.pop(hydra_key, None)
    values.update(TINY)
    values.update(data_path=str(tmp_path / "data"), output_dir=str(tmp_path / "runs"), backend=None)
    return SimpleNamespace(**values)
{% if cookiecutter.logger in ["clearml", "neptune", "polyaxon", "wandb"] %}


@pytest.fixture(autouse=True)
{% if cookiecutter.logger in ["clearml", "polyaxon"] %}
def offline_tracking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the tracker's records on this machine, under ``tmp_path``: no account or server needed."""
{% else %}
def offline_tracking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the tracker's records on this machine: no account or server needed."""
{% endif %}
{% if cookiecutter.logger == "clearml" %}
    monkeypatch.setenv("CLEARML_OFFLINE_MODE", "1")
    monkeypatch.setenv("CLEARML_CACHE_DIR", str(tmp_path / "clearml"))
{% elif cookiecutter.logger == "neptune" %}
    monkeypatch.setenv("NEPTUNE_MODE", "debug")
{% elif cookiecutter.logger == "polyaxon" %}
    monkeypatch.setenv("POLYAXON_IS_OFFLINE", "true")
    monkeypatch.setenv("POLYAXON_OFFLINE_ROOT", str(tmp_path / "polyaxon"))
{% else %}
    monkeypatch.setenv("WANDB_MODE", "offline")
{% endif %}
{% elif cookiecutter.logger == "visdom" %}


@pytest.fixture(autouse=True)
def visdom_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A Visdom server on a free local port for the training runs to log to."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Not `python -m visdom.server`: that first downloads the web page's scripts, which the API does not need.
    command = [sys.executable, "-c", "from visdom.server.run_server import main; main()"]
    command += ["-port", str(port), "--hostname", "127.0.0.1", "-env_path", str(tmp_path / "visdom")]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the Visdom server did not start") from None
                time.sleep(0.2)
        monkeypatch.setenv("VISDOM_SERVER_URL", "http://127.0.0.1")
        monkeypatch.setenv("VISDOM_PORT", str(port))
        yield
    finally:
        server.terminate()
        server.wait()
{% endif %}
