"""The repository's structure: the template menu, and one source for everything shared."""

import json
import os
from pathlib import Path

import pytest
from helpers import REPO, TEMPLATES

COMMON = REPO / "common"


def test_menu_lists_exactly_the_templates_that_exist() -> None:
    menu = json.loads((REPO / "cookiecutter.json").read_text())["templates"]
    assert sorted(menu) == sorted(TEMPLATES)
    for name, entry in menu.items():
        assert (REPO / entry["path"] / "cookiecutter.json").is_file(), f"menu entry {name} points nowhere"
        assert entry["title"] and entry["description"]


def shared_links(template: str) -> list[Path]:
    root = REPO / template
    return [p for p in root.rglob("*") if p.is_symlink()] + [p for p in root.iterdir() if p.is_symlink()]


@pytest.mark.parametrize("template", TEMPLATES)
def test_template_shares_hooks_and_partials_through_symlinks(template: str) -> None:
    root = REPO / template
    assert (root / "hooks").is_symlink() and (root / "hooks").resolve() == REPO / "hooks"
    assert (root / "templates").is_symlink() and (root / "templates").resolve() == COMMON / "partials"


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_symlink_resolves_inside_the_shared_sources(template: str) -> None:
    for link in shared_links(template):
        target = link.resolve()
        assert target.exists(), f"dangling symlink {link.relative_to(REPO)} (it would crash generation)"
        assert target.is_relative_to(COMMON) or target == REPO / "hooks", f"{link} points outside common/"
        assert not os.readlink(link).startswith("/"), f"{link} must be a relative symlink"


@pytest.mark.parametrize("template", TEMPLATES)
def test_whole_shared_files_are_linked_not_copied(template: str) -> None:
    project_tree = REPO / template / "{{cookiecutter.__project_dir}}"
    for shared in sorted((COMMON / "project").iterdir()):
        if shared.name in {".ruff_cache", "__pycache__"}:
            continue
        path = project_tree / shared.name
        assert path.is_symlink() and path.resolve() == shared, f"{path} must be a symlink to {shared}"


# Questions about the eval metric (best models, early stopping): only a template with an eval metric
# (`_eval_metric`, read by flags.j2) asks them. A GAN has none: its losses do not rank its samples.
EVAL_METRIC_QUESTIONS = {"save_best_model", "patience"}


@pytest.mark.parametrize("template", TEMPLATES)
def test_templates_ask_the_same_shared_questions(template: str) -> None:
    """Shared hooks and sources rely on these answers: every template must offer them identically."""
    reference = json.loads((REPO / TEMPLATES[0] / "cookiecutter.json").read_text())
    context = json.loads((REPO / template / "cookiecutter.json").read_text())
    own = {"project_name", "_template_name", "_eval_metric", "__prompts__"}
    assert isinstance(context["_eval_metric"], str), "every template says which eval metric it has, if any"
    if not context["_eval_metric"]:
        own |= EVAL_METRIC_QUESTIONS
        assert not EVAL_METRIC_QUESTIONS & set(context), f"{template} has no eval metric to rank or stop by"
    for key in (k for k in reference if k not in own):
        assert context.get(key) == reference[key], f"{template}: option {key} differs from {TEMPLATES[0]}"
    assert set(context["__prompts__"]) == {k for k in context if not k.startswith("_")}, "one prompt per question"
