"""Every generated README has its sections once, in the documented order, with the run outputs under
"Outputs", and every command or override it shows is in the project's own command-line syntax.

The READMEs (and the files they describe) are rendered the way cookiecutter renders them, without
writing a project (`tests/rendering.py`): the whole grid of templates x trackers x backends x argparsers
is then seconds, once per template (its tests run on one worker, which renders the grid once).
`test_rendered_readme_is_the_baked_one` checks that this rendering is cookiecutter's.
`tests/test_commands.py` runs the commands for real.
"""

import itertools
import json
import re
import shlex
from collections import Counter

import pytest
import yaml
from answers import OPTIONS, REPO, TEMPLATES, resolved_launcher, template_context, valid
from cookiecutter.generate import generate_context
from cookiecutter.prompt import prompt_for_config
from projects import load_module
from rendering import render
from scheduling import on_one_worker

# The sections of a generated README, in this order (CONTRIBUTING.md, "Generated READMEs"). A README
# may lack some (no tracker, no TPU, no tests) but never has one twice, another one, or another order.
README_HEADINGS = [
    "## Install",
    "## Try it offline",
    "## Train",
    "## Training on a TPU",
    "### Check that nothing recompiles",
    "## Train on your data",
    "## Use the model",
    "## Notebook",
    "### Run on Kaggle",
    "## Configuration",
    "## Make it yours",
    "## Outputs",
    "## Experiment tracking",
    "## Stop and continue",
    "### Resume from a checkpoint",
    "## Train on a Slurm cluster",
    "## Sweep",
    "## Tests",
    "## Pre-commit hooks",
    "## Continuous integration",
    "## Generate it again",
]
POST = load_module(REPO / "hooks" / "post_gen_project.py")
# Files a run writes that the template's README must list under "Outputs" (besides the shared ones).
TEMPLATE_OUTPUTS = {
    "vision-classification": [],
    "text-classification": [],
    "gan": ["samples/epoch_<epoch>.png", "losses.png"],
    "vision-segmentation": ["predictions/epoch_<epoch>.png"],
}
LAUNCHERS = {
    "nccl": ["torchrun", "spawn", "none", "auto"],
    "gloo": ["spawn", "torchrun", "auto", "none"],
    "xla-tpu": ["auto", "spawn", "auto", "spawn"],
}
BACKEND_CHOICES = ("nccl", "gloo", "xla-tpu")
# The files whose text these tests read, rendered once per combination (and the argparser's command line).
FILES = ("README.md", "config.yaml")
# A template's tests read one grid of renders: they run on one worker.
EACH_TEMPLATE = [on_one_worker(f"readme-{template}", template) for template in TEMPLATES]


def readme_combos(template: str) -> list[dict]:
    """Every tracker x backend x argparser; the other answers that shape the README vary along."""
    combos = []
    product = itertools.product(OPTIONS["logger"], OPTIONS["backend"], OPTIONS["argparser"])
    for index, (logger, backend, argparser) in enumerate(product):
        combo = {"logger": logger, "backend": backend, "argparser": argparser}
        combo["launcher"] = LAUNCHERS[backend][index % 4]
        combo["include_test"] = index % 2 == 0
        if "sweep" in template_context(template):
            combo["sweep"] = "optuna" if index % 2 == 1 else "none"
        combos.append(valid(combo))
    return combos


def prose(markdown: str) -> str:
    """The Markdown without its fenced code blocks."""
    return re.sub(r"^```.*?^```$", "", markdown, flags=re.MULTILINE | re.DOTALL)


def sections(readme: str) -> dict[str, str]:
    """Each heading (as written, with its #s) -> the text up to the next heading of any level."""
    parts = re.split(r"^(#{1,3} .+)$", prose(readme), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def headings(readme: str) -> list[str]:
    return re.findall(r"^#{1,3} .+$", prose(readme), flags=re.MULTILINE)


def run_output_items(text: str) -> list[str]:
    """The file names of the list items that describe a run's files: "- `name`: what it holds"."""
    return re.findall(r"^- `([^`]+)`:", text, flags=re.MULTILINE)


def commands(readme: str) -> list[list[str]]:
    """The arguments after ``main.py`` of every command in the README's bash blocks."""
    found = []
    for block in re.findall(r"^```bash\n(.*?)^```$", readme, flags=re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            argv = shlex.split(line)
            if "main.py" in argv:
                found.append(argv[argv.index("main.py") + 1 :])
    return found


def override_hints(text: str) -> list[list[str]]:
    """Inline code that reads as command-line overrides: `--backend gloo`, `--key=value`, `++key=value`, `key=value`."""
    spans = re.findall(r"`([^`\n]+)`", text)
    override = r"--[a-z][a-z_]*[= ][^\s`]+|(\+\+)?[a-z][a-z_]*=[^\s`]+"
    return [shlex.split(span) for span in spans if re.fullmatch(override, span)]


def check_arguments(args: list[str], argparser: str, keys: set[str], where: str) -> None:
    """Fail unless ``args`` (what follows main.py, or an override on its own) is what the argparser accepts.

    argparse: the config path, then ``--key value`` (see machinery/cli.py); fire: the config path, then
    ``--key=value``; hydra: the config's directory and name, then ``key=value`` or ``++key=value``. Every key must be
    a key of the project's config.yaml.
    """
    lead = {
        "argparse": ["config.yaml"],
        "fire": ["config.yaml"],
        "hydra": ["--config-dir", ".", "--config-name", "config"],
    }
    if args[: len(lead[argparser])] == lead[argparser]:
        args = args[len(lead[argparser]) :]
    if argparser == "hydra" and args[:1] == ["-m"]:  # Hydra's multirun, before the overrides of its grid
        args = args[1:]
    if argparser == "argparse":
        pairs = list(zip(args[::2], args[1::2], strict=False))
        assert len(args) % 2 == 0 and all(re.fullmatch(r"--\w+", flag) for flag, _ in pairs), (
            f"{where}: {args} is not argparse syntax: the script takes `config.yaml [--key value ...]`"
        )
        unknown = [flag for flag, _ in pairs if flag[2:] not in keys]
        assert not unknown, f"{where}: {unknown} override keys config.yaml lacks"
        assert all(value in BACKEND_CHOICES for flag, value in pairs if flag == "--backend"), f"{where}: {args}"
        return
    pattern = r"--(\w+)=\S+" if argparser == "fire" else r"(?:\+\+)?(\w+)=\S+"
    for arg in args:
        match = re.fullmatch(pattern, arg)
        assert match, f"{where}: {arg!r} is not {argparser} override syntax"
        assert match[1] in keys, f"{where}: {arg!r} overrides {match[1]!r}, which config.yaml lacks"


def test_rendered_readme_is_the_baked_one(bake) -> None:
    """render() renders as cookiecutter does; the post-generation hook then only completes the "Generate it
    again" command, with the answers that differ from the rendered defaults."""
    answers = valid({"logger": "wandb", "backend": "gloo", "argparser": "hydra", "launcher": "torchrun"})
    project = bake("gan", **answers)
    readme, defaults = render("gan", answers, "README.md", ".cookiecutter-defaults.json")
    context = generate_context(context_file=str(REPO / "gan" / "cookiecutter.json"), extra_context=answers)
    completed = POST.with_regenerate_command(readme, prompt_for_config(context, no_input=True), json.loads(defaults))
    assert completed == (project / "README.md").read_text(), "render() must render as cookiecutter does"
    assert completed != readme, "the hook adds the answers that differ from the defaults"


@pytest.mark.parametrize("template", EACH_TEMPLATE)
def test_readme_sections_appear_once_in_the_documented_order(template: str) -> None:
    for answers in readme_combos(template):
        readme, _ = render(template, answers, *FILES)
        found = headings(readme)
        assert found[0].startswith("# "), f"{answers}: the README starts with its title"
        found = found[1:]
        twice = [heading for heading, count in Counter(found).items() if count > 1]
        assert not twice, f"{template} {answers}: headings {twice} appear more than once"
        unknown = [heading for heading in found if heading not in README_HEADINGS]
        assert not unknown, f"{template} {answers}: headings {unknown} are not in README_HEADINGS (add them there)"
        documented = [heading for heading in README_HEADINGS if heading in found]
        assert found == documented, f"{template} {answers}: the README's sections are out of order: {found}"
        expected = {
            "## Experiment tracking": answers["logger"] != "none",
            "## Training on a TPU": answers["backend"] == "xla-tpu",
            "### Run on Kaggle": answers["backend"] == "xla-tpu",
            "## Tests": answers["include_test"],
        }
        for heading, present in expected.items():
            assert (heading in found) == present, f"{template} {answers}: {heading} present: {heading in found}"


@pytest.mark.parametrize("template", EACH_TEMPLATE)
def test_readme_lists_every_run_output_under_outputs(template: str) -> None:
    for answers in readme_combos(template):
        readme, _ = render(template, answers, *FILES)
        by_heading = sections(readme)
        misplaced = {heading: run_output_items(text) for heading, text in by_heading.items() if heading != "## Outputs"}
        misplaced = {heading: items for heading, items in misplaced.items() if items}
        assert not misplaced, f"{template} {answers}: run outputs listed outside ## Outputs: {misplaced}"
        outputs = by_heading["## Outputs"]
        listed = run_output_items(outputs)
        for name in ["config-lock.yaml", "training.log", *TEMPLATE_OUTPUTS[template]]:
            assert name in listed, f"{template} {answers}: ## Outputs does not list {name}: {listed}"
        if answers["backend"] == "xla-tpu":
            assert "xla_metrics.json" in listed, f"{template} {answers}: ## Outputs does not list xla_metrics.json"
        # One list: its items follow each other (continuation lines are indented), no text between them.
        lines = outputs.strip().splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("- "))
        span = lines[first:]
        end = next((i for i, line in enumerate(span) if not line.startswith(("- ", "  "))), len(span))
        assert len(run_output_items("\n".join(span[:end]))) == len(listed), (
            f"{template} {answers}: the run outputs under ## Outputs are not one list:\n{outputs}"
        )
        if not template_context(template)["_eval_metric"]:
            assert "eval metric" not in readme, (
                f"{template} {answers}: a template without an evaluator promises eval metrics"
            )


@pytest.mark.parametrize("template", EACH_TEMPLATE)
def test_readme_commands_and_hints_use_the_projects_own_syntax(template: str) -> None:
    """Every training command, override example and backend advice of the README, and the advice
    machinery/launch.py prints for nccl without a GPU (in machinery/cli.py's syntax), parse with the project's argparser
    and name config keys."""
    for answers in readme_combos(template):
        readme, config, cli = render(template, answers, *FILES, f"machinery/command_lines/{answers['argparser']}.py")
        keys = set(yaml.safe_load(config))
        argparser = answers["argparser"]
        found = commands(readme)
        assert found, f"{template} {answers}: the README shows no training command"
        for args in found:
            check_arguments(args, argparser, keys, f"{template} {answers}: README command")
        for hint in override_hints(prose(readme)):
            check_arguments(hint, argparser, keys, f"{template} {answers}: README hint")
        (override,) = re.findall(r'^OVERRIDE = "(.+)"', cli, flags=re.MULTILINE)
        advice = [override.format(key="backend", value="gloo")] if answers["backend"] != "xla-tpu" else []
        for hint in advice:
            check_arguments(shlex.split(hint), argparser, keys, f"{template} {answers}: check_backend's advice")
        # The README gives the same advice wherever it mentions nccl.
        in_readme = re.findall(r"add `([^`]+)` at the end of the command", readme)
        expected = advice if answers["backend"] == "nccl" and resolved_launcher(answers) != "none" else []
        assert in_readme == expected, f"{template} {answers}: the README's advice for nccl without a GPU: {in_readme}"


@pytest.mark.parametrize("template", EACH_TEMPLATE)
def test_readme_prose_has_no_broken_plurals_or_glued_code(template: str) -> None:
    for answers in readme_combos(template):
        readme, _ = render(template, answers, *FILES)
        text = prose(readme)
        assert not re.search(r"\b1 processes\b", text), f"{template} {answers}: '1 processes'"
        # A code span closed right before a letter: a newline eaten by trim_blocks after "{% endif %}".
        glued = [span[0] for span in re.finditer(r"`[^`\n]+`\w*", text) if not span[0].endswith("`")]
        assert not glued, f"{template} {answers}: no space after inline code: {glued}"
