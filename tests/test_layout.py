"""The repository's structure: the template menu, and one source for everything shared."""

import json
import os
import re
from pathlib import Path

import pytest
from answers import CLASSIFIERS, REPO, SUPERVISED, TEMPLATES

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


# The one link to a template's own file: its cookiecutter.json, rendered into the project with the answers
# (the defaults the post-generation hook compares them with, for the README's "Generate it again" command),
# then deleted by that hook.
DEFAULTS_LINK = "{{cookiecutter.__project_dir}}/.cookiecutter-defaults.json"


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_symlink_resolves_inside_the_shared_sources(template: str) -> None:
    for link in shared_links(template):
        target = link.resolve()
        assert target.exists(), f"dangling symlink {link.relative_to(REPO)} (it would crash generation)"
        if link == REPO / template / DEFAULTS_LINK:
            assert target == REPO / template / "cookiecutter.json", f"{link} must link the template's own questions"
        else:
            assert target.is_relative_to(COMMON) or target == REPO / "hooks", f"{link} points outside common/"
        assert not os.readlink(link).startswith("/"), f"{link} must be a relative symlink"


# The files of a project whose name starts with a dot are not symlinks (CONTRIBUTING.md): each is one line
# that includes its shared source from common/partials/, the same line in every template.
DOT_FILES = {
    ".gitignore": '{% include "gitignore" %}\n',
    ".pre-commit-config.yaml": '{% include "pre-commit-config.yaml" %}\n',
    ".gitlab-ci.yml": '{% include "ci/gitlab.yml" %}\n',
    ".github/workflows/ci.yml": '{% include "ci/github.yml" %}\n',
}


@pytest.mark.parametrize("template", TEMPLATES)
def test_dot_files_include_their_one_shared_source(template: str) -> None:
    tree = REPO / template / "{{cookiecutter.__project_dir}}"
    found = {
        path.relative_to(tree).as_posix()
        for path in tree.rglob("*")
        if path.is_file()
        and not path.is_symlink()
        and any(part.startswith(".") for part in path.relative_to(tree).parts)
    }
    assert found == set(DOT_FILES), f"{template}: dot files {sorted(found)}, expected {sorted(DOT_FILES)}"
    for name, line in DOT_FILES.items():
        assert (tree / name).read_text() == line, f"{template}/{name} must be the one line {line!r}"


@pytest.mark.parametrize("template", TEMPLATES)
def test_whole_shared_files_are_linked_not_copied(template: str) -> None:
    project_tree = REPO / template / "{{cookiecutter.__project_dir}}"
    for shared in sorted((COMMON / "project").iterdir()):
        if shared.name in {".ruff_cache", "__pycache__"}:
            continue
        path = project_tree / shared.name
        assert path.is_symlink() and path.resolve() == shared, f"{path} must be a symlink to {shared}"
    # The engines of the templates trained on labels (common/supervised/) and the classifiers' metrics
    # (common/classifier/) are one file each too, linked by every template that uses them.
    linked = [("supervised", SUPERVISED), ("classifier", CLASSIFIERS)]
    for folder in (folder for folder, users in linked if template in users):
        for shared in sorted((COMMON / folder).glob("*.py")):
            path = project_tree / shared.name
            assert path.is_symlink() and path.resolve() == shared, f"{path} must be a symlink to {shared}"


# What a template never has: the image files' module where the data are texts, the sweep where nothing ranks trials.
NOT_LINKED = {"text-classification": ("data/files.py",), "gan": ("sweeps/*.py",)}


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_machinery_module_is_linked_at_its_place_in_every_template(template: str) -> None:
    """One machinery for every template: each file of common/machinery/ is a symlink at the same place in the project
    tree (in real folders: cookiecutter renders a symlinked folder empty); the hook removes what the answers leave."""
    shared = COMMON / "machinery"
    tree = REPO / template / "{{cookiecutter.__project_dir}}" / "machinery"
    never = {path for pattern in NOT_LINKED.get(template, ()) for path in shared.glob(pattern)}
    expected = sorted(path.relative_to(shared) for path in shared.rglob("*.py") if path not in never)
    linked = sorted(path.relative_to(tree) for path in tree.rglob("*.py"))
    assert linked == expected, f"{template}: machinery/ lacks {sorted(set(expected) - set(linked))}"
    for relative in linked:
        path = tree / relative
        assert path.is_symlink() and path.resolve() == shared / relative, f"{path} must link {shared / relative}"
    assert not [path for path in tree.rglob("*") if path.is_dir() and path.is_symlink()], "folders are real folders"


# What the answers may still write into the machinery: a few one-line hooks where the trainer is set up (fit.py) and
# the map's lines for optional modules (__init__.py); everything else is switched by config keys at run time.
MACHINERY_CONDITIONALS = {"training/fit.py": 4, "__init__.py": 5}


def test_the_machinery_holds_no_answer_but_a_few_hooks() -> None:
    shared = COMMON / "machinery"
    found = {
        path.relative_to(shared).as_posix(): count
        for path in shared.rglob("*.py")
        if (count := len(re.findall(r"{%-?\s*if\b", path.read_text())))
    }
    assert found == MACHINERY_CONDITIONALS, f"{{% if %}} in common/machinery/ (a behaviour is a config key): {found}"


@pytest.mark.parametrize("template", TEMPLATES)
def test_notebook_cells_are_linked_file_by_file_into_a_real_folder(template: str) -> None:
    """The notebook's Python cells (common/notebook/) reach each project tree as `.notebook/`, which the
    post-generation hook reads and removes: a real folder of links, since cookiecutter renders a symlinked file
    as a copy of its target but a symlinked folder as an empty one."""
    folder = REPO / template / "{{cookiecutter.__project_dir}}" / ".notebook"
    assert folder.is_dir() and not folder.is_symlink(), f"{folder} must be a real folder"
    shared = sorted((COMMON / "notebook").iterdir())
    assert sorted(path.name for path in folder.iterdir()) == [path.name for path in shared]
    for target in shared:
        path = folder / target.name
        assert path.is_symlink() and path.resolve() == target, f"{path} must be a symlink to {target}"


# Questions about the eval metric: only a template with an eval metric (`_eval_metric`, read by flags.j2) asks them
# (a sweep ranks trials by it). A GAN has none: its losses do not rank its samples.
EVAL_METRIC_QUESTIONS = {"sweep"}


@pytest.mark.parametrize("template", TEMPLATES)
def test_templates_ask_the_same_shared_questions(template: str) -> None:
    """Shared hooks and sources rely on these answers: every template must offer them identically."""
    reference = json.loads((REPO / TEMPLATES[0] / "cookiecutter.json").read_text())
    context = json.loads((REPO / template / "cookiecutter.json").read_text())
    own = {"project_name", "_template_name", "_eval_metric", "_max_epochs", "__prompts__"}
    assert isinstance(context["_eval_metric"], str), "every template says which eval metric it has, if any"
    if not context["_eval_metric"]:
        own |= EVAL_METRIC_QUESTIONS
        assert not EVAL_METRIC_QUESTIONS & set(context), f"{template} has no eval metric to rank or stop by"
    for key in (k for k in reference if k not in own):
        assert context.get(key) == reference[key], f"{template}: option {key} differs from {TEMPLATES[0]}"
    assert set(context["__prompts__"]) == {k for k in context if not k.startswith("_")}, "one prompt per question"


# A Jinja block tag: its keyword, for the depth count below.
JINJA_TAG = re.compile(r"{%-?\s*(if|endif)\b")


def template_sources() -> list[Path]:
    """Every file cookiecutter renders or includes: common/ and each template's own project files."""
    own = [path for template in TEMPLATES for path in (REPO / template / "{{cookiecutter.__project_dir}}").rglob("*")]
    return sorted(path for path in [*COMMON.rglob("*"), *own] if path.is_file() and not path.is_symlink())


def test_jinja_conditionals_in_template_sources_are_at_most_one_level_deep() -> None:
    """A nested {% if %} hides which answers produce a line: derive the decision once in flags.j2 instead."""
    nested = []
    for path in template_sources():
        depth = 0
        for match in JINJA_TAG.finditer(path.read_text()):
            depth += 1 if match[1] == "if" else -1
            if depth > 1:
                line = path.read_text().count("\n", 0, match.start()) + 1
                nested.append(f"{path.relative_to(REPO)}:{line}")
    assert not nested, f"{{% if %}} inside another {{% if %}} (compute the condition in flags.j2): {nested}"
