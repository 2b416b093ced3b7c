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
            extra_context={"backend": "xla-tpu", "launcher": "torchrun", "nproc_per_node": "4"},
            output_dir=str(tmp_path),
        )
    stderr = capfd.readouterr().err
    assert "launcher='torchrun' is not allowed with backend='xla-tpu': it must be 'spawn'" in stderr
    assert "nproc_per_node='4' is not allowed with backend='xla-tpu': it must be 8" in stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("template", TEMPLATES)
def test_choosing_tpu_makes_the_defaults_follow_the_tpu_rules(bake, template: str) -> None:
    """A user who picks xla-tpu and presses Enter through the rest gets a valid TPU project."""
    project = bake(template, backend="xla-tpu")
    config = (project / "config.yaml").read_text()
    assert "backend: xla-tpu" in config and "nproc_per_node: 8" in config
    assert "PJRT_DEVICE=TPU python main.py config.yaml --backend xla-tpu" in (project / "README.md").read_text()


def test_rejection_shows_as_failed_hook_in_pytest_cookies(bake_result) -> None:
    result = bake_result(master_port="99999")
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
    answers = {**load_defaults(), "master_port": "0", "n_saved": "x"}
    errors = PRE.validate(answers)
    assert len(errors) == 2 and "master_port" in errors[0] and "n_saved" in errors[1]


@pytest.mark.parametrize("template", TEMPLATES)
def test_default_answers_are_valid(template: str) -> None:
    assert PRE.validate(load_defaults(template)) == []


def test_an_option_a_template_does_not_ask_is_not_checked() -> None:
    answers = load_defaults("gan")
    assert "patience" not in answers
    assert PRE.validate({**answers, "n_saved": "0"}) == [
        "n_saved='0' is not allowed: it must be a whole number of at least 1"
    ]


def test_float16_on_a_tpu_is_refused_naming_what_is_allowed() -> None:
    """TPUs compute in bfloat16, which needs no gradient scaler: float16 (CUDA's, with its scaler) is refused there."""
    assert PRE.validate(load_defaults(backend="xla-tpu", mixed_precision="float16")) == [
        "mixed_precision='float16' is not allowed with backend='xla-tpu': it must be 'bfloat16' or 'no' "
        "(TPUs compute in bfloat16, which needs no gradient scaler; float16's scaler is for CUDA GPUs)"
    ]
    for precision in ("no", "bfloat16"):
        assert PRE.validate(load_defaults(backend="xla-tpu", mixed_precision=precision)) == []
    for precision in ("no", "float16", "bfloat16"):
        assert PRE.validate(load_defaults(backend="gloo", mixed_precision=precision)) == []


def test_an_older_projects_yes_no_mixed_precision_is_refused_naming_the_values_allowed(tmp_path: Path) -> None:
    """mixed_precision was a yes/no question. `cruft update` of a project generated then passes its answer to
    cookiecutter, which refuses it before any hook, naming the choices (CHANGELOG: `cruft update
    --variables-to-update` gives the new one); a replay file reaches the hook, which names the new answers."""
    choices = r"\['no', 'float16', 'bfloat16'\]"
    with pytest.raises(
        ValueError, match=rf"True provided for choice variable mixed_precision, but the choices are {choices}"
    ):
        cookiecutter(
            str(REPO / TEMPLATES[0]), no_input=True, extra_context={"mixed_precision": True}, output_dir=str(tmp_path)
        )
    assert list(tmp_path.iterdir()) == []
    allowed = "it must be one of ['no', 'float16', 'bfloat16'] (the question was yes/no: for true give"
    assert PRE.validate({**load_defaults(), "mixed_precision": True}) == [
        f"mixed_precision=True is not allowed: {allowed} 'float16' or 'bfloat16', for false 'no')"
    ]
    assert PRE.validate({**load_defaults(backend="xla-tpu"), "mixed_precision": False}) == [
        f"mixed_precision=False is not allowed: {allowed} 'bfloat16', for false 'no')"
    ]


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
