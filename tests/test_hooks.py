"""The pre-generation hook rejects bad answers with a message naming option, value and rule."""

import importlib.util
from pathlib import Path

import pytest
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter
from helpers import REPO, TEMPLATES


def load_hook(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def test_unknown_choice_value_is_rejected_by_cookiecutter(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="launcher"):
        cookiecutter(
            str(REPO / TEMPLATES[0]), no_input=True, extra_context={"launcher": "mpirun"}, output_dir=str(tmp_path)
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


def load_defaults(template: str = TEMPLATES[0]) -> dict:
    """The template's default answers, rendered as cookiecutter would render them."""
    from cookiecutter.generate import generate_context
    from cookiecutter.prompt import prompt_for_config

    context = generate_context(context_file=str(REPO / template / "cookiecutter.json"))
    return dict(prompt_for_config(context, no_input=True))
