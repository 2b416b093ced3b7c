"""The template menu: `cookiecutter <repo>` without --directory asks which template, then its questions."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from answers import REPO, TEMPLATES, template_context

MENU = json.loads((REPO / "cookiecutter.json").read_text())["templates"]


def test_menu_offers_every_template_in_the_repository() -> None:
    on_disk = sorted(path.parent.name for path in REPO.glob("*/cookiecutter.json"))
    assert sorted(MENU) == sorted(TEMPLATES) == on_disk, "the menu, the tests' TEMPLATES and the folders must agree"
    for name, entry in MENU.items():
        assert entry["path"] == f"./{name}", f"menu entry {name} points at {entry['path']}"


@pytest.mark.parametrize("template", TEMPLATES)
def test_answering_the_menu_generates_the_chosen_template(tmp_path: Path, template: str) -> None:
    """A user picks the template's number, then presses Enter at every question (the defaults)."""
    number = list(MENU).index(template) + 1
    questions = len(template_context(template)["__prompts__"])
    answers = f"{number}\n" + "\n" * questions
    cookiecutter = Path(sys.executable).with_name("cookiecutter")
    proc = subprocess.run(
        [str(cookiecutter), str(REPO), "--output-dir", str(tmp_path)],
        input=answers,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"choosing {number} in the menu failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    assert f"{number} - {MENU[template]['title']}" in proc.stdout, "the menu lists the template under its title"
    (project,) = tmp_path.iterdir()
    readme = (project / "README.md").read_text()
    assert f"Generated from the `{template}` template of Ignite Templates" in readme, (
        f"menu choice {number} did not generate {template}"
    )
    assert f"\ncookiecutter gh:<org>/<repo> --directory {template} --no-input\n" in readme, (
        "all defaults: no answer to give"
    )
    assert (project / "main.py").is_file() and (project / f"{project.name}.ipynb").is_file()
