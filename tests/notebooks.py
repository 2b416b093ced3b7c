"""Generated notebooks read and run as their user would: the cells under a heading, a whole notebook executed."""

import json
import os
import shutil
from pathlib import Path

import nbformat
import yaml
from answers import REPO
from projects import OFFLINE, run_cmd


def cell_under(notebook, heading: str) -> nbformat.NotebookNode:
    """The code cell right after a markdown cell that starts with ``heading`` (found by content, not index)."""
    index = next(i for i, cell in enumerate(notebook.cells) if cell.source.startswith(heading))
    cell = notebook.cells[index + 1]
    assert cell.cell_type == "code", f"a code cell follows {heading!r}"
    return cell


def setup_cell(notebook) -> nbformat.NotebookNode:
    return cell_under(notebook, "## Set up the runtime")


def read_notebook(project: Path) -> nbformat.NotebookNode:
    path = project / f"{project.name}.ipynb"
    assert path.is_file(), f"no notebook {path.name} at the project root"
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)  # the current v4 schema
    return notebook


def run_notebook_alone(project: Path, tmp_path: Path, python: str, env: dict | None = None, **overrides) -> Path:
    """Run the project's notebook alone in ``tmp_path`` (as uploaded to Colab) with ``python``'s kernel,
    after the edits a user makes in the config.yaml cell for a quick offline run; return the executed notebook.
    """
    notebook = tmp_path / f"{project.name}.ipynb"
    shutil.copy(project / notebook.name, notebook)
    env = {"HF_HUB_OFFLINE": "1", "PATH": f"{Path(python).parent}{os.pathsep}{os.environ['PATH']}", **(env or {})}
    config = yaml.safe_load((project / "config.yaml").read_text())
    small = {**OFFLINE, "train_epoch_length": 2, "eval_epoch_length": 1, "log_every_iters": 2, **overrides}
    # JSON is YAML: None is written null, as in config.yaml.
    edits = [f"{key}={json.dumps(value)}" for key, value in small.items() if key in config or key == "master_port"]
    run_cmd([python, str(REPO / "tests" / "run_notebook.py"), str(notebook), *edits], tmp_path, 900, env)
    return tmp_path / "executed.ipynb"
