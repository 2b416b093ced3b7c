"""One source for the questions: each template's cookiecutter.json is what scripts/questions.py writes from
common/questions.yaml, never a file edited by hand."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import questions
from answers import REPO, TEMPLATES

RUN = "run `python scripts/questions.py`"


def test_questions_yaml_has_every_template() -> None:
    assert questions.templates() == TEMPLATES, "common/questions.yaml's `templates` must be scripts/answers.py's"


@pytest.mark.parametrize("template", TEMPLATES)
def test_cookiecutter_json_is_what_questions_yaml_makes(template: str) -> None:
    path = REPO / template / "cookiecutter.json"
    written = questions.expected_files()[path]
    assert path.read_text(encoding="utf-8") == written, (
        f"{template}/cookiecutter.json differs from common/questions.yaml: edit the questions there, then {RUN}"
    )


def test_check_names_the_file_that_differs_and_writing_mends_it(tmp_path: Path, capsys) -> None:
    for template in TEMPLATES:
        (tmp_path / template).mkdir()
        shutil.copy(REPO / template / "cookiecutter.json", tmp_path / template)
    assert questions.main(["--check"], repo=tmp_path) == 0
    edited = tmp_path / "gan" / "cookiecutter.json"
    edited.write_text(edited.read_text().replace('"include_test": true', '"include_test": false'))
    assert questions.main(["--check"], repo=tmp_path) == 1
    assert capsys.readouterr().err == f"gan/cookiecutter.json differs from common/questions.yaml: {RUN}\n"
    assert questions.main([], repo=tmp_path) == 0 and questions.main(["--check"], repo=tmp_path) == 0
    assert edited.read_text() == (REPO / "gan" / "cookiecutter.json").read_text()


def test_check_passes_on_the_repository_from_the_command_line() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "questions.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_a_question_is_written_to_every_template_once_with_its_own_wording() -> None:
    """One entry in questions.yaml reaches every template's cookiecutter.json, at its place in the order and
    with a prompt; a template's own value, wording or skip applies to it alone."""
    source = questions.load()
    keys = list(source["keys"].items())
    at = [name for name, _ in keys].index("logger") + 1
    source["keys"] = dict(keys[:at] + [("wrap_model", {"default": False, "prompt": "Wrap the model?"})] + keys[at:])
    source["templates"]["gan"].setdefault("prompts", {})["wrap_model"] = "Wrap both networks?"
    for template in TEMPLATES:
        context = questions.context(template, source)
        names = list(context)
        assert names[names.index("logger") + 1] == "wrap_model" and context["wrap_model"] is False
        wording = "Wrap both networks?" if template == "gan" else "Wrap the model?"
        assert context["__prompts__"]["wrap_model"] == wording
        assert json.loads(questions.dumps(context)) == context, "the text is the data"
    assert "sweep" not in questions.context("gan", source), "skipped by the gan template"


@pytest.mark.parametrize(
    ("key", "spec", "message"),
    [
        ("nnodes", {"default": 1, "prompt": "Number of nodes"}, "nnodes: 1 is a YAML int: quote it"),
        ("nnodes", {"default": "1"}, "keys.nnodes: a question needs a prompt"),
        ("ci", {"default": ["github", "none"], "prompt": "", "labels": {"none": "", "github": ""}}, "ci: one label"),
        ("_eval_metric", {"default": "", "prompt": "Metric"}, "keys._eval_metric: a private key is never asked"),
    ],
)
def test_questions_yaml_mistakes_are_refused_with_the_key(key: str, spec: dict, message: str) -> None:
    """YAML's own types (an unquoted number is an int, cookiecutter would see another answer), a question
    without a prompt, labels out of the choices' order, a prompt for a private key."""
    source = questions.load()
    source["keys"][key] = spec
    with pytest.raises(ValueError, match=message):
        questions.context(TEMPLATES[0], source)
