"""This repository's own code and scripts: lint and format rules, the README's fork example, the demo."""

import os
import re
import shutil
import subprocess
import sys

import pytest
from answers import REPO
from projects import pytest_outcomes


def test_repository_python_is_ruff_clean() -> None:
    for args in (["check", "."], ["format", "--check", "."]):
        proc = subprocess.run([sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True)
        assert proc.returncode == 0, f"ruff {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}"


def test_readme_pytest_cookies_example_passes(tmp_path) -> None:
    """The README's example for forks is real: it runs, against this repository, and passes."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Test a fork with pytest-cookies", 1)[1]
    example = section.split("```python\n", 1)[1].split("\n```", 1)[0]
    example = example.replace("Path(__file__).resolve().parents[1]", f"Path({str(REPO)!r})")
    (tmp_path / "test_my_fork.py").write_text(example)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_my_fork.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and pytest_outcomes(proc.stdout) == {"passed": 2}, proc.stdout + proc.stderr


@pytest.mark.slow  # clones and trains
def test_demo_builds_only_the_base_venv_and_trains_the_default_project(tmp_path) -> None:
    """`bash scripts/demo.sh` from a fresh clone sets up only the venv the demo runs in (.venv), never the
    TPU or tracker venvs (torch_xla, about 0.8 GB of trackers), then trains the default project offline.

    The clone reuses this checkout's .venv (same lock, so env.sh keeps it); any other venv it tried to
    create would fail at once: PYTHON, which env.sh makes new venvs with, is `false` here.
    """
    clone = tmp_path / "clone"
    shutil.copytree(
        REPO, clone, symlinks=True, ignore=shutil.ignore_patterns(".git", ".venv*", "demo", "__pycache__", ".*_cache")
    )
    (clone / ".venv").symlink_to(REPO / ".venv")
    proc = subprocess.run(
        ["bash", "scripts/demo.sh"],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHON": "false", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    )
    output = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, f"the demo failed (exit {proc.returncode}):\n{output}"
    made = sorted(path.name for path in clone.glob(".venv*"))
    assert made == [".venv"], f"the demo must set up only the base venv, it set up {made}"
    (run_dir,) = (clone / "demo" / "vision_classification" / "logs").iterdir()
    log = (run_dir / "training.log").read_text()
    assert "Epoch 2 - eval:" in log, f"the demo's project did not train two epochs:\n{log}"
    assert f"Run directory: {run_dir}" in proc.stdout, "the demo ends by naming the run directory"
    reached = re.search(r"Reached: accuracy=([0-9.]+)", proc.stdout)
    assert reached, "the demo ends by saying what the run reached (its last evaluation)"
    assert float(reached[1]) >= 0.5, f"the demo must learn visibly: {reached[0]} (chance is 0.1)"
