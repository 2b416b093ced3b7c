"""cruft keeps a generated project linked to the template repository, notebook included.

End to end against a local git repository made from this working tree (cruft clones the template,
so uncommitted changes would not be seen: the test commits them into a temporary repository).
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from answers import REPO
from projects import load_module
from readme_examples import commands, example

pytestmark = pytest.mark.slow  # they clone, update and train generated projects: not in the quick lane

CRUFT = str(Path(sys.executable).parent / "cruft")
GIT = ["git", "-c", "user.email=test@example.com", "-c", "user.name=Test", "-c", "init.defaultBranch=main"]
# What the README's commands, run as written, run with: git's identity, and pip's index off (nothing downloads).
README_SHELL = {
    **{
        f"GIT_{who}_{what}": value
        for who in ("AUTHOR", "COMMITTER")
        for what, value in (("NAME", "Test"), ("EMAIL", "test@example.com"))
    },
    "PIP_NO_INDEX": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
}


def sh(cmd: list[str], cwd: Path, ok: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if ok:
        assert proc.returncode == 0, f"`{' '.join(cmd)}` failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def commit_all(repo: Path, message: str) -> None:
    sh([*GIT, "add", "-A"], repo)
    sh([*GIT, "commit", "-q", "-m", message], repo)


def copy_working_tree(repo: Path) -> None:
    """This working tree's files (tracked and untracked, not ignored) copied into ``repo``."""
    for name in sh(["git", "ls-files", "-co", "--exclude-standard"], REPO).stdout.split():
        source, target = REPO / name, repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(source.readlink())
        elif source.is_file():
            shutil.copy2(source, target)


@pytest.fixture
def template_repo(tmp_path: Path) -> Path:
    """This working tree (tracked and untracked, not ignored files) committed to a fresh git repository."""
    repo = tmp_path / "template"
    copy_working_tree(repo)
    sh([*GIT, "init", "-q"], repo)
    commit_all(repo, "template")
    return repo


def create(template_repo: Path, out: Path, template: str, **answers) -> Path:
    cmd = [CRUFT, "create", str(template_repo), "--directory", template, "--no-input", "--output-dir", str(out)]
    sh([*cmd, "--extra-context", json.dumps(answers)], out.parent)
    (project,) = out.iterdir()
    return project


def test_the_readmes_cruft_commands_create_check_and_update_a_project(template_repo: Path, tmp_path: Path) -> None:
    """The README's cruft block, as written (the repository's URL this one's path, Enter at every question): the
    project is created, made a git repository, and is up to date. Then the user edits it and the template moves
    on: `cruft check` says so, `cruft update -y` brings the template's change (notebook, CI and pre-commit files
    included) and keeps the user's edits, and the project is up to date again."""
    block = example((REPO / "README.md").read_text(), "## Keep a project up to date with cruft", "bash")
    install, create_line, commit_line, check, update = commands(block)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **README_SHELL}
    out = tmp_path / "out"
    out.mkdir()

    def run(line: str, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess:
        line = line.replace("https://github.com/<org>/<repo>", str(template_repo))
        proc = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", line], cwd=cwd, env=env, input="\n" * 100, capture_output=True, text=True
        )
        if ok:
            assert proc.returncode == 0, f"the README's `{line}` failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc

    run(install, out)  # with pip's index off (PIP_NO_INDEX below): cruft is there, nothing is downloaded
    run(create_line, out)
    run(commit_line, out)
    (project,) = out.iterdir()
    linked = json.loads((project / ".cruft.json").read_text())
    assert linked["directory"] == "vision-classification"
    assert run(check, project).returncode == 0, "a new project is up to date"

    # The user's own edits.
    data = project / "data.py"
    data.write_text(data.read_text().replace("SYNTHETIC_SIZES = (1024, 256)", "SYNTHETIC_SIZES = (2048, 256)"))
    (project / "NOTES.md").write_text("my notes\n")
    commit_all(project, "my edits")

    # The template moves on: a shared file changes (it is also a cell of the notebook), and so do the
    # repository files the notebook does not write (CI, pre-commit).
    launch = template_repo / "common" / "machinery" / "launch.py"
    old_doc = next(line for line in launch.read_text().splitlines() if line.startswith('"""'))  # the docstring
    new_doc = '"""The start of every run: command line, launch, run directory, log (template v2)."""'
    launch.write_text(launch.read_text().replace(old_doc, new_doc, 1))
    partials = template_repo / "common" / "partials"
    for name in ("ci/github.yml", "pre-commit-config.yaml"):
        (partials / name).write_text((partials / name).read_text() + "# template v2\n")
    commit_all(template_repo, "template v2")

    assert run(check, project, ok=False).returncode != 0, "cruft check must see the new template commit"
    run(update, project)
    assert new_doc in (project / "machinery" / "launch.py").read_text()
    notebook = json.loads((project / "vision_classification.ipynb").read_text())
    cells = ["".join(cell["source"]) for cell in notebook["cells"]]
    launch_cell = next(cell for cell in cells if cell.startswith("%%writefile machinery/launch.py"))
    assert new_doc in launch_cell, "the notebook must follow the template change"
    assert "SYNTHETIC_SIZES = (2048, 256)" in data.read_text(), "the user's edit must survive the update"
    for name in (".github/workflows/ci.yml", ".pre-commit-config.yaml"):
        assert (project / name).read_text().endswith("# template v2\n"), f"{name} must follow the template"
    assert (project / "NOTES.md").read_text() == "my notes\n"
    assert run(check, project).returncode == 0


def test_a_commit_outside_the_template_flags_the_project_but_changes_nothing(
    template_repo: Path, tmp_path: Path
) -> None:
    """cruft compares whole-repository commits (a known cruft limit, documented in the README)."""
    out = tmp_path / "out"
    out.mkdir()
    project = create(template_repo, out, "vision-classification")
    sh([*GIT, "init", "-q"], project)
    commit_all(project, "generated")
    before = files_of(project)

    (template_repo / "README.md").write_text((template_repo / "README.md").read_text() + "\nMore docs.\n")
    commit_all(template_repo, "docs only")
    assert sh([CRUFT, "check"], project, ok=False).returncode != 0
    sh([CRUFT, "update", "-y"], project)
    after = files_of(project)
    changed = sorted(str(p) for p in before if before[p] != after[p])
    assert changed == [".cruft.json"], f"only the recorded commit may change, not {changed}"


def files_of(project: Path) -> dict[Path, bytes]:
    """Every file of a project but git's, by its path in the project."""
    return {p.relative_to(project): p.read_bytes() for p in project.rglob("*") if p.is_file() and ".git" not in p.parts}


def test_switching_a_project_from_gpu_to_tpu_and_back_keeps_the_users_edit(template_repo: Path, tmp_path: Path) -> None:
    """The README's one command changes an answer later: after each switch the project is, file for file, a new
    project of the new answers (the new backend's files only; such a project trains: every TPU and GPU run of
    the suite), with the user's edit kept, and ruff-clean."""
    out = tmp_path / "out"
    out.mkdir()
    project = create(template_repo, out, "vision-classification")
    sh([*GIT, "init", "-q"], project)
    commit_all(project, "generated")
    data = project / "data.py"
    edit = ("SYNTHETIC_SIZES = (1024, 256)", "SYNTHETIC_SIZES = (512, 128)")
    data.write_text(data.read_text().replace(*edit))
    commit_all(project, "my edit")

    # The README's commands: to the TPU, commit, and back.
    block = example((REPO / "README.md").read_text(), "### Change an answer later (GPU to TPU and back)", "bash")
    to_tpu, commit_line, back = commands(block)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **README_SHELL}
    for line in (to_tpu, back):
        answers = json.loads(shlex.split(line)[-1])
        backend = answers["backend"]
        for command in (line, commit_line):
            proc = subprocess.run(["bash", "-c", command], cwd=project, env=env, capture_output=True, text=True)
            assert proc.returncode == 0, f"the README's `{command}` failed:\n{proc.stdout}\n{proc.stderr}"
        tpu = backend == "xla-tpu"
        assert "SYNTHETIC_SIZES = (512, 128)" in data.read_text(), f"switching to {backend} lost the user's edit"
        xla = project / "machinery" / "tpu" / "xla.py"
        assert xla.is_file() == tpu, f"xla.py must exist exactly on TPU (now {backend})"
        assert (project / "tests" / "test_xla.py").is_file() == tpu
        assert ("torch_xla" in (project / "requirements.txt").read_text()) == tpu
        notebook = json.loads((project / "vision_classification.ipynb").read_text())
        assert ("TPU" in json.dumps(notebook["metadata"])) == tpu, "the notebook must open on the backend's runtime"
        (tmp_path / backend).mkdir()
        new = files_of(create(template_repo, tmp_path / backend, "vision-classification", **answers))
        new[Path("data.py")] = new[Path("data.py")].decode().replace(*edit).encode()  # with the user's edit
        switched = files_of(project)
        differ = sorted(str(p) for p in new.keys() | switched.keys() if new.get(p) != switched.get(p))
        assert differ == [".cruft.json"] or not differ, (
            f"switched to {backend}, the project differs from a new one of {answers} in {differ}"
        )
        for check in (["check", "--no-cache", "."], ["format", "--no-cache", "--check", "."]):
            assert sh([sys.executable, "-m", "ruff", *check], project, ok=False).returncode == 0, f"ruff {check}"


def test_switching_ci_service_moves_the_ci_files_and_the_readme_command(template_repo: Path, tmp_path: Path) -> None:
    """`ci` changed later: the GitHub workflow goes, the GitLab job comes, and the README's "Generate it again"
    command, which the post-generation hook writes (cruft re-runs it), is the one plain cookiecutter writes."""
    out = tmp_path / "out"
    out.mkdir()
    project = create(template_repo, out, "gan", backend="gloo")
    assert (project / ".github" / "workflows" / "ci.yml").is_file() and not (project / ".gitlab-ci.yml").exists()
    assert not (project / ".cookiecutter-defaults.json").exists()
    sh([*GIT, "init", "-q"], project)
    commit_all(project, "generated")

    sh([CRUFT, "update", "-y", "--variables-to-update", json.dumps({"ci": "gitlab"})], project)
    assert not (project / ".github").exists() and (project / ".gitlab-ci.yml").is_file()
    command = [line for line in (project / "README.md").read_text().splitlines() if line.startswith("cookiecutter ")]
    assert command == ["cookiecutter gh:<org>/<repo> --directory gan --no-input backend=gloo ci=gitlab"], command

    plain = tmp_path / "plain"
    cookiecutter = [str(Path(sys.executable).parent / "cookiecutter"), str(template_repo), "--directory", "gan"]
    sh([*cookiecutter, "--no-input", "--output-dir", str(plain), "backend=gloo", "ci=gitlab"], tmp_path)
    for path in ("README.md", ".gitlab-ci.yml", "dcgan.ipynb"):
        assert (project / path).read_bytes() == (plain / "dcgan" / path).read_bytes(), f"{path}: cruft != cookiecutter"


# main before the generated machinery moved into folders (issue 48): machinery/runs.py, fit.py, loaders.py, ... one
# folder, the run settings in config.py's Config, seed first in config.yaml.
BEFORE_THE_MOVE = "6f384db95c7829af629f2fd24ce209f7f21ea5a0"


def test_a_project_made_before_the_machinery_moved_updates_with_cruft_keeping_the_users_edits(tmp_path: Path) -> None:
    """A project made at main before the machinery moved into folders, then edited by its user (models.py, and
    lr and max_epochs in config.yaml) and committed: `cruft update -y` brings the new layout without a conflict,
    and the project is then, file for file, a new project with the user's edits, its config.yaml read whole by
    the new Config (every key it declares, the user's values)."""
    repo = tmp_path / "template"
    repo.mkdir()
    if sh(["git", "rev-parse", "--is-shallow-repository"], REPO).stdout.strip() == "true":
        pytest.skip(f"a shallow clone: the template as it was at {BEFORE_THE_MOVE} is not in it")
    archive = subprocess.run(["git", "archive", BEFORE_THE_MOVE], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x"], cwd=repo, input=archive, check=True)
    sh([*GIT, "init", "-q"], repo)
    commit_all(repo, "before the move")
    out = tmp_path / "out"
    out.mkdir()
    project = create(repo, out, "vision-classification")
    assert (project / "machinery" / "runs.py").is_file(), "the old layout: one machinery folder"
    sh([*GIT, "init", "-q"], project)
    commit_all(project, "generated")

    # The user's edits, committed.
    edits = {
        "models.py": [("MAXVIT_PARTITION = 7\n", "MAXVIT_PARTITION = 7\n# my own model notes\n")],
        "config.yaml": [("\nlr: 0.001\n", "\nlr: 0.002\n"), ("\nmax_epochs: 5\n", "\nmax_epochs: 20\n")],
    }

    def edited(name: str, text: str) -> str:
        for before, after in edits[name]:
            assert text.count(before) == 1, f"{name} must hold {before!r} once"
            text = text.replace(before, after)
        return text

    for name in edits:
        (project / name).write_text(edited(name, (project / name).read_text()))
    commit_all(project, "my edits")

    # The template moves on to this working tree: the machinery in folders.
    sh([*GIT, "rm", "-rq", "."], repo)
    copy_working_tree(repo)
    commit_all(repo, "the machinery in folders")
    update = sh([CRUFT, "update", "-y"], project)

    unmerged = sh(["git", "diff", "--name-only", "--diff-filter=U"], project).stdout.split()
    marked = sorted(
        str(path.relative_to(project))
        for path in project.rglob("*")
        if path.is_file()
        and ".git" not in path.parts
        and any(line.startswith(("<<<<<<< ", ">>>>>>> ")) for line in path.read_text(errors="replace").splitlines())
    )
    said = "\n".join(line for line in update.stderr.splitlines() if "conflict" in line or line.startswith("U "))
    rejected = sorted(str(path.relative_to(project)) for path in project.rglob("*.rej"))
    assert not (unmerged or marked or rejected), (
        f"cruft update left conflicts: unmerged {unmerged}, conflict markers in {marked}, rejects {rejected}\n"
        f"{said}\n--- config.yaml ---\n{(project / 'config.yaml').read_text()}"
    )

    assert (project / "machinery" / "runs" / "start.py").is_file(), "the new layout: the run's start in runs/"
    assert not (project / "machinery" / "runs.py").exists() and not (project / "machinery" / "fit.py").exists()
    files = load_module(project / "machinery" / "config_files.py")
    config = files.load_config(project / "config.yaml", load_module(project / "config.py").Config)
    assert (config.lr, config.max_epochs) == (0.002, 20), "the user's config.yaml values must survive the update"
    assert "# my own model notes" in (project / "models.py").read_text(), "the user's models.py edit must survive"

    # File for file, a project made now, with the user's edits (the notebook holds the generated files).
    (tmp_path / "new").mkdir()
    new = files_of(create(repo, tmp_path / "new", "vision-classification"))
    for name in edits:
        new[Path(name)] = edited(name, new[Path(name)].decode()).encode()
    updated = files_of(project)
    differ = sorted(str(p) for p in new.keys() | updated.keys() if new.get(p) != updated.get(p))
    assert differ in ([], [".cruft.json"]), (
        f"the updated project differs from a new one with the user's edits in {differ}"
    )


# main before the training behaviours were config keys (issue 64): mixed_precision, compile, ema, patience, limit_sec,
# n_saved, ... were questions, frozen into the generated machinery.
BEFORE_RUN_TIME_OPTIONS = "0b0dfe8"
# The answers a user gave then (the issue's), and the keys each left in config.yaml, which the update carries.
FORMER_ANSWERS = {
    "patience": "5",
    "ema": True,
    "limit_sec": "3600",
    "n_saved": "3",
    "compile": True,
    "mixed_precision": "bfloat16",
    "timer": True,
}
CARRIED = {
    "patience": 5,
    "ema_momentum": 0.001,
    "limit_sec": 3600,
    "n_saved": 3,
    "compile": True,
    "mixed_precision": "bfloat16",
    "timer": True,  # a question with no key then: its answer, read from the committed .cruft.json
}
# The same command before and after the update (fire's, which both take): a short offline run, eager (compiling a
# torchvision model takes minutes here; the run's own config says compile: true, the command says no).
SMALL = [
    "--dataset=synthetic",
    "--model=shufflenet_v2_x0_5",
    "--batch_size=8",
    "--eval_batch_size=8",
    "--num_workers=0",
    "--max_epochs=2",
    "--train_epoch_length=4",
    "--eval_epoch_length=2",
    "--save_every_iters=2",
    "--log_every_iters=1",
    "--compile=False",
]


def test_a_project_whose_answers_were_behaviours_updates_to_config_keys_with_its_values_and_its_run_continues(
    tmp_path: Path,
) -> None:
    """A project made when patience, ema, limit_sec, n_saved, compile, mixed precision and the timer were questions,
    with a user's edit (models.py) and a run stopped mid-epoch: `cruft update -y`, then the CHANGELOG's
    `python -m machinery.upgrade`, leaves config.yaml with every one of those as a key of the user's value (cruft
    itself cannot: a removed question's answer never reaches the new template), keeps the edit, and is, file for file,
    a new project but for config.yaml's values; the same command then continues the stopped run from its
    checkpoint. A command with another config says which keys keep the stopped run from continuing."""
    if sh(["git", "rev-parse", "--is-shallow-repository"], REPO).stdout.strip() == "true":
        pytest.skip(f"a shallow clone: the template as it was at {BEFORE_RUN_TIME_OPTIONS} is not in it")
    repo = tmp_path / "template"
    repo.mkdir()
    archive = subprocess.run(["git", "archive", BEFORE_RUN_TIME_OPTIONS], cwd=REPO, capture_output=True, check=True)
    subprocess.run(["tar", "-x"], cwd=repo, input=archive.stdout, check=True)
    sh([*GIT, "init", "-q"], repo)
    commit_all(repo, "questions")
    out = tmp_path / "out"
    out.mkdir()
    project = create(repo, out, "vision-classification", argparser="fire", **FORMER_ANSWERS)
    assert "patience: 5" in (project / "config.yaml").read_text(), "the old template writes the answer into it"
    sh([*GIT, "init", "-q"], project)
    commit_all(project, "generated")
    models = project / "models.py"
    models.write_text(models.read_text() + "# my own model notes\n")
    commit_all(project, "my edit")
    command = [sys.executable, "main.py", "config.yaml", *SMALL]
    probe = {**os.environ, "PYTHONPATH": str(REPO / "tests" / "probes"), "STOP_PROBE": "iteration:3"}
    stopped = subprocess.run(command, cwd=project, env=probe, capture_output=True, text=True, timeout=300)
    assert stopped.returncode == 143, f"the old project's run, stopped:\n{stopped.stderr[-3000:]}"
    (run_dir,) = (project / "logs").iterdir()
    assert (run_dir / "training_checkpoint_3.pt").is_file()

    # The template moves on to this working tree; the user updates as the README says (its commands as written).
    sh([*GIT, "rm", "-rq", "."], repo)
    copy_working_tree(repo)
    commit_all(repo, "options at run time")
    heading = "### Projects made while the training behaviours were questions (issue 64)"
    update, upgrade, commit = commands(example((REPO / "README.md").read_text(), heading, "bash"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **README_SHELL}

    def run(line: str) -> str:
        proc = subprocess.run(["bash", "-c", line], cwd=project, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, f"the README's `{line}` failed:\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    run(update)
    assert "patience: null" in (project / "config.yaml").read_text(), "cruft alone resets a former answer's key"
    upgraded = run(upgrade)
    config = yaml.safe_load((project / "config.yaml").read_text())
    assert {key: config[key] for key in CARRIED} == CARRIED, f"the former answers as keys:\n{upgraded}"
    assert f"{len(CARRIED)} key(s) of config.yaml set as they were in HEAD" in upgraded, upgraded
    assert run(upgrade).strip() == "Nothing to set", "what it set is the user's own value from then on"
    assert models.read_text().endswith("# my own model notes\n"), "the user's edit must survive the update"
    (tmp_path / "new").mkdir()
    new = files_of(create(repo, tmp_path / "new", "vision-classification", argparser="fire"))
    new[Path("models.py")] += b"# my own model notes\n"
    updated = {path: data for path, data in files_of(project).items() if path.parts[0] != "logs"}
    differ = sorted(str(p) for p in new.keys() | updated.keys() if new.get(p) != updated.get(p))
    assert differ == ["config.yaml"], f"a new project but for its values: {differ}"
    run(commit)

    # Another config (a key the stopped run's lock lacks, not at its default): a run of its own, and the log says why.
    other = run_and_log(project, [*command, "--deterministic=True", "--max_epochs=1", "--train_epoch_length=1"])
    assert f"The stopped run in logs/{run_dir.name} is not continued, its config differing (deterministic: " in other
    # The same command as before the update: the run continues from its checkpoint, to its end.
    continued = run_and_log(project, command)
    assert f"Continuing the run in logs/{run_dir.name} from logs/{run_dir.name}/training_checkpoint_3.pt" in continued
    status = yaml.safe_load((run_dir / "status.yaml").read_text())
    assert status == {"status": "finished", "reason": "max_epochs", "epoch": 2, "iteration": 8}, status
    iterations = [int(i) for i in re.findall(r" - iteration (\d+):", (run_dir / "training.log").read_text())]
    assert iterations == list(range(1, 9)), f"each iteration trained once, before and after the update: {iterations}"


def run_and_log(project: Path, command: list[str]) -> str:
    """Run ``command`` in ``project``; its output (the log's records are in it)."""
    proc = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"`{' '.join(command)}` failed:\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr
