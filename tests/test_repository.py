"""This repository's own code (hooks, tests) follows the same lint and format rules as generated code."""

import subprocess
import sys

from helpers import REPO


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
    assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout + proc.stderr
