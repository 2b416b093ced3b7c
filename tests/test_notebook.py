"""The post-generation hook writes a valid, self-contained Colab notebook that is the project."""

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from answers import REPO, TEMPLATES, pairwise, resolved_launcher, template_options, valid
from environments import PYTHON
from notebooks import cell_under, read_notebook, run_notebook_alone, setup_cell
from projects import OFFLINE, free_port, notebook_training_command, readme_block, readme_train_command, run_cmd

BACKENDS = ["nccl", "gloo", "xla-tpu"]
# Files for the project's repository (CI, pre-commit hooks), not written by the notebook.
REPOSITORY_ONLY = {".github", ".gitlab-ci.yml", ".pre-commit-config.yaml"}
# The runtime each backend's notebook asks Colab for: TPU v5e-1 (free tier; the v2-8 was retired in
# September 2025), a T4 GPU, or the default CPU runtime.
COLAB_RUNTIME = {
    "xla-tpu": ("TPU", "V5E1"),
    "nccl": ("GPU", "T4"),
    "gloo": (None, None),
}
# Kaggle's own block: only TPU notebooks ask for its TPU v5e-8 (8 chips, the 8 replicas of the TPU
# rule), with internet on for the set-up cell's pip install.
KAGGLE_RUNTIME = {
    "xla-tpu": {"accelerator": "tpuV5e8", "isInternetEnabled": True, "isGpuEnabled": False},
    "nccl": None,
    "gloo": None,
}


def written_files(notebook) -> dict[str, str]:
    """What the %%writefile cells would write: path -> text."""
    files = {}
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.source.startswith("%%writefile "):
            head, _, body = cell.source.partition("\n")
            path = head.removeprefix("%%writefile ")
            assert path not in files, f"{path} is written twice"
            files[path] = body
    return files


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_notebook_is_valid_and_opens_on_the_backends_runtime(baked, template: str, backend: str) -> None:
    project = baked(template, backend=backend)
    notebook = read_notebook(project)
    accelerator, gpu_type = COLAB_RUNTIME[backend]
    assert notebook.metadata.get("accelerator") == accelerator, "Colab's accelerator"
    assert notebook.metadata["colab"].get("gpuType") == gpu_type, "the runtime Colab opens the notebook on"
    assert notebook.metadata["colab"]["provenance"] == []
    assert notebook.metadata.get("kaggle") == KAGGLE_RUNTIME[backend], "Kaggle's block (TPU notebooks only)"
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    runtime = {"xla-tpu": "TPU", "nccl": "GPU", "gloo": "CPU"}[backend]
    assert re.search(rf"opens on a\s{runtime} runtime\)", (project / "README.md").read_text()), "the README names it"


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_notebook_cells_write_every_file_byte_for_byte(baked, template: str, backend: str) -> None:
    project = baked(template, backend=backend, include_test=True, argparser="hydra")
    notebook = read_notebook(project)
    files = written_files(notebook)
    on_disk = {
        p.relative_to(project).as_posix(): p.read_text()
        for p in project.rglob("*")
        if p.is_file() and p.suffix != ".ipynb"
    }
    # The repository's CI and pre-commit files are of no use in a notebook run: it does not write them.
    repository_only = {path for path in on_disk if path.split("/")[0] in REPOSITORY_ONLY}
    assert repository_only == {".github/workflows/ci.yml", ".pre-commit-config.yaml"}, sorted(repository_only)
    on_disk = {path: text for path, text in on_disk.items() if path not in repository_only}
    assert sorted(files) == sorted(on_disk), "the notebook must write exactly the project's files"
    for path, text in on_disk.items():
        assert files[path] == text, f"the notebook writes a different {path}"

    sources = [cell.source for cell in notebook.cells]
    kinds = [cell.cell_type for cell in notebook.cells]
    title = (project / "README.md").read_text().splitlines()[0]  # "# <project_name>"
    assert kinds[0] == "markdown" and sources[0].startswith(f"{title}\n")
    assert f"backend `{backend}`" in sources[0]
    first_write = next(i for i, s in enumerate(sources) if s.startswith("%%writefile"))
    makedirs = next(i for i, s in enumerate(sources) if 'os.makedirs("tests", exist_ok=True)' in s)
    assert makedirs < first_write, "folders must exist before the cells that write into them"
    install = cell_under(notebook, "## Install the requirements").source.splitlines()
    assert install[-1] == 'subprocess.check_call([sys.executable, "-m", "pip", "install", "-r", "requirements.txt"])'
    argv, env = readme_train_command(project, python="python")
    command = " ".join([*(f"{k}={v}" for k, v in env.items()), *argv])
    train = cell_under(notebook, "## Train").source
    assert notebook_training_command(train) == command, "the training cell: the README's command"
    assert sources[-1] == train, "training is the last cell"


# Answer sets whose training commands differ in form: a TPU one, a spawned fire one, torchrun with Hydra.
TRAINING_ANSWERS = [
    {"backend": "xla-tpu"},
    {"backend": "gloo", "launcher": "spawn", "argparser": "fire"},
    {"backend": "gloo", "launcher": "torchrun", "argparser": "hydra"},
]


@pytest.mark.parametrize("answers", TRAINING_ANSWERS, ids=["tpu", "spawn-fire", "torchrun-hydra"])
def test_training_cell_runs_the_readmes_training_command(baked, answers: dict) -> None:
    """One source, commands.j2's train_command: the README's "## Train" block and the training cell's COMMAND."""
    project = baked(**valid({"launcher": "auto", **answers}))
    train = cell_under(read_notebook(project), "## Train").source
    assert notebook_training_command(train) == readme_block(project, "## Train")


def ruff(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=folder, capture_output=True, text=True)


# The cells rendered from common/notebook/ (the backend's set-up, Drive, training), by the heading they follow.
RENDERED_CELLS = ["## Set up the runtime", "## Keep the runs on Google Drive", "## Train"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_notebook_cells_are_ruff_clean_and_a_lint_error_in_one_fails(baked, tmp_path: Path, backend: str) -> None:
    """With the project's ruff settings (which leave *.ipynb out of `ruff check .`: the notebook is named), as
    tests/test_generation.py checks every bake; the same check fails on an error put into each rendered cell
    (ruff reads them: it skips only the %%writefile cells)."""
    project = baked(backend=backend)
    name = f"{project.name}.ipynb"
    for args in (["check", "--no-cache"], ["format", "--no-cache", "--check", "--diff"]):
        proc = ruff(project, *args, name)
        assert proc.returncode == 0, f"ruff {args[0]} on the {backend} notebook:\n{proc.stdout}{proc.stderr}"
    shutil.copy(project / "pyproject.toml", tmp_path)
    for heading in RENDERED_CELLS:
        notebook = read_notebook(project)
        cell_under(notebook, heading).source += "\nprint(not_defined)"
        nbformat.write(notebook, tmp_path / name)
        proc = ruff(tmp_path, "check", "--no-cache", name)
        assert proc.returncode == 1 and "F821" in proc.stdout, f"{heading}: {proc.stdout}{proc.stderr}"


def test_install_cell_runs_the_readme_install_commands(bake) -> None:
    """visdom needs an older setuptools to build: the README says so, and the notebook installs the same way."""
    project = bake(logger="visdom")
    install = cell_under(read_notebook(project), "## Install the requirements").source
    readme = (project / "README.md").read_text()
    assert 'pip install "setuptools<81"\npip install --no-build-isolation -r requirements.txt' in readme
    calls = [line for line in install.splitlines() if line.startswith("subprocess.check_call(")]
    assert calls == [
        'subprocess.check_call([sys.executable, "-m", "pip", "install", "setuptools<81"])',
        'subprocess.check_call([sys.executable, "-m", "pip", "install", "--no-build-isolation", "-r", '
        '"requirements.txt"])',
    ]


# Every template with each answer set of the pairwise matrix (every value of every option appears).
ANSWER_MATRIX = [(template, valid(combo)) for template in TEMPLATES for combo in pairwise(template_options(template))]


@pytest.mark.parametrize(("template", "answers"), ANSWER_MATRIX)
def test_same_answers_give_a_byte_identical_project(baked, bake, template: str, answers: dict) -> None:
    """cruft's update diffs rely on it: generating twice with the same answers gives the same bytes (the
    first is the bake test_generation.py's checks read, when this worker made it already)."""
    first, second = baked(template, **answers), bake(template, **answers)
    tree = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert tree == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for path in tree:
        assert (first / path).read_bytes() == (second / path).read_bytes(), f"{path} differs between two bakes"
    assert str(first.parent) not in (first / f"{first.name}.ipynb").read_text(), "no absolute paths"


def test_colab_badge_only_when_a_github_repository_is_given(bake) -> None:
    with_repo = bake(github_repo="octo/my-model")
    badge = "https://colab.research.google.com/github/octo/my-model/blob/main/vision_classification.ipynb"
    assert badge in (with_repo / "README.md").read_text()
    assert "colab-badge.svg" not in (bake() / "README.md").read_text()


def test_hooks_need_only_the_standard_library() -> None:
    """Hooks run with whatever Python runs cookiecutter: nbformat, yaml and torch may be absent."""
    for hook in sorted((REPO / "hooks").glob("*.py")):
        tree = ast.parse(hook.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module]
            for name in names:
                assert name.split(".")[0] in sys.stdlib_module_names, f"{hook.name} imports {name}"


@pytest.mark.parametrize("template", TEMPLATES)
def test_tpu_setup_cell_pins_what_requirements_txt_pins(baked, template: str) -> None:
    """Both take the releases from flags.j2: the cell installs requirements.txt's pins (torchvision's where the
    project has it) and keeps a runtime's pair of its `# also supported:` line."""
    project = baked(template, backend="xla-tpu")
    tree = ast.parse(setup_cell(read_notebook(project)).source)
    constants = [node for node in tree.body if isinstance(node, ast.Assign) and node.targets[0].id.isupper()]
    assigned = {node.targets[0].id: ast.literal_eval(node.value) for node in constants}
    lines = (project / "requirements.txt").read_text().splitlines()
    pins = ("torch==", "torch_xla", "torchvision==")
    pinned = [line.split("#")[0].strip() for line in lines if line.startswith(pins)]
    also = [spec for line in lines if line.startswith("# also supported:") for spec in line.split(":", 1)[1].split()]

    def releases(specs: list[str]) -> dict[str, str]:
        return {spec.split("==")[0].split("[")[0]: spec.split("==")[1] for spec in specs}

    assert assigned["PINNED"] == pinned, "the cell installs requirements.txt's pins"
    assert assigned["SUPPORTED"] == [releases(pinned), releases(also)], "the pinned releases, then the other pair"
    assert ("torchvision" in assigned["SUPPORTED"][0]) == (template != "text-classification")


# Runs a TPU set-up cell as if on another Python, with pip replaced by a stand-in that prints its arguments.
SIMULATED_RUNTIME = """\
import subprocess
import sys

sys.version_info = {version!r}
subprocess.check_call = lambda argv: print("pip would run:", argv[3:])
"""


@pytest.mark.parametrize("version", [(3, 9, 18, "final", 0), (3, 14, 0, "final", 0)])
def test_tpu_setup_cell_stops_with_one_sentence_on_a_python_without_torch_xla_wheels(bake, version: tuple) -> None:
    code = setup_cell(read_notebook(bake(backend="xla-tpu"))).source
    simulated = SIMULATED_RUNTIME.format(version=version) + code
    proc = subprocess.run([sys.executable, "-c", simulated], capture_output=True, text=True)
    assert proc.returncode == 1, f"the set-up cell must stop on Python {version[:2]}: {proc.stdout}{proc.stderr}"
    assert "pip would run" not in proc.stdout, "nothing is installed on a Python without torch_xla wheels"
    message = proc.stderr.strip()
    assert message.count("\n") == 0 and message.count(": ") == 1, f"one sentence, no traceback: {message!r}"
    assert f"runs Python {version[0]}.{version[1]}:" in message and "3.10 to 3.13" in message, message


def test_tpu_setup_cell_installs_torch_xla_where_it_is_missing(bake) -> None:
    """This venv has torch 2.9.0 and no torch_xla (like a runtime without it): the cell installs the pins."""
    code = setup_cell(read_notebook(bake(backend="xla-tpu"))).source
    simulated = SIMULATED_RUNTIME.format(version=tuple(sys.version_info)) + code
    proc = subprocess.run([sys.executable, "-c", simulated], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    pins = "['install', 'torch==2.9.0', 'torch_xla[tpu]==2.9.0', 'torchvision==0.24.0']"
    assert proc.stdout.strip() == f"pip would run: {pins}", "the pins of requirements.txt, torchvision's with them"


# What a runtime has installed, as importlib.metadata reports it (None: not installed).
INSTALLED = """\
import importlib.metadata

_installed = {installed!r}


def _version(package):
    if _installed.get(package) is None:
        raise importlib.metadata.PackageNotFoundError(package)
    return _installed[package]


importlib.metadata.version = _version
"""
KAGGLE = {"torch": "2.8.0+cpu", "torch_xla": "2.8.0", "torchvision": "0.23.0+cpu"}  # its TPU image's releases


@pytest.mark.parametrize(
    ("template", "installed", "installs"),
    [
        ("vision-classification", KAGGLE, False),  # the other supported release: kept
        ("text-classification", {"torch": "2.8.0", "torch_xla": "2.8.0"}, False),  # no torchvision needed
        ("vision-classification", {**KAGGLE, "torchvision": "0.24.0"}, True),  # a torchvision of another torch
        ("text-classification", {"torch": "2.9.0", "torch_xla": "2.8.0"}, True),  # a torch_xla of another torch
        ("gan", {"torch": "2.7.1", "torch_xla": "2.7.0"}, True),  # an unsupported release
    ],
)
def test_tpu_setup_cell_keeps_a_supported_release_and_installs_the_pins_over_any_other(
    bake, template: str, installed: dict, installs: bool
) -> None:
    code = setup_cell(read_notebook(bake(template, backend="xla-tpu"))).source
    simulated = SIMULATED_RUNTIME.format(version=tuple(sys.version_info)) + INSTALLED.format(installed=installed) + code
    proc = subprocess.run([sys.executable, "-c", simulated], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    if installs:
        assert proc.stdout.startswith("pip would run: ['install', 'torch==2.9.0', 'torch_xla[tpu]==2.9.0'"), (
            f"{installed}: not a supported release, the cell must install the pinned one:\n{proc.stdout}"
        )
    else:
        assert proc.stdout.strip().endswith("already installed: nothing to do."), (
            f"{installed} is supported: the cell must keep it, not reinstall torch:\n{proc.stdout}"
        )


# GPU and CPU notebooks run on this CPU too (nccl's default is one process, on the CPU without a GPU);
# between them every launcher runs: one process, spawned processes and torchrun.
CPU_NOTEBOOKS = [
    ("vision-classification", {"backend": "nccl"}),
    ("text-classification", {"backend": "gloo", "launcher": "spawn"}),
    ("gan", {"backend": "gloo", "launcher": "torchrun"}),
]


@pytest.mark.slow  # runs notebooks
@pytest.mark.parametrize(("template", "answers"), CPU_NOTEBOOKS)
def test_gpu_and_cpu_notebooks_run_top_to_bottom_on_the_cpu(bake, tmp_path: Path, template: str, answers: dict) -> None:
    project = bake(template, **answers)
    executed = nbformat.read(run_notebook_alone(project, tmp_path, PYTHON, master_port=int(free_port())), as_version=4)
    setup_output = "".join(out.get("text", "") for out in setup_cell(executed).outputs)
    assert "GPUs visible: 0" in setup_output, setup_output
    assert (tmp_path / "main.py").read_bytes() == (project / "main.py").read_bytes()
    (run_dir,) = (tmp_path / "logs").iterdir()
    log = (run_dir / "training.log").read_text()
    world = 1 if answers.get("launcher", "auto") == "auto" else 2
    assert f"World size: {world}" in log, log
    assert list(run_dir.glob("training_checkpoint_*.pt")), f"no training checkpoint in {run_dir}"


@pytest.mark.slow  # runs a notebook
def test_a_failed_install_stops_the_notebook_before_training(bake, tmp_path: Path) -> None:
    """A requirement that cannot be installed (offline: --no-index) fails the install cell, and no later cell runs."""
    project = bake(backend="gloo")
    notebook = nbformat.read(project / f"{project.name}.ipynb", as_version=4)
    for cell in notebook.cells:
        if cell.source.startswith("%%writefile requirements.txt\n"):
            cell.source += "--no-index\nno-such-package-ignite-templates==0.0.1\n"
    path = tmp_path / f"{project.name}.ipynb"
    nbformat.write(notebook, path)
    proc = subprocess.run(
        [PYTHON, str(REPO / "tests" / "run_notebook.py"), str(path)], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode != 0, "a notebook whose install fails must stop with an error"
    assert "CalledProcessError" in proc.stderr and "pip" in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "logs").exists(), "the training cell ran after the failed install"


# Answer sets whose "Generated from" line differs: each shaping answer on and off.
ANSWERS_LINES = [
    {"launcher": "none", "logger": "none"},
    {"launcher": "torchrun", "backend": "gloo", "logger": "mlflow", "sweep": "optuna", "scheduler": "slurm"},
    {"backend": "xla-tpu", "argparser": "hydra"},
]


@pytest.mark.parametrize("answers", ANSWERS_LINES, ids=["one-process", "torchrun-mlflow-sweep-slurm", "tpu-hydra"])
def test_notebook_shows_the_readmes_answers_line(bake, answers: dict) -> None:
    """One list of the answers a project was made with: the README's "Generated from" line, quoted by the
    notebook's first cell; it names every answer that shapes the run."""
    project = bake(**valid({"launcher": "auto", "backend": "nccl", **answers}))
    readme = (project / "README.md").read_text()
    (line,) = [p.replace("\n", " ") for p in readme.split("\n\n") if p.startswith("Generated from ")]
    first_cell = read_notebook(project).cells[0].source
    assert line in first_cell, f"the notebook's first cell quotes the README's answers line: {line!r}"
    context = {"argparser": "argparse", "backend": "nccl", "logger": "none", **answers}
    launcher = resolved_launcher({"launcher": "auto", **context})
    for answer in (f"argparser `{context['argparser']}`", f"backend `{context['backend']}`", f"launcher `{launcher}`"):
        assert answer in line, f"the answers line names {answer}"
    assert (f"logger `{context['logger']}`" in line) == (context["logger"] != "none")
    assert ("sweep `optuna`" in line) == (answers.get("sweep") == "optuna")
    assert ("scheduler `slurm`" in line) == (answers.get("scheduler") == "slurm")


@pytest.mark.slow  # runs a notebook twice
def test_an_interrupted_training_cell_stops_cleanly_and_running_the_notebook_again_continues(
    bake, tmp_path: Path
) -> None:
    project = bake(backend="gloo")
    notebook = tmp_path / f"{project.name}.ipynb"
    shutil.copy(project / notebook.name, notebook)
    edits = [f"{key}={value}" for key, value in {**OFFLINE, "max_epochs": 2, "train_epoch_length": 8}.items()]
    edits = [edit for edit in edits if edit.split("=")[0] in yaml.safe_load((project / "config.yaml").read_text())]
    # The stop button, once iteration 3 is trained.
    run_cmd(
        [PYTHON, str(REPO / "tests" / "run_notebook.py"), str(notebook), *edits, "interrupt_at_iteration=3"],
        tmp_path,
        900,
    )
    (run_dir,) = (tmp_path / "logs").iterdir()
    stopped = yaml.safe_load((run_dir / "status.yaml").read_text())
    assert stopped["status"] == "stopped" and stopped["reason"] == "SIGINT", stopped
    assert (run_dir / f"training_checkpoint_{stopped['iteration']}.pt").is_file()

    # "Run all" again: the notebook rewrites the same files and continues the run.
    run_cmd([PYTHON, str(REPO / "tests" / "run_notebook.py"), str(notebook), *edits], tmp_path, 900)
    assert list((tmp_path / "logs").iterdir()) == [run_dir]
    log = (run_dir / "training.log").read_text()
    assert f"from logs/{run_dir.name}/training_checkpoint_{stopped['iteration']}.pt" in log, log[-3000:]
    assert yaml.safe_load((run_dir / "status.yaml").read_text())["status"] == "finished"
    iterations = [int(i) for i in re.findall(r" - iteration (\d+):", log)]
    assert iterations == list(range(1, 17)), "every iteration trained once across the two runs of the notebook"
