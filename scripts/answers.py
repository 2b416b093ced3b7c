"""The templates and the answers the tests and the test lanes give them, read from each template's
cookiecutter.json: a question added there is varied by every answer matrix without a change here."""

import itertools
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = ["vision-classification", "text-classification", "gan", "vision-segmentation"]
# Templates that share the classifiers' metrics (common/classifier/).
CLASSIFIERS = ["vision-classification", "text-classification"]
# Templates trained on labels, which share the engines (common/supervised/): segmentation labels pixels.
SUPERVISED = [*CLASSIFIERS, "vision-segmentation"]
# The real dataset each template's config.yaml starts with (tests switch them to "synthetic").
DATASETS = {
    "vision-classification": "cifar10",
    "text-classification": "imdb",
    "gan": "cifar10",
    "vision-segmentation": "voc",
}


def template_context(template: str) -> dict:
    """The template's cookiecutter.json: its questions, defaults and private settings."""
    return json.loads((REPO / template / "cookiecutter.json").read_text())


def answer_values(default) -> list | None:
    """The values the tests give a question, read from its default in cookiecutter.json alone.

    Every choice of a list; both values of a yes/no, the default first; a number's default and another
    (0, which turns a feature such as early stopping off, and 3; otherwise the default and its double).
    None for a text answer (typed as is: tests/test_hostile_input.py covers what a user may type) and
    for an answer computed from others (Jinja, e.g. nproc_per_node: ``valid`` sets it).
    """
    if isinstance(default, list):
        return default
    if isinstance(default, bool):
        return [default, not default]
    if isinstance(default, str) and default.isdigit():
        return [default, "3" if default == "0" else str(2 * int(default))]
    return None


def template_options(template: str) -> dict[str, list]:
    """Every question of the template and the values the tests cover, derived from its cookiecutter.json:
    a question added there is varied by every test matrix without a change here."""
    questions = {name: default for name, default in template_context(template).items() if not name.startswith("_")}
    return {name: values for name, default in questions.items() if (values := answer_values(default)) is not None}


# Every question of any template, with the values the tests cover.
OPTIONS: dict[str, list] = {
    name: values for template in TEMPLATES for name, values in template_options(template).items()
}


def pairwise(options: dict[str, list]) -> list[dict]:
    """A small set of combinations in which every pair of values of two options appears at least once.

    Greedy and deterministic: each new combination takes, option by option, the value that covers
    the most pairs not yet covered.
    """
    names = list(options)
    uncovered = {
        ((a, va), (b, vb)) for a, b in itertools.combinations(names, 2) for va in options[a] for vb in options[b]
    }
    combos = []
    while uncovered:
        # Start from an uncovered pair so that every round makes progress.
        (a, va), (b, vb) = min(
            uncovered, key=lambda pair: (names.index(pair[0][0]), names.index(pair[1][0]), str(pair))
        )
        combo = {a: va, b: vb}
        for name in names:
            if name not in combo:
                combo[name] = max(options[name], key=lambda value, name=name: _gain(uncovered, combo, name, value))
        ordered = {name: combo[name] for name in names}
        uncovered -= {((x, ordered[x]), (y, ordered[y])) for x, y in itertools.combinations(names, 2)}
        combos.append(ordered)
    return combos


def _gain(uncovered: set, combo: dict, name: str, value) -> int:
    """How many uncovered pairs choosing ``name=value`` would cover, given the values chosen so far."""
    return sum(((n, v), (name, value)) in uncovered or ((name, value), (n, v)) in uncovered for n, v in combo.items())


def resolved_launcher(combo: dict) -> str:
    """The launcher "auto" stands for: spawn on TPU, torchrun for a Slurm job, one process otherwise."""
    if combo["launcher"] == "auto":
        return "spawn" if combo["backend"] == "xla-tpu" else "torchrun" if combo.get("scheduler") == "slurm" else "none"
    return combo["launcher"]


def valid(combo: dict) -> dict:
    """Adjust a combination to the template's rules (8 spawned replicas on TPU, a Slurm job started by torchrun and
    never on TPU)."""
    combo = dict(combo)
    if combo["backend"] == "xla-tpu" and "scheduler" in combo:
        combo["scheduler"] = "none"
    elif combo.get("scheduler") == "slurm" and combo["launcher"] != "auto":
        combo["launcher"] = "torchrun"
    if combo["backend"] == "xla-tpu":
        combo["launcher"] = "auto" if combo["launcher"] == "auto" else "spawn"
    return combo
