"""This repository's own code (hooks, tests) follows the same lint and format rules as generated code."""

import subprocess
import sys

from helpers import REPO


def test_repository_python_is_ruff_clean() -> None:
    for args in (["check", "."], ["format", "--check", "."]):
        proc = subprocess.run([sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True)
        assert proc.returncode == 0, f"ruff {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}"
