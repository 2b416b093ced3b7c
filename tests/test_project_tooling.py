"""A generated project is ready for a repository of its own: CI that passes, pre-commit hooks, packaging
metadata, and the one command that generates it again.

The CI files cannot run here as GitHub or GitLab run them. `test_ci_commands_pass_in_a_fresh_venv` runs what
they would run: it parses the generated file (PyYAML) and runs its commands in order, each with
``bash -eo pipefail`` (GitHub's default shell) in the project's directory, failing at the first error:
GitHub's job ``env`` and every step's ``run``; GitLab's job ``variables`` and ``script``. They run in a
fresh virtual environment layered on the pinned test venv (a ``.pth`` file, as ``scripts/env.sh`` layers its
venvs; the TPU project's on ``.venv-xla``, visdom's on ``.venv-trackers``), with pip's index and config turned
off: the CI's ``pip install -r requirements.txt ...`` must find every requirement already satisfied by the
pinned releases, or fail. Not reproduced: the runner (ubuntu-latest, the ``python:3.12`` image: here this
venv's Python), ``actions/checkout`` and ``actions/setup-python`` (the project is already here; the fresh
venv stands for setup-python's Python), pip's cache between runs (``cache: pip``, GitLab's ``cache:``) and the
download of torch's CPU builds (the extra index is never contacted). ``ruff`` and ``pytest``, which pip finds
already installed in the base venv and so does not install into the fresh one, are shims: the base venv's
ruff binary (the pinned release), and ``python -m pytest`` with the fresh venv's Python.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from answers import REPO, TEMPLATES, pairwise, valid
from environments import PYTHON, TRACKERS_PYTHON, XLA_PYTHON
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from projects import LEARNING_TESTS

BIN = Path(sys.executable).parent
COLLECTION = "gh:<org>/<repo>"  # how the README spells the collection's location (flags.collection)
CI_FILES = {"github": ".github/workflows/ci.yml", "gitlab": ".gitlab-ci.yml"}


def site_packages(python: str) -> str:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def fresh_venv(path: Path, *bases: str) -> Path:
    """A new venv whose Python also sees the packages of the given venvs' Pythons (first wins)."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, capture_output=True)
    python = path / "bin" / "python"
    (Path(site_packages(str(python))) / "_base_venvs.pth").write_text(
        "".join(f"{site_packages(base)}\n" for base in bases)
    )
    return path


def offline_env(venv: Path, **extra: str) -> dict:
    """The fresh venv first on PATH; pip with no index, no config file and no find-links: nothing downloads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        VIRTUAL_ENV=str(venv),
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        **extra,
    )
    return env


def ci_commands(project: Path, ci: str) -> tuple[list[str], dict[str, str]]:
    """The shell commands the project's CI file runs, in order, and the environment variables it sets."""
    config = yaml.safe_load((project / CI_FILES[ci]).read_text())
    if ci == "github":
        (job,) = config["jobs"].values()
        steps = job["steps"]
        assert [step["uses"].split("@")[0] for step in steps if "uses" in step] == [
            "actions/checkout",
            "actions/setup-python",
        ], "only checkout and setup-python are actions: every other step is a command run here"
        assert all("env" not in step for step in steps), "step-level env is not reproduced here"
        return [step["run"] for step in steps if "run" in step], {k: str(v) for k, v in job.get("env", {}).items()}
    (job,) = [value for key, value in config.items() if isinstance(value, dict) and "script" in value]
    return job["script"], {k: str(v) for k, v in job.get("variables", {}).items()}


# One project per template whose own tests CI runs (with a tracker, and float16 mixed precision in config.yaml, which
# the tests' short runs read), GitHub and GitLab both; lint-only projects (include_test=no) with TPU pins (on the XLA
# venv) and with visdom's two install commands (on the trackers venv).
WITH_TESTS = {"include_test": True, "logger": "tensorboard"}
CI_RUNS = [
    ("vision-classification", {"ci": "github", **WITH_TESTS}),
    ("text-classification", {"ci": "github", "argparser": "fire", **WITH_TESTS}),
    ("gan", {"ci": "gitlab", "argparser": "hydra", **WITH_TESTS}),
    ("vision-classification", {"ci": "gitlab", "include_test": False, "backend": "xla-tpu"}),
    ("text-classification", {"ci": "github", "include_test": False, "logger": "visdom"}),
]


@pytest.mark.slow  # runs the projects' own tests in fresh venvs
@pytest.mark.parametrize(
    ("template", "answers"),
    CI_RUNS,
    ids=[f"{t}-{a['ci']}-{'tests' if a['include_test'] else 'lint'}" for t, a in CI_RUNS],
)
def test_ci_commands_pass_in_a_fresh_venv(bake, tmp_path: Path, template: str, answers: dict) -> None:
    """The CI file's commands pass; where it runs the project's own tests, all of them pass, among them the
    one that shows a short run learning the synthetic data (this is where this repository runs them)."""
    project = bake(template, **valid({"launcher": "auto", "backend": "nccl", **answers}))
    config = project / "config.yaml"
    config.write_text(config.read_text().replace("mixed_precision: null", "mixed_precision: float16"))
    commands, variables = ci_commands(project, answers["ci"])
    tests = answers["include_test"]
    checks = [command for command in commands if not command.startswith("pip ")]
    assert checks == ["ruff check .", "ruff format --check ."] + ["pytest"] * tests, checks

    bases = [XLA_PYTHON] if answers.get("backend") == "xla-tpu" else []
    bases += [TRACKERS_PYTHON] if answers.get("logger") == "visdom" else []
    venv = fresh_venv(tmp_path / "venv", *bases, PYTHON)
    shims = {"ruff": f'"{BIN / "ruff"}"', "pytest": f'"{venv / "bin" / "python"}" -m pytest'}
    for tool, target in shims.items():
        (venv / "bin" / tool).write_text(f'#!/bin/sh\nexec {target} "$@"\n')
        (venv / "bin" / tool).chmod(0o755)
    env = offline_env(venv, CI_PROJECT_DIR=str(project), PYTEST_ADDOPTS="-v -p no:cacheprovider")
    env.update(
        {key: os.path.expandvars(value.replace("$CI_PROJECT_DIR", str(project))) for key, value in variables.items()}
    )

    outputs = []
    for command in commands:
        proc = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", command],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        outputs.append(proc.stdout)
        assert proc.returncode == 0, f"CI command `{command}` failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    installs = "".join(out for command, out in zip(commands, outputs, strict=True) if command.startswith("pip "))
    assert "Installing collected packages" not in installs, f"CI installed what the pins lack:\n{installs}"
    if tests:
        learns = LEARNING_TESTS[template]
        assert f"tests/test_training.py::{learns} PASSED" in outputs[-1], outputs[-1][-6000:]


# Every CI file shape: each service, with and without tests, TPU, visdom.
CI_SHAPES = pairwise(
    {
        "ci": ["github", "gitlab"],
        "include_test": [True, False],
        "backend": ["nccl", "xla-tpu"],
        "logger": ["none", "visdom"],
    }
)
SCHEMAS = {"github": "vendor.github-workflows", "gitlab": "vendor.gitlab-ci"}


def check_schema(schema: str, *files: Path) -> subprocess.CompletedProcess:
    cmd = [str(BIN / "check-jsonschema"), "--builtin-schema", schema, *map(str, files)]
    return subprocess.run(cmd, capture_output=True, text=True)


def test_ci_files_match_their_services_schemas(bake, tmp_path: Path) -> None:
    """actionlint cannot be installed offline: check-jsonschema's vendored GitHub workflow and GitLab CI
    schemas check every shape of the generated files, and reject a broken file of each kind."""
    files = {"github": [], "gitlab": []}
    for combo in CI_SHAPES:
        project = bake(TEMPLATES[0], **valid({"launcher": "auto", **combo}))
        files[combo["ci"]].append(project / CI_FILES[combo["ci"]])
    for ci, paths in files.items():
        assert paths, f"no {ci} file checked"
        proc = check_schema(SCHEMAS[ci], *paths)
        assert proc.returncode == 0, f"{ci}: {proc.stdout}{proc.stderr}"
    broken = {"github": "on: push\njobs:\n  check:\n    steps: 3\n", "gitlab": "check:\n  script: 3\n"}
    for ci, text in broken.items():
        path = tmp_path / f"broken-{ci}.yml"
        path.write_text(text)
        assert check_schema(SCHEMAS[ci], path).returncode != 0, f"the {ci} schema must reject {text!r}"


def test_pre_commit_config_is_valid_and_runs_the_ruff_the_project_is_checked_with(bake) -> None:
    """`pre-commit validate-config` passes (the hooks themselves cannot be fetched offline: what they check is
    checked file by file in test_generation.py); ruff's rev is the ruff these tests check projects with, and
    the one CI installs."""
    project = bake(TEMPLATES[0], ci="github")
    proc = subprocess.run(
        [str(BIN / "pre-commit"), "validate-config", ".pre-commit-config.yaml"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    repos = {repo["repo"]: repo for repo in yaml.safe_load((project / ".pre-commit-config.yaml").read_text())["repos"]}
    ruff = repos["https://github.com/astral-sh/ruff-pre-commit"]
    (pinned,) = re.findall(r"^ruff==(\S+)$", (REPO / "requirements" / "test.txt").read_text(), flags=re.MULTILINE)
    assert ruff["rev"] == f"v{pinned}", f"the hook's ruff {ruff['rev']} must be the tests' ruff {pinned}"
    assert [hook["id"] for hook in ruff["hooks"]] == ["ruff-check", "ruff-format"]
    assert f"ruff=={pinned} " in (project / CI_FILES["github"]).read_text(), "CI installs the same ruff"
    hygiene = {hook["id"] for hook in repos["https://github.com/pre-commit/pre-commit-hooks"]["hooks"]}
    assert {
        "trailing-whitespace",
        "end-of-file-fixer",
        "check-yaml",
        "check-toml",
        "check-added-large-files",
    } <= hygiene
    assert all(re.fullmatch(r"v\d+\.\d+\.\d+", repo["rev"]) for repo in repos.values()), "pinned revisions"


# The defaults, and many answers changed, among them text the shell must quote.
REGENERATE = [
    ("gan", {}),
    (
        "vision-classification",
        {
            "project_name": 'Tom\'s "best" model',
            "project_slug": "best_model",
            "argparser": "fire",
            "backend": "xla-tpu",
            "logger": "mlflow",
            "sweep": "optuna",
            "include_test": False,
            "ci": "gitlab",
            "github_repo": "octo/best-model",
        },
    ),
]


@pytest.mark.parametrize(("template", "answers"), REGENERATE, ids=["defaults", "many-answers"])
def test_readme_command_generates_the_same_project_byte_for_byte(bake, tmp_path: Path, template: str, answers) -> None:
    project = bake(template, **valid({"launcher": "auto", "backend": "nccl", **answers}))
    readme = (project / "README.md").read_text()
    section = readme.split("\n## Generate it again\n", 1)[1]
    command = section.split("```bash\n", 1)[1].split("\n```", 1)[0]
    prefix = f"cookiecutter {COLLECTION} --directory {template} --no-input"
    assert command.startswith(prefix), command
    given = [arg.split("=", 1)[0] for arg in shlex.split(command.removeprefix(prefix))]
    assert given == list(answers), f"the command gives exactly the answers that differ from the defaults: {given}"

    out = tmp_path / "again"
    argv = shlex.split(command.replace(COLLECTION, shlex.quote(str(REPO)), 1))
    subprocess.run(
        [str(BIN / "cookiecutter"), *argv[1:], "--output-dir", str(out)], check=True, capture_output=True, text=True
    )
    again = out / project.name
    tree = sorted(p.relative_to(project) for p in project.rglob("*") if p.is_file())
    assert tree == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for path in tree:
        assert (project / path).read_bytes() == (again / path).read_bytes(), f"{path} differs"


def test_the_collection_version_has_one_source_and_reaches_the_readme(bake) -> None:
    """VERSION is the collection's version: X.Y.Z.devN while the CHANGELOG's newest heading is "Unreleased",
    X.Y.Z at the release whose heading is "## X.Y.Z". The generated README names it and the template."""
    version = (REPO / "VERSION").read_text().strip()
    parsed = Version(version)
    heading = re.findall(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), flags=re.MULTILINE)[0]
    if heading == "Unreleased":
        assert parsed.is_devrelease, f"VERSION {version}: a development release while changes are unreleased"
    else:
        assert version == heading, f"VERSION {version} must be the newest release heading, {heading}"
    assert (REPO / "common" / "partials" / "VERSION").resolve() == REPO / "VERSION"
    readme = (bake("gan") / "README.md").read_text()
    assert f"Generated from the `gan` template of Ignite Templates {version} with:" in readme
    assert COLLECTION in (REPO / "README.md").read_text(), "the generated command spells the location as the README"
    assert f'collection = "{COLLECTION}"' in (REPO / "common" / "partials" / "flags.j2").read_text()


# A GPU project's lower bounds; a TPU project's exact pins, with visdom, comments and an inline comment.
PACKAGING = [("vision-classification", {}), ("gan", {"backend": "xla-tpu", "logger": "visdom"})]


@pytest.mark.slow  # installs into fresh venvs
@pytest.mark.parametrize(("template", "answers"), PACKAGING, ids=["gpu", "tpu-visdom"])
def test_pyproject_declares_the_requirements_as_its_dependencies(bake, tmp_path: Path, template: str, answers) -> None:
    """requirements.txt is the one dependency list; pyproject.toml reads it (setuptools' dynamic dependencies):
    `pip install -e .` installs the project's metadata with exactly those requirements, and no module."""
    project = bake(template, **valid({"launcher": "auto", "backend": "nccl", **answers}))
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    assert pyproject["project"]["dynamic"] == ["dependencies"] and "dependencies" not in pyproject["project"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["dependencies"] == {"file": ["requirements.txt"]}
    lines = [line.split(" #")[0].strip() for line in (project / "requirements.txt").read_text().splitlines()]
    wanted = {normalized(line) for line in lines if line and not line.startswith("#")}

    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    # setuptools and wheel, to build without isolation (offline), from the trackers venv.
    venv = fresh_venv(tmp_path / "venv", TRACKERS_PYTHON, PYTHON)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", "."]
    proc = subprocess.run(pip, cwd=project, env=offline_env(venv), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    code = f"import importlib.metadata as m, json; print(json.dumps(m.requires({project.name!r})))"
    requires = json.loads(subprocess.check_output([str(venv / "bin" / "python"), "-c", code], text=True))
    assert {normalized(r) for r in requires} == wanted
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before, "the install wrote into the project"
    if answers.get("backend") == "xla-tpu":
        assert {normalized("torch==2.9.0"), normalized("torch_xla[tpu]==2.9.0")} <= wanted, "TPU pins stay exact"
    else:
        assert normalized("torch>=2.4") in wanted, "GPU and CPU projects keep lower bounds"


def normalized(requirement: str) -> tuple:
    """A requirement as metadata compares it: canonical name, extras, version specifier and marker."""
    req = Requirement(requirement)
    return canonicalize_name(req.name), tuple(sorted(req.extras)), str(req.specifier), str(req.marker)
