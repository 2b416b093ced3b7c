"""Write each template's cookiecutter.json from common/questions.yaml, the one source of the questions.

    python scripts/questions.py          # write the four cookiecutter.json files
    python scripts/questions.py --check  # write nothing; exit 1 naming each file that differs

A template's cookiecutter.json is every key of questions.yaml in its order, with the template's own values,
prompts and skipped questions from its entry under ``templates``, then ``__prompts__``: cookiecutter asks in
that order, and a Jinja default reads the answers above it. The files are laid out for reading (a value on
one line when it fits in 120 characters); tests/test_questions.py fails while one differs from this
script's output.
"""

import argparse
import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "common" / "questions.yaml"
WIDTH = 120
SPEC_FIELDS = {"default", "prompt", "labels"}
TEMPLATE_FIELDS = {"values", "prompts", "skip"}


class Grouped(list):
    """A list written in groups, each starting a line (``_reserved_slugs``): JSON sees one flat list."""

    def __init__(self, groups: list[list]) -> None:
        super().__init__(item for group in groups for item in group)
        self.groups = groups


def _require(condition, message: str) -> None:
    """questions.yaml's rules (raised, not asserted: they hold under ``python -O`` too)."""
    if not condition:
        raise ValueError(f"common/questions.yaml: {message}")


def load(source: Path = SOURCE) -> dict:
    return yaml.safe_load(source.read_text(encoding="utf-8"))


def templates(source: dict | None = None) -> list[str]:
    """The templates questions.yaml writes a cookiecutter.json for, in its order."""
    return list((source or load())["templates"])


def _value(key: str, value):
    """A value as cookiecutter.json holds it; YAML's own types refused where cookiecutter would see another
    answer (an unquoted number, a null)."""
    if isinstance(value, list) and value and all(isinstance(group, list) for group in value):
        return Grouped([[_value(key, item) for item in group] for group in value])
    if isinstance(value, list):
        return [_value(key, item) for item in value]
    if isinstance(value, dict):
        return {str(name): _value(key, item) for name, item in value.items()}
    if not isinstance(value, str | bool):
        raise ValueError(f"common/questions.yaml: {key}: {value!r} is a YAML {type(value).__name__}: quote it")
    return value


def context(template: str, source: dict | None = None) -> dict:
    """The template's cookiecutter.json, as data: its keys in order, then ``__prompts__``."""
    source = source or load()
    keys, own = source["keys"], source["templates"][template] or {}
    unknown = set(own) - TEMPLATE_FIELDS
    _require(not unknown, f"templates.{template}: unknown fields {sorted(unknown)}, not {sorted(TEMPLATE_FIELDS)}")
    values, prompts, skip = own.get("values") or {}, own.get("prompts") or {}, set(own.get("skip") or [])
    questions = [key for key in keys if not key.startswith("_")]
    for name, names in (("values", set(values)), ("prompts", set(prompts)), ("skip", skip)):
        allowed = set(keys) if name == "values" else set(questions)
        _require(names <= allowed, f"templates.{template}.{name}: {sorted(names - allowed)} are not questions of keys")
    _require(not set(prompts) & skip, f"templates.{template}: a prompt for a question it skips")

    data, asked = {}, {}
    for key, spec in keys.items():
        spec = spec or {}
        _require(set(spec) <= SPEC_FIELDS, f"keys.{key}: unknown fields {sorted(set(spec) - SPEC_FIELDS)}")
        if key in skip:
            continue
        if key == "_template_name":
            data[key] = template
        elif key in values:
            data[key] = _value(key, values[key])
        else:
            _require("default" in spec, f"keys.{key} has no default: templates.{template}.values must give it")
            data[key] = _value(key, spec["default"])
        if key.startswith("_"):
            _require("prompt" not in spec and "labels" not in spec, f"keys.{key}: a private key is never asked")
            continue
        _require(isinstance(spec.get("prompt"), str), f"keys.{key}: a question needs a prompt")
        prompt = prompts.get(key, spec["prompt"])
        choices = data[key] if isinstance(data[key], list) else None
        labels = spec.get("labels")
        if choices is None:
            _require(labels is None, f"keys.{key}: labels for a question that is not a choice")
            asked[key] = prompt
        else:
            _require(labels is not None and list(labels) == choices, f"keys.{key}: one label per choice, in order")
            asked[key] = {"__prompt__": prompt, **{value: _value(key, label) for value, label in labels.items()}}
    data["__prompts__"] = asked
    return data


def dumps(data: dict) -> str:
    """cookiecutter.json's text: a value on its key's line when it fits, else one item or member a line."""
    return "\n".join(["{", *_members(data, 2), "}"]) + "\n"


def _members(obj: dict, indent: int) -> list[str]:
    lines = []
    for index, (key, value) in enumerate(obj.items()):
        lines += _member(key, value, indent, "," if index < len(obj) - 1 else "")
    return lines


def _member(key: str, value, indent: int, comma: str) -> list[str]:
    pad = " " * indent
    head = f"{pad}{json.dumps(key)}: "
    inline = f"{head}{json.dumps(value)}{comma}"
    if not isinstance(value, dict | list) or (len(inline) <= WIDTH and not isinstance(value, Grouped)):
        return [inline]
    if isinstance(value, dict):
        return [f"{head}{{", *_members(value, indent + 2), f"{pad}}}{comma}"]
    # A long list: its items wrapped to the width, each group starting a line.
    inner, lines = pad + "  ", []
    for group in value.groups if isinstance(value, Grouped) else [value]:
        line = ""
        for item in group:
            word = f"{json.dumps(item)},"
            if line and len(f"{inner}{line} {word}") > WIDTH:
                lines.append(inner + line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(inner + line)
    lines[-1] = lines[-1].removesuffix(",")
    return [f"{head}[", *lines, f"{pad}]{comma}"]


def expected_files(repo: Path = REPO, source: Path = SOURCE) -> dict[Path, str]:
    """Each template's cookiecutter.json path and the text this script writes there."""
    loaded = load(source)
    return {repo / template / "cookiecutter.json": dumps(context(template, loaded)) for template in templates(loaded)}


def stale_files(repo: Path = REPO, source: Path = SOURCE) -> list[Path]:
    """The cookiecutter.json files that differ from what this script writes (or are missing)."""
    return [
        path
        for path, text in expected_files(repo, source).items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]


def main(argv: list[str] | None = None, repo: Path = REPO) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(repo)
        for path in stale:
            print(
                f"{path.relative_to(repo)} differs from common/questions.yaml: run `python scripts/questions.py`",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path, text in expected_files(repo).items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(exist_ok=True)  # a new template's directory
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(repo)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
