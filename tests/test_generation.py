"""Every option value, baked at least once (pairwise over the options), gives a clean project."""

import py_compile
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import OPTIONS, TEMPLATES, pairwise, resolved_launcher, valid

COMBOS = [valid(combo) for combo in pairwise(OPTIONS)]
TRACKERS = [value for value in OPTIONS["logger"] if value != "none"]
LEFTOVER = re.compile(r"\{\{|\{%|%\}|\}\}|cookiecutter\.")
TEXT_SUFFIXES = {".py", ".md", ".txt", ".yaml", ".toml", ".cfg", ".ipynb", ""}


def combo_id(combo: dict) -> str:
    return "-".join(f"{k}={v}" for k, v in combo.items())


def project_files(project: Path) -> list[Path]:
    return sorted(p for p in project.rglob("*") if p.is_file() and ".ruff_cache" not in p.parts)


def ruff(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=project, capture_output=True, text=True, check=False
    )


def test_pairwise_covers_every_value_of_every_option() -> None:
    for name, values in OPTIONS.items():
        used = {str(combo[name]) for combo in COMBOS}
        assert used >= {str(v) for v in values}, f"option {name}: values {values} not all baked"


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("combo", COMBOS, ids=combo_id)
def test_generated_project_is_clean(bake, template: str, combo: dict) -> None:
    project = bake(template, **combo)
    files = project_files(project)
    names = {p.relative_to(project).as_posix() for p in files}
    expected = {"main.py", "data.py", "models.py", "trainers.py", "utils.py", "config.yaml", "requirements.txt"}
    assert expected <= names, f"missing files: {expected - names}"
    assert ("tests/test_training.py" in names) == combo["include_test"], "tests/ must exist only when asked for"

    for path in files:
        if path.suffix == ".py":
            py_compile.compile(str(path), doraise=True)
        if path.suffix in TEXT_SUFFIXES:
            text = path.read_text()
            assert not LEFTOVER.search(text), f"template leftover in {path.name}: {LEFTOVER.search(text)[0]!r}"
            assert "\n\n\n\n" not in text, f"stray blank lines in {path.name}"
            assert text.endswith("\n") and not text.endswith("\n\n"), f"{path.name} must end with one newline"

    lint = ruff(project, "check", ".")
    assert lint.returncode == 0, f"ruff check failed:\n{lint.stdout}{lint.stderr}"
    fmt = ruff(project, "format", "--check", "--diff", ".")
    assert fmt.returncode == 0, f"ruff format would change files:\n{fmt.stdout}{fmt.stderr}"

    config = yaml.safe_load((project / "config.yaml").read_text())
    assert config["dataset"] in {"cifar10"}
    xla = combo["backend"] == "xla-tpu"
    assert config["backend"] == (None if resolved_launcher(combo) == "none" else combo["backend"])
    assert config["output_dir"] == "./logs"
    for key in ("batch_size", "eval_batch_size", "num_workers", "max_epochs", "log_every_iters"):
        assert isinstance(config[key], int), f"config.yaml: {key} must be an integer"
    for key in ("train_epoch_length", "eval_epoch_length", "resume_from"):
        assert key in config, f"config.yaml lacks {key}"
    assert ("patience" in config) == (int(combo["patience"]) > 0)
    assert ("limit_sec" in config) == (int(combo["limit_sec"]) > 0)

    requirements = (project / "requirements.txt").read_text()
    for tracker in TRACKERS:  # the tracker's package (named like the option value), only when chosen
        assert (f"\n{tracker}>=" in requirements) == (combo["logger"] == tracker), f"{tracker} in requirements.txt"
    assert ("fire" in requirements) == (combo["argparser"] == "fire")
    assert ("hydra-core" in requirements) == (combo["argparser"] == "hydra")
    if xla:
        assert "torch_xla[tpu]==2.9.0" in requirements and "torch==2.9.0" in requirements
        assert config["nproc_per_node"] == 8
        assert "xla_compat.py" in names and "## Training on a TPU" in (project / "README.md").read_text()
    else:
        assert "torch_xla" not in requirements
        assert "xla_compat.py" not in names and "tests/test_xla.py" not in names
        for path in files:
            if path.suffix == ".py":
                assert "torch_xla" not in path.read_text(), f"{path.name} imports torch_xla in a non-TPU project"

    readme = (project / "README.md").read_text()
    assert ("## Tests" in readme) == combo["include_test"]
    assert ("## Experiment tracking" in readme) == (combo["logger"] != "none")
    assert ("tensorboard --logdir" in readme) == (combo["logger"] == "tensorboard")
    assert ("mlflow ui --backend-store-uri" in readme) == (combo["logger"] == "mlflow")
    if resolved_launcher(combo) == "torchrun":
        assert f"torchrun --nnodes={combo['nnodes']}" in readme or "torchrun --nproc_per_node=2" in readme


@pytest.mark.parametrize("template", TEMPLATES)
def test_default_answers_generate_a_single_process_project(bake, template: str) -> None:
    project = bake(template)
    readme = (project / "README.md").read_text()
    assert "python main.py config.yaml" in readme
    assert yaml.safe_load((project / "config.yaml").read_text())["backend"] is None
