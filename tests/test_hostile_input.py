"""What a careless or hostile user could type as an answer: each case works safely or fails clearly, leaving nothing.

One row per case. "works" rows bake and check that the value lands only where it is harmless;
"rejected" rows check the error names the option and the value and says what is allowed, and that
no directory is left behind, inside the output directory or next to it. What a user types into config.yaml or
on the command line (ports, process counts, a checkpoint prefix, ...) is tests/test_config_keys.py's.
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from answers import REPO, TEMPLATES
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter
from projects import notebook_training_command

# (case, answers, text the error must contain)
REJECTED = [
    ("slug climbing out of the output dir", {"project_slug": "../evil"}, "project_slug='../evil'"),
    ("slug with a path separator", {"project_slug": "a/b"}, "project_slug='a/b'"),
    ("slug starting with a digit", {"project_slug": "3d_vision"}, "for example 'project_3d_vision'"),
    ("slug that is a keyword", {"project_slug": "import"}, "for example 'import_project'"),
    ("slug with a hyphen", {"project_slug": "my-model"}, "project_slug='my-model'"),
    ("slug with a leading underscore", {"project_slug": "_model"}, "project_slug='_model'"),
    ("slug shadowing a project module", {"project_slug": "machinery"}, "project_slug='machinery'"),
    ("slug shadowing the typed config's module", {"project_slug": "config"}, "project_slug='config'"),
    ("slug shadowing a module of another template", {"project_slug": "pictures"}, "project_slug='pictures'"),
    ("empty slug", {"project_slug": ""}, "project_slug=''"),
    ("slug too long for a file name", {"project_slug": "a" * 65}, "it must be at most 64 characters long (it has 65)"),
    ("GitHub repository that is not owner/name", {"github_repo": "not a repo"}, "github_repo='not a repo'"),
    ("GitHub repository with a path", {"github_repo": "a/b/c"}, "github_repo='a/b/c'"),
    ("TPU with torchrun", {"backend": "xla-tpu", "launcher": "torchrun"}, "launcher='torchrun' is not allowed"),
    ("TPU with one process", {"backend": "xla-tpu", "launcher": "none"}, "launcher='none' is not allowed"),
    ("a Slurm job on TPU", {"backend": "xla-tpu", "scheduler": "slurm"}, "scheduler='slurm' is not allowed"),
    ("a Slurm job of spawned processes", {"scheduler": "slurm", "launcher": "spawn"}, "launcher='spawn' is not"),
    ("a Slurm job of one process", {"scheduler": "slurm", "launcher": "none"}, "launcher='none' is not allowed"),
]


def generate(tmp_path: Path, answers: dict, template: str = TEMPLATES[0]) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    return Path(cookiecutter(str(REPO / template), no_input=True, extra_context=answers, output_dir=str(out)))


@pytest.mark.parametrize("case,answers,expected", REJECTED, ids=[row[0] for row in REJECTED])
def test_rejected(tmp_path: Path, capfd, case: str, answers: dict, expected: str) -> None:
    with pytest.raises(FailedHookException):
        generate(tmp_path, answers)
    stderr = capfd.readouterr().err
    assert expected in stderr, f"{case}: the error must name the option and the value; got:\n{stderr}"
    assert "is not allowed" in stderr and "must" in stderr, f"{case}: the error must say what is allowed"
    assert list((tmp_path / "out").iterdir()) == [], f"{case}: a rejected generation must leave nothing behind"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], f"{case}: something was written outside"


def test_unknown_choice_value_fails_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"mpirun provided for choice variable launcher"):
        generate(tmp_path, {"launcher": "mpirun"})
    assert list((tmp_path / "out").iterdir()) == []


def test_jinja_syntax_in_an_answer_fails_before_anything_is_written(tmp_path: Path) -> None:
    # Cookiecutter renders answers as Jinja (that is how defaults follow earlier answers).
    with pytest.raises(Exception, match="end of print statement"):
        generate(tmp_path, {"project_name": "{{ broken"})
    assert list((tmp_path / "out").iterdir()) == []


def compiles_and_lints(project: Path) -> None:
    for path in project.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=project, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def shell_cells(project: Path) -> str:
    """Everything the notebook and README run in a shell: the training cell's command, the README's ``bash`` blocks.

    (The notebook's other cells are Python; the Drive cell holds the project's slug, a Python identifier.)
    """
    notebook = yaml.safe_load((project / f"{project.name}.ipynb").read_text())  # JSON is YAML
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    commands = [command for command in map(notebook_training_command, cells) if command]
    assert len(commands) == 1, "the notebook has one training cell"
    readme = (project / "README.md").read_text()
    blocks = [part.split("\n```", 1)[0] for part in readme.split("```bash\n")[1:]]
    return "\n".join(commands + blocks)


def test_name_with_spaces_works(tmp_path: Path) -> None:
    project = generate(tmp_path, {"project_name": "My Image Project"})
    assert project.name == "my_image_project"
    assert (project / "README.md").read_text().startswith("# My Image Project\n")
    compiles_and_lints(project)


# Names whose slug alone would not be a valid package name: the derived slug adds what it needs.
DERIVED_SLUGS = [
    ("3d-model", "project_3d_model"),
    ("Data", "data_project"),
    ("class", "class_project"),
    ("!!!", "project"),
    # A slug this long would name a notebook past the 255 bytes a file name may have: cut at a word.
    ("Training " * 40, "training_training_training_training_training"),
]


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("name,slug", DERIVED_SLUGS, ids=[name[:20] for name, _ in DERIVED_SLUGS])
def test_name_that_slugifies_to_an_invalid_package_name_works(
    tmp_path: Path, template: str, name: str, slug: str
) -> None:
    project = generate(tmp_path, {"project_name": name}, template)
    assert project.name == slug, f"project name {name!r} must give the valid slug {slug!r}, not {project.name!r}"
    assert (project / "README.md").read_text().startswith(f"# {name}\n")
    compiles_and_lints(project)


def test_unicode_name_works(tmp_path: Path) -> None:
    project = generate(tmp_path, {"project_name": "Modèle Ünicode 模型"})
    assert project.name == "modele_unicode_mo_xing"
    assert "# Modèle Ünicode 模型" in (project / "README.md").read_text()
    assert "Modèle Ünicode 模型" in (project / f"{project.name}.ipynb").read_text(encoding="utf-8")
    compiles_and_lints(project)


@pytest.mark.parametrize("template", TEMPLATES)
def test_name_with_quotes_and_backslashes_works(tmp_path: Path, template: str) -> None:
    name = 'Bob\'s """quoted""" \\ model'
    project = generate(tmp_path, {"project_name": name}, template)
    assert project.name == "bob_s_quoted_model"
    assert yaml.safe_load((project / "config.yaml").read_text())["dataset"]
    compiles_and_lints(project)


def shell_commands(project: Path) -> list[str]:
    """The command lines a user runs in a shell: the README's ``bash`` blocks and the notebook's training command."""
    notebook = yaml.safe_load((project / f"{project.name}.ipynb").read_text())  # JSON is YAML
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    scripts = [command for command in map(notebook_training_command, cells) if command]
    readme = (project / "README.md").read_text()
    scripts += [part.split("\n```", 1)[0] for part in readme.split("```bash\n")[1:]]
    return [line for script in scripts for line in script.splitlines() if line.strip() and not line.startswith("#")]


# Stand-ins for the programs the commands start: each appends its name and arguments to $STAND_IN_LOG.
STAND_INS = ("python", "pip", "pytest", "torchrun", "tensorboard", "mlflow", "pre-commit", "cookiecutter")
STAND_IN = """#!/bin/sh
{ printf '%s' "${0##*/}"; printf ' %s' "$@"; printf '\\n'; } >> "$STAND_IN_LOG"
"""


@pytest.mark.parametrize("template", TEMPLATES)
def test_shell_syntax_in_the_name_never_reaches_a_shell(tmp_path: Path, template: str) -> None:
    marker = tmp_path / "pwned"
    name = f"a;b $(touch {marker}) `touch {marker}`; touch {marker}"
    project = generate(tmp_path, {"project_name": name}, template)
    assert not marker.exists(), "generating the project ran the name"
    # The name is in one command only, quoted: the README's command that generates the project again.
    cells = shell_cells(project)
    (regenerate,) = [line for line in cells.splitlines() if line.startswith("cookiecutter ")]
    assert "touch" not in cells.replace(regenerate, ""), "the project name must not appear in any other command"
    # Run every command as a user pastes it into bash, the programs it starts replaced by stand-ins.
    commands = shell_commands(project)
    assert commands, "the README shows commands to run"
    for line in commands:
        program = next(word for word in shlex.split(line) if "=" not in word)  # after any VAR=value
        assert program in STAND_INS, f"`{line}` starts a program this test has no stand-in for"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in STAND_INS:
        (bin_dir / program).write_text(STAND_IN)
        (bin_dir / program).chmod(0o755)
    log = tmp_path / "commands.log"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "STAND_IN_LOG": str(log)}
    for line in commands:
        line = line.replace("gh:<org>/<repo>", "gh:owner/templates")  # the placeholder a user replaces
        proc = subprocess.run(["bash", "-c", line], cwd=project, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"`{line}` failed in bash: {proc.stderr}"
    ran = log.read_text().splitlines()
    assert len(ran) == len(commands), f"each command must start one program: {commands} ran {ran}"
    assert not marker.exists(), f"the shell ran part of the project name from one of {commands}"
    assert f" project_name={name}" in next(line for line in ran if line.startswith("cookiecutter ")), ran
