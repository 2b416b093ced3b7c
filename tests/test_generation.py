"""Every option value, baked at least once (pairwise over the options), gives a clean project."""

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import answers
import pytest
import yaml
from answers import DATASETS, REPO, TEMPLATES, pairwise, resolved_launcher, template_context, template_options, valid
from projects import OFFLINE

# Each template's own options, combined pairwise: (template, answers).
BAKES = [(template, valid(combo)) for template in TEMPLATES for combo in pairwise(template_options(template))]
TRACKERS = [value for value in template_options(TEMPLATES[0])["logger"] if value != "none"]
LEFTOVER = re.compile(r"\{\{|\{%|%\}|\}\}|cookiecutter\.")
TEXT_SUFFIXES = {".py", ".md", ".txt", ".yaml", ".yml", ".toml", ".cfg", ".ipynb", ""}
# Each `ci` answer's files (the other services' are removed).
CI_FILES = {"github": ".github/workflows/ci.yml", "gitlab": ".gitlab-ci.yml", "none": None}
# pre-commit-hooks' check-added-large-files refuses files over 500 KB.
LARGEST_FILE = 500 * 1024
# Third-party modules a generated project imports -> the requirement that installs them (directly or
# as a dependency). Test-only imports (pytest) are installed by the README's test instructions.
PROVIDED_BY = {
    "torch": "torch",
    "torchvision": "torchvision",
    "PIL": "torchvision",
    "torch_xla": "torch_xla",
    "ignite": "pytorch-ignite",
    "yaml": "pyyaml",
    "numpy": "numpy",  # deterministic training's NumPy random state, in checkpoints
    "pydantic": "pydantic",  # the config's check
    "tqdm": "tqdm",
    "fire": "fire",
    "hydra": "hydra-core",
    "omegaconf": "hydra-core",
    "matplotlib": "matplotlib",
    "transformers": "transformers",
    "datasets": "datasets",
    "tokenizers": "transformers",
    "optuna": "optuna",
    "sqlalchemy": "optuna",  # the study's database URL, shown with its password masked
    # Experiment trackers: the module is named like the option value and its package.
    **{tracker: tracker for tracker in ("clearml", "mlflow", "neptune", "polyaxon", "tensorboard", "visdom", "wandb")},
    "pytest": None,
}
# Modules only export.py needs: requirements-export.txt installs them, requirements.txt must not.
EXPORT_ONLY = {"onnxruntime": "onnxruntime", "onnx": "onnx", "onnxscript": "onnxscript"}


def combo_id(combo: dict) -> str:
    return "-".join(f"{k}={v}" for k, v in combo.items())


def project_files(project: Path) -> list[Path]:
    return sorted(p for p in project.rglob("*") if p.is_file() and ".ruff_cache" not in p.parts)


def third_party_imports(project: Path) -> set[str]:
    """The top-level names of the modules the project's Python files import, but for its own and the stdlib."""
    own = {p.stem for p in project.glob("*.py")} | {"machinery"}
    names = set().union(*(imported_modules(path) for path in project.rglob("*.py")))
    return names - own - set(sys.stdlib_module_names)


def conftest_tiny(project: Path) -> dict:
    """The TINY dict of the generated tests/conftest.py: the config keys its fixture makes small."""
    for node in ast.parse((project / "tests" / "conftest.py").read_text()).body:
        if isinstance(node, ast.Assign) and [target.id for target in node.targets] == ["TINY"]:
            return ast.literal_eval(node.value)
    raise AssertionError("tests/conftest.py defines no TINY dict")


def ruff(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=project, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("template", TEMPLATES)
def test_pairwise_covers_every_value_of_every_option(template: str) -> None:
    combos = [combo for name, combo in BAKES if name == template]
    for name, values in template_options(template).items():
        used = {str(combo[name]) for combo in combos}
        assert used >= {str(v) for v in values}, f"option {name}: values {values} not all baked"


# The longest a generated module may be (the longest, text-classification's data.py on the TPU, has 200 lines).
MODULE_LINES = 200


# The tests below read one shared bake per answer set of the pairwise matrix (the ``baked`` fixture), and
# must not write into it: ruff runs without its cache, Python files are compiled in memory.
each_bake = pytest.mark.parametrize("template,combo", BAKES, ids=[f"{t}-{combo_id(c)}" for t, c in BAKES])


@each_bake
def test_generated_files_are_the_ones_the_answers_ask_for(baked, template: str, combo: dict) -> None:
    project = baked(template, **combo)
    names = {p.relative_to(project).as_posix() for p in project_files(project)}
    expected = {"main.py", "config.py", "data.py", "models.py", "trainers.py", "config.yaml"}
    machinery = "__init__ backend cli config_files launch settings upgrade".split()
    machinery += "runs/start runs/directory runs/files runs/checkpoints runs/preemption".split()
    machinery += "training/engine training/fit training/handlers data/loaders inference/trained".split()
    expected |= {f"machinery/{name}.py" for name in machinery}
    assert expected <= names, f"missing files: {expected - names}"
    tracking = combo["logger"] != "none"
    for tracker in ("machinery/training/tracking.py", "machinery/training/tracker.py"):
        assert (tracker in names) == tracking, f"{tracker} exactly when a tracker is chosen"
    assert not [name for name in names if "/command_lines/" in name or "/trackers/" in name], "one of each, renamed"
    evaluator = bool(template_context(template)["_eval_metric"])
    evaluation = "machinery/training/evaluation.py"
    assert (evaluation in names) == evaluator, f"{evaluation} in a template that evaluates"
    assert ("tests/test_training.py" in names) == combo["include_test"], "tests/ must exist only when asked for"
    ci_files = {name for name in CI_FILES.values() if name}
    assert names & ci_files == ({CI_FILES[combo["ci"]]} - {None}), f"ci={combo['ci']}: CI files {names & ci_files}"
    assert ".pre-commit-config.yaml" in names and ".cookiecutter-defaults.json" not in names
    assert not (project / ".notebook").exists(), "the notebook's cells: read, then removed, by the hook"
    tpu = combo["backend"] == "xla-tpu"
    tpu_modules = {f"machinery/tpu/{name}.py" for name in ("__init__", "xla", "replicas", "counters")}
    assert tpu_modules <= names if tpu else not tpu_modules & names, "machinery/tpu/ exactly in a TPU project"
    assert ("tests/test_xla.py" in names) == (tpu and combo["include_test"]), "tests/test_xla.py: TPU projects' tests"
    assert ("slurm.sh" in names) == (combo["scheduler"] == "slurm"), "slurm.sh exactly when scheduler is slurm"
    sweep = {"sweep.py", "sweep.yaml", "machinery/sweeps/study.py", "machinery/sweeps/pruning.py"}
    chosen = combo.get("sweep") == "optuna"
    assert sweep <= names if chosen else not sweep & names, "sweep.py, sweep.yaml, machinery/sweeps/ exactly in a sweep"


@each_bake
def test_generated_files_pass_what_the_pre_commit_hooks_check(baked, template: str, combo: dict) -> None:
    """What the project's pre-commit hooks check (they cannot be fetched here), file by file: Python compiles,
    no Jinja is left, text ends with one newline and has no trailing whitespace or CR, YAML and TOML parse,
    no file is too large to add."""
    for path in project_files(baked(template, **combo)):
        if path.suffix == ".py":
            compile(path.read_text(), str(path), "exec")  # as py_compile, without writing __pycache__ here
        if path.suffix in TEXT_SUFFIXES:
            text = path.read_text()
            assert not LEFTOVER.search(text), f"template leftover in {path.name}: {LEFTOVER.search(text)[0]!r}"
            assert "\n\n\n\n" not in text, f"stray blank lines in {path.name}"
            assert text.endswith("\n") and not text.endswith("\n\n"), f"{path.name} must end with one newline"
            trailing = [i for i, line in enumerate(text.split("\n"), 1) if line != line.rstrip()]
            assert not trailing, f"{path.name}: trailing whitespace on lines {trailing}"
            assert "\r" not in text, f"{path.name}: carriage returns (pre-commit's mixed-line-ending)"
        if path.suffix in {".yaml", ".yml"}:
            yaml.safe_load(path.read_text())
        if path.suffix == ".toml":
            tomllib.loads(path.read_text())
        assert path.stat().st_size <= LARGEST_FILE, f"{path.name} is over 500 KB: pre-commit refuses to add it"


@each_bake
def test_generated_modules_are_short_enough_to_read_at_once(baked, template: str, combo: dict) -> None:
    project = baked(template, **combo)
    for path in [*project.glob("*.py"), *project.glob("machinery/**/*.py")]:  # one concern per module
        lines = len(path.read_text().splitlines())
        assert lines <= MODULE_LINES, f"{path.name} has {lines} lines: split it by concern (at most {MODULE_LINES})"


def imported_modules(path: Path) -> set[str]:
    """The top-level names of the modules a Python file imports (absolute imports)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@each_bake
def test_the_machinery_imports_none_of_the_users_files(baked, template: str, combo: dict) -> None:
    """The user's files stand on the machinery, never the other way round: a machinery module that imported
    config.py, data.py or models.py would break when the user renames or rewrites them."""
    project = baked(template, **combo)
    users = {path.stem for path in project.glob("*.py")}
    for path in project.glob("machinery/**/*.py"):
        wrong = imported_modules(path) & users
        assert not wrong, f"{path.relative_to(project)} imports the user's {sorted(wrong)}"


@each_bake
def test_the_machinery_map_names_every_module_the_project_has_and_no_other(baked, template: str, combo: dict) -> None:
    """machinery/__init__.py's docstring is the one map of machinery/ (the docs link to it): each module a bake
    has is named there under its folder, and a module the hook removed for these answers is not."""
    project = baked(template, **combo)
    docstring = ast.get_docstring(ast.parse((project / "machinery" / "__init__.py").read_text()))
    # "- ``runs/``, ...: ``start.py`` (...); ``directory.py`` ...": an entry is a folder (or a module), its modules.
    entries = re.split(r"^- ", docstring, flags=re.MULTILINE)[1:]
    named = set()
    for entry in entries:
        folder = re.match(r"``(\w+)/``", entry)
        modules = re.findall(r"``(\w+\.py)``", entry)
        named |= {f"{folder[1]}/{module}" if folder else module for module in modules}
    present = {
        path.relative_to(project / "machinery").as_posix()
        for path in project.glob("machinery/**/*.py")
        if path.name != "__init__.py"
    }
    assert named == present, (
        f"machinery/__init__.py's map misses {sorted(present - named)} and names {sorted(named - present)}, "
        "which this project does not have"
    )


@pytest.mark.parametrize("template", answers.SUPERVISED)
def test_the_users_metrics_are_one_file_without_jinja_on_every_backend(baked, template: str) -> None:
    """metrics.py is the user's: what a metric needs on a TPU (its state on the device, read once) is the
    machinery's, so the file has no Jinja and every backend's project has the same bytes."""
    source = (REPO / template / "{{cookiecutter.__project_dir}}" / "metrics.py").read_text()
    assert not LEFTOVER.search(source), f"{template}'s metrics.py has Jinja: {LEFTOVER.search(source)[0]!r}"
    backends = template_options(template)["backend"]
    files = {
        backend: (baked(template, **valid({"backend": backend, "launcher": "auto"})) / "metrics.py").read_bytes()
        for backend in backends
    }
    assert len(set(files.values())) == 1, f"metrics.py differs across the backends {backends}"
    assert files[backends[0]] == source.encode(), "metrics.py is generated as its source is written"


@each_bake
def test_generated_project_is_ruff_clean(baked, template: str, combo: dict) -> None:
    """Every Python file, and the notebook's Python cells: the set-up, Drive and training cells rendered from
    common/notebook/ and the hook's own. The project's ruff settings leave the notebook out of ``ruff .`` (its
    %%writefile cells are the project's files); named, it is checked with those settings, and ruff skips the
    cells that start with a cell magic."""
    project = baked(template, **combo)
    notebook = f"{project.name}.ipynb"
    lint = ruff(project, "check", "--no-cache", ".", notebook)
    assert lint.returncode == 0, f"ruff check failed:\n{lint.stdout}{lint.stderr}"
    fmt = ruff(project, "format", "--no-cache", "--check", "--diff", ".", notebook)
    assert fmt.returncode == 0, f"ruff format would change files:\n{fmt.stdout}{fmt.stderr}"


@each_bake
def test_generated_config_has_the_keys_and_values_the_answers_give(baked, template: str, combo: dict) -> None:
    """config.yaml holds every run key whatever the answers, at its default: the backend's family alone (a TPU's
    replicas) and the template's evaluation (its keys) shape it; the README's command gives the processes."""
    project = baked(template, **combo)
    config = yaml.safe_load((project / "config.yaml").read_text())
    assert config["dataset"] == DATASETS[template]
    tpu = combo["backend"] == "xla-tpu"
    assert config["backend"] == ("xla-tpu" if tpu else None) and config["output_dir"] == "./logs"
    assert config["nproc_per_node"] == (8 if tpu else 1), "the TPU's 8 replicas; the command spawns the others"
    evaluates = bool(template_context(template)["_eval_metric"])
    integers = ["batch_size", "num_workers", "max_epochs", "log_every_iters", "n_saved", "save_every_iters"]
    for key in integers + ["eval_batch_size"] * evaluates:
        assert isinstance(config[key], int), f"config.yaml: {key} must be an integer"
    behaviours = {"mixed_precision": None, "compile": False, "deterministic": False, "limit_sec": None}
    behaviours |= {"terminate_on_nan": True, "timer": False, "save_training": True, "filename_prefix": "training"}
    evaluation = {"eval_epoch_length": None, "ema_momentum": None, "patience": None, "save_best_model": True}
    evaluation["score"] = template_context(template)["_eval_metric"]
    assert {key: config[key] for key in behaviours} == behaviours, "each behaviour a key, off where it costs"
    assert {key: config.get(key, "-") for key in evaluation} == (
        evaluation if evaluates else dict.fromkeys(evaluation, "-")
    )
    for key in ["train_epoch_length", "resume_from"]:
        assert key in config, f"config.yaml lacks {key}"
    for module in ("evaluation.py", "ema.py"):
        assert (project / "machinery" / "training" / module).is_file() == evaluates, (
            f"{module}: a template's evaluation"
        )
    if template == "text-classification":
        for key in ("model", "max_length", "dropout", "classifier_hidden", "weight_decay", "warmup_ratio"):
            assert key in config, f"config.yaml lacks {key}"


WITH_TESTS = [(template, combo) for template, combo in BAKES if combo["include_test"]]


@pytest.mark.parametrize("template,combo", WITH_TESTS, ids=[f"{t}-{combo_id(c)}" for t, c in WITH_TESTS])
def test_generated_tests_shrink_the_projects_own_config_keys(baked, template: str, combo: dict) -> None:
    project = baked(template, **combo)
    config = yaml.safe_load((project / "config.yaml").read_text())
    tiny = set(conftest_tiny(project))
    foreign = sorted(tiny - set(config))
    assert not foreign, f"tests/conftest.py sets keys config.yaml does not have: {foreign}"
    missed = sorted(set(OFFLINE) & set(config) - tiny)
    assert not missed, f"tests/conftest.py leaves {missed} as large as config.yaml has them (see OFFLINE)"


@each_bake
def test_generated_requirements_install_what_the_project_imports(baked, template: str, combo: dict) -> None:
    project = baked(template, **combo)
    requirements = (project / "requirements.txt").read_text()
    for tracker in TRACKERS:  # the tracker's package (named like the option value), only when chosen
        assert (f"\n{tracker}>=" in requirements) == (combo["logger"] == tracker), f"{tracker} in requirements.txt"
    assert ("fire" in requirements) == (combo["argparser"] == "fire")
    assert ("hydra-core" in requirements) == (combo["argparser"] == "hydra")
    assert "\npydantic>=" in requirements and "\nnumpy\n" in requirements, "the config's check, the seeded batches"
    exporting = (project / "requirements-export.txt").read_text()
    for package in EXPORT_ONLY.values():
        assert f"\n{package}>=" in exporting and package not in requirements, f"{package}: export.py's alone"
    for module in third_party_imports(project):
        if module in EXPORT_ONLY:
            continue
        assert module in PROVIDED_BY, f"unknown import {module}: add it to PROVIDED_BY or EXPORT_ONLY"
        assert PROVIDED_BY[module] is None or PROVIDED_BY[module] in requirements, f"no requirement installs {module}"
    assert ("torchvision" in requirements) == (template != "text-classification")
    if template == "text-classification":
        assert "transformers" in requirements and "datasets" in requirements
    if combo["backend"] == "xla-tpu":
        assert "torch_xla[tpu]==2.9.0" in requirements and "torch==2.9.0" in requirements
        assert ("torchvision==0.24.0" in requirements) == (template != "text-classification")
    else:
        assert "torch_xla" not in requirements


@each_bake
def test_torch_xla_appears_in_tpu_projects_only(baked, template: str, combo: dict) -> None:
    project = baked(template, **combo)
    readme = (project / "README.md").read_text()
    if combo["backend"] == "xla-tpu":
        assert "## Training on a TPU" in readme
        assert "import torch_xla" in (project / "machinery" / "tpu" / "xla.py").read_text()
        return
    assert "## Training on a TPU" not in readme
    for path in project_files(project):
        if path.suffix == ".py":
            assert "torch_xla" not in imported_modules(path), f"{path.name} imports torch_xla in a non-TPU project"


@each_bake
def test_generated_readme_has_the_sections_the_answers_ask_for(baked, template: str, combo: dict) -> None:
    readme = (baked(template, **combo) / "README.md").read_text()
    assert ("## Tests" in readme) == combo["include_test"]
    assert ("## Experiment tracking" in readme) == (combo["logger"] != "none")
    assert ("tensorboard --logdir" in readme) == (combo["logger"] == "tensorboard")
    assert ("mlflow ui --backend-store-uri" in readme) == (combo["logger"] == "mlflow")
    if resolved_launcher(combo) == "torchrun":
        assert "torchrun --nproc_per_node=2 main.py" in readme and "torchrun --nnodes=2 --node_rank=0" in readme
    assert ("## Train on a Slurm cluster" in readme) == (combo["scheduler"] == "slurm")


SLURM_BAKES = [(template, combo) for template, combo in BAKES if combo["scheduler"] == "slurm"]


@pytest.mark.parametrize("template,combo", SLURM_BAKES, ids=[f"{t}-{combo_id(c)}" for t, c in SLURM_BAKES])
def test_slurm_job_script_is_bash_that_asks_slurm_for_what_the_answers_give(baked, template: str, combo: dict) -> None:
    """slurm.sh parses as bash, its #SBATCH lines come before its first command (sbatch reads no further), and
    they ask for the answers' nodes and GPUs; the requeue is there exactly when a run can continue."""
    script = baked(template, **combo) / "slurm.sh"
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, f"slurm.sh is not valid bash:\n{proc.stderr}"
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/bin/bash"
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    options = [line.split()[1] for line in lines[:first_command] if line.startswith("#SBATCH ")]
    assert not [line for line in lines[first_command:] if line.startswith("#SBATCH")], "sbatch ignores these"
    gpus = ["--gpus-per-node=2"] if combo["backend"] == "nccl" else []
    expected = ["--nodes=1", "--ntasks-per-node=1", *gpus, "--signal=B:TERM@120", "--requeue"]
    assert [option for option in expected if option not in options] == [], options
    assert "scontrol requeue" in script.read_text() and "save_training: *false" in script.read_text(), (
        "requeued when the run can continue: save_training, read from config.yaml"
    )


@pytest.mark.parametrize("template", TEMPLATES)
def test_default_answers_generate_a_single_process_project(bake, template: str) -> None:
    project = bake(template)
    readme = (project / "README.md").read_text()
    assert "python main.py config.yaml" in readme
    assert yaml.safe_load((project / "config.yaml").read_text())["backend"] is None


def test_a_question_added_to_cookiecutter_json_is_varied_without_a_test_change(monkeypatch) -> None:
    """The answer matrix is read from each template's cookiecutter.json: a new choice, yes/no or number is
    baked with each of its values; text answers and answers computed from others are not varied."""
    context = dict(template_context(TEMPLATES[0]))
    context.update(wrap_model=False, optimizer=["adam", "sgd", "lamb"], warmup_iters="0", run_name="", _private="x")
    context["computed"] = "{{ cookiecutter.backend }}"
    monkeypatch.setattr(answers, "template_context", lambda template: context)
    options = answers.template_options(TEMPLATES[0])
    assert options["wrap_model"] == [False, True] and options["optimizer"] == ["adam", "sgd", "lamb"]
    assert options["warmup_iters"] == ["0", "3"], "a number: 0 (off) and a setting"
    assert not {"run_name", "_private", "computed", "project_name"} & set(options), "text, private, computed"
    combos = pairwise(options)
    for name in ("wrap_model", "optimizer", "warmup_iters"):
        assert {str(c[name]) for c in combos} == {str(v) for v in options[name]}, f"{name}: every value baked"


def test_the_tpu_pins_are_written_once_in_the_template_sources() -> None:
    """torch, torch_xla and torchvision versions for TPU projects live in flags.j2 only: requirements, READMEs
    and (through requirements.txt) the notebook's set-up cell take them from there."""
    sources = [p for p in (REPO / "common").rglob("*") if p.is_file()] + [p for p in (REPO / "hooks").glob("*.py")]
    sources += [p for t in TEMPLATES for p in (REPO / t).rglob("*") if p.is_file() and not p.is_symlink()]
    holders = {
        p.relative_to(REPO).as_posix()
        for p in sources
        if re.search(r"\b(2\.9\.0|0\.24\.0)\b", p.read_text(errors="replace"))
    }
    assert holders == {"common/partials/flags.j2"}, f"a TPU pin written outside flags.j2: {sorted(holders)}"


# What may differ in the machinery of two bakes of one template and one backend family (GPUs and CPUs: nccl, gloo;
# TPUs: xla-tpu), over the pairwise grid of every other answer: each an optional file's hook. Nothing else: a
# training behaviour is a config key, read at run time.
MACHINERY_DIFFERENCES = {
    "__init__.py": "the map names the optional modules a project has",
    "cli.py": "the argparser's command line, a file per answer",
    "training/fit.py": "the one-line hooks that attach the tracker and a sweep's pruning",
    "training/tracker.py": "the tracker's module, a file per answer",
}


def backend_family(combo: dict) -> str:
    return "tpu" if combo["backend"] == "xla-tpu" else "gpu"


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_machinery_is_the_same_whatever_the_answers_but_for_its_optional_files(baked, template: str) -> None:
    differ: dict[str, set[str]] = {}
    for family in ("gpu", "tpu"):
        projects = [
            baked(template, **combo) for name, combo in BAKES if name == template and backend_family(combo) == family
        ]
        assert len(projects) > 1, f"{template}: the grid has {len(projects)} {family} bakes"
        seen: dict[str, bytes] = {}
        for project in projects:
            for path in sorted((project / "machinery").rglob("*.py")):
                module = path.relative_to(project / "machinery").as_posix()
                text = path.read_bytes()
                if seen.setdefault(module, text) != text:
                    differ.setdefault(module, set()).add(family)
    assert set(differ) == set(MACHINERY_DIFFERENCES), (
        f"{template}: machinery modules that differ between two bakes of one backend family: {sorted(differ)}; "
        f"only an optional file's hook may ({sorted(MACHINERY_DIFFERENCES)}): make the behaviour a config key"
    )
