"""The pre-generation hook rejects bad answers with a message naming option, value and rule."""

import keyword
from pathlib import Path

import pytest
from answers import REPO, TEMPLATES, template_context
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter
from projects import load_module


def load_hook(name: str):
    return load_module(REPO / "hooks" / f"{name}.py")


PRE = load_hook("pre_gen_project")


def test_tpu_rejection_says_the_required_value(tmp_path: Path, capfd) -> None:
    with pytest.raises(FailedHookException):
        cookiecutter(
            str(REPO / TEMPLATES[0]),
            no_input=True,
            extra_context={"backend": "xla-tpu", "launcher": "torchrun"},
            output_dir=str(tmp_path),
        )
    stderr = capfd.readouterr().err
    assert "launcher='torchrun' is not allowed with backend='xla-tpu': it must be 'spawn' or 'auto'" in stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("template", TEMPLATES)
def test_choosing_tpu_makes_the_defaults_follow_the_tpu_rules(bake, template: str) -> None:
    """A user who picks xla-tpu and presses Enter through the rest gets a valid TPU project."""
    project = bake(template, backend="xla-tpu")
    config = (project / "config.yaml").read_text()
    assert "backend: xla-tpu" in config and "nproc_per_node: 8" in config
    assert "PJRT_DEVICE=TPU python main.py config.yaml --backend xla-tpu" in (project / "README.md").read_text()


def test_rejection_shows_as_failed_hook_in_pytest_cookies(bake_result) -> None:
    result = bake_result(github_repo="not a repository")
    assert result.exit_code != 0
    assert isinstance(result.exception, FailedHookException)


# Every choice question, read from cookiecutter.json (a new one, such as ci, is checked without a change here).
CHOICES = [name for name, default in template_context(TEMPLATES[0]).items() if isinstance(default, list)]
CHOICES = [name for name in CHOICES if not name.startswith("_")]


@pytest.mark.parametrize("question", CHOICES)
def test_unknown_choice_value_is_rejected_by_cookiecutter(tmp_path: Path, question: str) -> None:
    """A value outside a choice's list stops generation before any file is written, naming the question,
    the value and the choices (cookiecutter's own check, before the hooks)."""
    with pytest.raises(ValueError, match=rf"nonsense provided for choice variable {question}, but the choices are"):
        cookiecutter(
            str(REPO / TEMPLATES[0]), no_input=True, extra_context={question: "nonsense"}, output_dir=str(tmp_path)
        )
    assert list(tmp_path.iterdir()) == []


def test_every_error_is_reported_at_once() -> None:
    answers = {**load_defaults(), "project_slug": "3d", "github_repo": "x"}
    errors = PRE.validate(answers)
    assert len(errors) == 2 and "project_slug" in errors[0] and "github_repo" in errors[1]


@pytest.mark.parametrize("template", TEMPLATES)
def test_default_answers_are_valid(template: str) -> None:
    assert PRE.validate(load_defaults(template)) == []


def test_a_former_questions_answer_is_taken_and_ignored(tmp_path: Path) -> None:
    """What was a question is a config key (mixed_precision, patience, ...): an answer to it, from an older project's
    replay or `cruft update` (which passes its recorded answers), generates the project as if it were not given,
    its key at the default (CHANGELOG: `python -m machinery.upgrade` then puts the recorded value in config.yaml)."""
    former = {"mixed_precision": True, "patience": "5", "nproc_per_node": "4", "ema": True}
    project = Path(
        cookiecutter(str(REPO / TEMPLATES[0]), no_input=True, extra_context=former, output_dir=str(tmp_path))
    )
    config = (project / "config.yaml").read_text()
    assert "mixed_precision: null" in config and "patience: null" in config and "ema_momentum: null" in config
    assert PRE.validate({**load_defaults(), **former}) == []


# Project names a user may type, each of which once gave (or could give) a slug the hook refused:
# digits first, a module of the project, a Python keyword, nothing but punctuation, non-ASCII.
ODD_NAMES = [
    "3d-model",
    "3D Vision",
    "42",
    "Data",
    "utils",
    "XLA compat",
    "Tests",
    "torch",
    "class",
    "Import",
    "!!!",
    "___",
    "Modèle 3D",
    "模型",
    "My Model (v2)!",
    # Long enough that its slug would make a notebook file name over the 255 bytes file systems allow.
    "A very long project name " * 12,
    "1" + "x" * 300,
]


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("name", ODD_NAMES)
def test_the_slug_derived_from_any_name_is_accepted(template: str, name: str) -> None:
    """The user never typed the slug: whatever the name, the derived one must pass the hook's rules."""
    answers = load_defaults(template, project_name=name)
    slug = answers["project_slug"]
    assert PRE.slug_errors(slug, answers["_reserved_slugs"]) == [], f"name {name!r} derived the refused slug {slug!r}"
    assert PRE.validate(answers) == []
    assert answers["__project_dir"] == slug, "the project directory is named after the slug"


def test_derived_slugs_keep_the_name_and_add_only_what_makes_them_valid() -> None:
    derived = {name: load_defaults(project_name=name)["project_slug"] for name in ("3d-model", "Data", "class", "!!!")}
    assert derived == {
        "3d-model": "project_3d_model",
        "Data": "data_project",
        "class": "class_project",
        "!!!": "project",
    }


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_module_a_template_generates_is_a_reserved_slug(template: str) -> None:
    """A project named like one of its own modules would shadow it: the hook refuses such a slug."""
    reserved = template_context(template)["_reserved_slugs"]
    tree = REPO / template / "{{cookiecutter.__project_dir}}"
    modules = {path.stem for path in tree.glob("*.py")}
    packages = {path.name for path in tree.iterdir() if path.is_dir() and not path.name.startswith(".")}  # tests/
    generated = modules | packages
    expected = generated | {"torch", "ignite"} | {word for word in keyword.kwlist if word.islower()}
    assert expected <= set(reserved), f"add {sorted(expected - set(reserved))} to _reserved_slugs in cookiecutter.json"
    for name in generated:
        assert PRE.slug_errors(name, reserved), f"project_slug={name!r} must be refused: {template} generates it"


def load_defaults(template: str = TEMPLATES[0], **answers: str) -> dict:
    """The template's default answers (with ``answers`` typed in), rendered as cookiecutter would render them."""
    from cookiecutter.generate import generate_context
    from cookiecutter.prompt import prompt_for_config

    context = generate_context(context_file=str(REPO / template / "cookiecutter.json"), extra_context=answers)
    return dict(prompt_for_config(context, no_input=True))
