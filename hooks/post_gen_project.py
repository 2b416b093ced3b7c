"""Post-generation hook shared by every template: drop unchosen files, write the Colab notebook.

Runs in the generated project's directory with cookiecutter's Python: standard library only (no
nbformat), so the notebook is written as plain nbformat-v4 JSON. Its output must be deterministic:
cruft re-runs this hook to compute update diffs, so the same answers give a byte-identical notebook.
The answers arrive as JSON on the last line; everything above it is plain Python the tests import.
"""

import json
import shlex
import shutil
from pathlib import Path

# Notebook-level metadata that opens the notebook on the right runtime, written the way each service
# saves it. Colab's TPU v2-8 ("V28") was retired in September 2025: its free tier has a TPU v5e-1
# ("V5E1", one chip). Kaggle reads its own block: its TPU v5e-8 has the 8 chips of the TPU rule.
RUNTIMES = {
    "xla-tpu": {
        "accelerator": "TPU",
        "colab": {"provenance": [], "gpuType": "V5E1"},
        "kaggle": {"accelerator": "tpuV5e8", "isInternetEnabled": True, "isGpuEnabled": False},
    },
    "nccl": {"accelerator": "GPU", "colab": {"provenance": [], "gpuType": "T4"}},
    "gloo": {"colab": {"provenance": []}},
}

# What the first cell says about the runtime, after the project's description and options.
RUNTIME_NOTES = {
    "xla-tpu": (
        "Runtime: Colab opens this notebook on its free TPU v5e-1, one chip, so training runs on one replica"
        " (on a paid tier, Runtime > Change runtime type > a TPU v6e-1 is faster, and also one chip)."
        " For the 8 replicas the project is written for, open it on Kaggle (TPU v5e-8, internet on) or run the"
        " project on a TPU VM."
    ),
    "nccl": "Runtime: a GPU (Colab's free tier gives a T4).",
    "gloo": "Runtime: any; training runs on the CPU.",
}

# The notebook's own Python cells are files of common/notebook/, linked into each template's project tree
# as `.notebook/<name>` (a real folder of symlinked files: cookiecutter renders a symlinked file, never a
# symlinked folder's files). So cookiecutter renders them with the answers and the Jinja of every other
# project file (flags.j2's TPU pins, commands.j2's training command), and they are Python that ruff
# checks in the notebook. This hook reads them, then removes the folder: the project never keeps it.
NOTEBOOK_CELLS = ".notebook"
# The files, in the order of their cells in the notebook: the runtime's set-up (TPU, or GPU and CPU), then,
# after the project's files and the install, Google Drive (runs that survive a disconnect) and training.
CELL_FILES = ["runtime_tpu.py", "runtime.py", "drive.py", "train.py"]


def take_cells(root: Path) -> dict[str, str]:
    """The rendered cells (file name -> cell text), read from the project's `.notebook/`, which is removed."""
    folder = root / NOTEBOOK_CELLS
    found = sorted(path.name for path in folder.iterdir())
    if found != sorted(CELL_FILES):
        raise RuntimeError(f"{NOTEBOOK_CELLS}/ holds {found}, not the notebook's cells {CELL_FILES}")
    # A cell's text is its file's: the file's last newline (ruff wants one) ends the cell's last line.
    cells = {name: (folder / name).read_text(encoding="utf-8").removesuffix("\n") for name in CELL_FILES}
    shutil.rmtree(folder)
    return cells


# Each CI service's files (the `ci` answer): the others are removed.
CI_FILES = {"github": ".github", "gitlab": ".gitlab-ci.yml"}


def remove_unchosen(ctx: dict, root: Path) -> None:
    """Delete the files of answers not chosen; of a file written once per answer (the command line of each argparser,
    the module of each tracker), keep the chosen one under its project name."""
    for service, name in CI_FILES.items():
        if ctx["ci"] != service:
            path = root / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    if not ctx["include_test"]:
        shutil.rmtree(root / "tests")
    machinery = root / "machinery"
    keep_one(machinery / "command_lines", f"{ctx['argparser']}.py", machinery / "cli.py")
    training = machinery / "training"
    keep_one(training / "trackers", f"{ctx['logger']}.py", training / "tracker.py")
    if ctx["logger"] == "none":
        (training / "tracking.py").unlink()
    if ctx["backend"] != "xla-tpu":
        shutil.rmtree(machinery / "tpu")
        if ctx["include_test"]:
            (root / "tests" / "test_xla.py").unlink()
    if not ctx["_eval_metric"]:  # a template without an evaluator (the GAN): nothing to score or average
        for module in ("training/evaluation.py", "training/ema.py", "tpu/metrics.py"):
            (machinery / module).unlink(missing_ok=True)
    if ctx["scheduler"] != "slurm":
        (root / "slurm.sh").unlink()
    if ctx.get("sweep") != "optuna":  # a template without an eval metric (the GAN) does not ask
        (root / "sweep.py").unlink()
        (root / "sweep.yaml").unlink(missing_ok=True)
        shutil.rmtree(machinery / "sweeps", ignore_errors=True)


def keep_one(folder: Path, chosen: str, kept_as: Path) -> None:
    """Move ``folder/chosen`` (if the answer has one) to ``kept_as``, and remove ``folder`` with the others."""
    if (folder / chosen).is_file():
        (folder / chosen).rename(kept_as)
    shutil.rmtree(folder)


# Files of the project's repository that a notebook run has no use for (Colab runs no CI, no git hooks
# and no Slurm jobs): the notebook does not write them.
NOT_IN_NOTEBOOK = {".github", ".gitlab-ci.yml", ".pre-commit-config.yaml", "slurm.sh"}


def project_files(root: Path, notebook: Path) -> list[Path]:
    """Every file of the project the notebook writes, in a stable order (paths relative to root): all but
    the notebook itself and the repository's CI and pre-commit files."""
    return sorted(
        p.relative_to(root)
        for p in root.rglob("*")
        if p.is_file() and p != notebook and p.relative_to(root).parts[0] not in NOT_IN_NOTEBOOK
    )


# The template's cookiecutter.json, rendered with the answers (a symlink in the template's project tree):
# its defaults, the ones computed from earlier answers included, evaluated as cookiecutter evaluates them.
DEFAULTS_FILE = ".cookiecutter-defaults.json"


def regenerate_args(ctx: dict, defaults: dict) -> list[str]:
    """``key=value`` for every answer that differs from the template's default, in the questions' order.

    A choice's default is its first value; yes/no answers are written ``yes``/``no``; every value is
    quoted for the shell where it needs it. Private keys (``_...``) are not questions.
    """
    args = []
    for key, default in defaults.items():
        if key.startswith("_") or key not in ctx:
            continue
        default = default[0] if isinstance(default, list) else default
        answer = ctx[key]
        if isinstance(default, bool):
            if bool(answer) != default:
                args.append(f"{key}={'yes' if answer else 'no'}")
        elif str(answer) != str(default):
            args.append(shlex.quote(f"{key}={answer}"))
    return args


def with_regenerate_command(readme: str, ctx: dict, defaults: dict) -> str:
    """The README with its "Generate it again" command completed by the answers that differ from ``defaults``.

    The README's Jinja writes ``cookiecutter <collection> --directory <template> --no-input``, the one
    line that starts with ``cookiecutter`` and ends with ``--no-input``.
    """
    (line,) = [
        line for line in readme.splitlines() if line.startswith("cookiecutter ") and line.endswith(" --no-input")
    ]
    command = " ".join([line, *regenerate_args(ctx, defaults)])
    return readme.replace(f"\n{line}\n", f"\n{command}\n", 1)


def write_regenerate_command(ctx: dict, root: Path) -> None:
    """Complete the README's "Generate it again" command; delete the rendered defaults it was made from.

    Under cruft, which re-runs this hook, the same answers give the same command: nothing here depends
    on where the template was read from.
    """
    defaults_file = root / DEFAULTS_FILE
    defaults = json.loads(defaults_file.read_text(encoding="utf-8"))
    defaults_file.unlink()
    readme = root / "README.md"
    readme.write_text(with_regenerate_command(readme.read_text(encoding="utf-8"), ctx, defaults), encoding="utf-8")


def readme_parts(root: Path) -> tuple[str, str, str]:
    """The README's opening paragraph, its "Generated from" line (the answers that shape the project) and
    install commands: one source for both documents. (The training command is the training cell's own:
    the README's macro, commands.j2's ``train_command``, rendered into it.)"""
    readme = (root / "README.md").read_text(encoding="utf-8")
    paragraphs = [paragraph.strip() for paragraph in readme.split("\n\n")]
    intro = paragraphs[1]
    (answers,) = [paragraph for paragraph in paragraphs if paragraph.startswith("Generated from ")]
    return intro, answers.replace("\n", " "), _first_bash_block(readme, "## Install")


def _first_bash_block(readme: str, heading: str) -> str:
    section = readme.split(f"\n{heading}\n", 1)[1]
    return section.split("```bash\n", 1)[1].split("\n```", 1)[0].strip()


def install_cell(install: str) -> str:
    """The README's pip commands as Python that runs each with the notebook's own interpreter.

    Not ``%pip``: a failed ``%pip install`` prints its error and lets the next cells run, and training
    then fails far from the cause. ``check_call`` stops the notebook at the failed install.
    """
    calls = []
    for line in install.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        program, *args = shlex.split(line)
        if program != "pip":
            raise ValueError(f"the README's install block may hold pip commands only, not {line!r}")
        calls.append(
            f"subprocess.check_call([sys.executable, {', '.join(json.dumps(a) for a in ['-m', 'pip', *args])}])"
        )
    header = "# The README's install commands, with this notebook's Python: a failed install stops the notebook here."
    return "\n".join([header, "import subprocess", "import sys", "", *calls])


def _lines(text: str) -> list[str]:
    """Notebook sources are stored as lists of lines, each but the last ending in a newline."""
    return text.splitlines(keepends=True)


def _cell(index: int, kind: str, text: str) -> dict:
    cell = {"cell_type": kind, "id": f"cell-{index:03d}", "metadata": {}, "source": _lines(text)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def build_notebook(ctx: dict, root: Path, name: str, code: dict[str, str]) -> dict:
    """The project as a notebook: description, runtime set-up, one cell per file, install, train.

    ``code``: the rendered cells of ``.notebook/`` (``take_cells``), by file name.
    """
    intro, answers, install = readme_parts(root)
    files = project_files(root, root / name)
    folders = sorted({str(path.parent) for path in files if str(path.parent) != "."})

    cells = [
        ("markdown", f"# {ctx['project_name']}\n\n{intro}\n\n{answers}\n\n{RUNTIME_NOTES[ctx['backend']]}"),
        ("markdown", "## Set up the runtime"),
        ("code", code["runtime_tpu.py" if ctx["backend"] == "xla-tpu" else "runtime.py"]),
        ("markdown", "## Write the project files\n\nEach cell below writes one file of the project."),
    ]
    if folders:
        cells.append(
            ("code", "import os\n\n" + "\n".join(f"os.makedirs({json.dumps(f)}, exist_ok=True)" for f in folders))
        )
    for path in files:
        text = (root / path).read_text(encoding="utf-8")
        # %%writefile writes the cell body as it is; the body's last newline is the file's last.
        cells.append(("code", f"%%writefile {path.as_posix()}\n{text}"))
    cells += [
        ("markdown", "## Install the requirements"),
        ("code", install_cell(install)),
        ("markdown", "## Keep the runs on Google Drive"),
        ("code", code["drive.py"]),
        ("markdown", "## Train\n\nThe command the project's README gives."),
        ("code", code["train.py"]),
    ]
    return {
        "cells": [_cell(i, kind, text) for i, (kind, text) in enumerate(cells)],
        "metadata": {
            **RUNTIMES[ctx["backend"]],
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def write_notebook(ctx: dict, root: Path, code: dict[str, str]) -> Path:
    """Write ``<project_slug>.ipynb`` at the project root, byte-identical for the same answers."""
    name = f"{ctx['project_slug']}.ipynb"
    notebook = build_notebook(ctx, root, name, code)
    path = root / name
    path.write_text(json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def main(ctx: dict, root: Path) -> None:
    remove_unchosen(ctx, root)
    write_regenerate_command(ctx, root)
    write_notebook(ctx, root, take_cells(root))  # the cells' folder removed before the project's files are listed


if __name__ == "__main__":
    main(json.loads(r"""{{ cookiecutter | tojson }}"""), Path.cwd())
