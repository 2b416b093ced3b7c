"""A config carried across a template update: ``python -m machinery.upgrade`` after ``cruft update``, before you commit.

What the update reset in config.yaml, each key's value put back from the commit before it (``REVISION``, HEAD by
default): the key's value in that commit's config.yaml, or the answer of that commit's .cruft.json that set it when
it was a question (mixed_precision, ema, patience, ... before Ignite Templates' issue 64). A key you have changed
since the update is left as it is. Prints each key it sets."""

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from machinery.config_files import load_run_settings, read_yaml, with_values
from machinery.settings import RunSettings

# A former question's answer (as .cruft.json records it) as its config key's value; a number's 0 meant "off".
FORMER_ANSWERS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "mixed_precision": ("mixed_precision", lambda answer: None if answer == "no" else answer),
    "ema_momentum": ("ema", lambda answer: 0.001 if answer in (True, "yes") else None),
    "patience": ("patience", lambda answer: int(answer) or None),
    "limit_sec": ("limit_sec", lambda answer: int(answer) or None),
    **{key: (key, lambda answer: answer in (True, "yes")) for key in ("compile", "deterministic", "timer")},
    **{key: (key, lambda answer: answer in (True, "yes")) for key in ("terminate_on_nan", "save_training")},
    "save_best_model": ("save_best_model", lambda answer: answer in (True, "yes")),
    **{key: (key, int) for key in ("n_saved", "save_every_iters", "log_every_iters")},
    **{key: (key, str) for key in ("filename_prefix", "output_dir")},
}


def former_values(revision: str, keys: list[str]) -> dict[str, Any]:
    """The values ``keys`` had in the commit ``revision``: its config.yaml's, else its .cruft.json answers'."""
    config = yaml.safe_load(_committed(revision, "config.yaml") or "") or {}
    answers = json.loads(_committed(revision, ".cruft.json") or "{}").get("context", {}).get("cookiecutter", {})
    found = {key: config[key] for key in keys if key in config}
    for key in set(keys) - set(found):
        question, value = FORMER_ANSWERS.get(key, (None, None))
        if question in answers:
            found[key] = value(answers[question])
    return found


def _committed(revision: str, path: str) -> str | None:
    """``path``'s text in the commit ``revision``, or None where it has none."""
    shown = subprocess.run(["git", "show", f"{revision}:{path}"], capture_output=True, text=True, check=False)
    return shown.stdout if shown.returncode == 0 else None


def upgrade(revision: str = "HEAD", path: Path = Path("config.yaml")) -> dict[str, tuple[Any, Any]]:
    """Put back in ``path`` each run key's value that a template update reset to its default; return what it set."""
    current, defaults = read_yaml(path), {key: field.default for key, field in RunSettings.model_fields.items()}
    reset = [key for key, value in current.items() if key in defaults and value == defaults[key]]
    restored = {key: value for key, value in former_values(revision, reset).items() if value != current[key]}
    if restored:
        path.write_text(with_values(path.read_text(), restored))
        load_run_settings(path)  # the config as it now is, checked
    return {key: (current[key], value) for key, value in restored.items()}


if __name__ == "__main__":
    revision = (sys.argv[1:] or ["HEAD"])[0]
    changes = upgrade(revision)
    for key, (before, after) in changes.items():
        print(f"config.yaml: {key}: {before!r} -> {after!r}")
    print(f"{len(changes)} key(s) of config.yaml set as they were in {revision}" if changes else "Nothing to set")
