"""A config that lacks keys the code reads is refused at load time, naming each with the value to add.

The keys and their values come from one place in the generated project: ``TEMPLATE_CONFIG`` in
``utils.py``, which is ``config.yaml`` as the template rendered it. These tests check that it stays
exactly that for every answer that shapes config.yaml, and that every argparser uses it.
"""

import ast
import subprocess
from pathlib import Path

import pytest
import yaml
from answers import REPO, TEMPLATES, pairwise, template_options, valid
from cookiecutter.main import cookiecutter
from projects import load_module, make_offline, readme_train_command

# Every answer the tests vary (any may shape config.yaml), and an output_dir with quotes, a " # " and a
# trailing backslash: the values a user types that YAML and Python quote.
ODD_OUTPUT_DIR = './it\'s "my" runs # 1\\'


def config_combinations(template: str) -> list[dict]:
    options = template_options(template)
    options["output_dir"] = ["./logs", ODD_OUTPUT_DIR]
    return [valid(combo) for combo in pairwise(options)]


def template_config(project: Path) -> dict:
    """``TEMPLATE_CONFIG`` as utils.py defines it, read without importing utils (no torch_xla needed)."""
    tree = ast.parse((project / "utils.py").read_text())
    (node,) = [n for n in tree.body if isinstance(n, ast.AnnAssign) and n.target.id == "TEMPLATE_CONFIG"]
    (text,) = node.value.args
    return yaml.safe_load(ast.literal_eval(text))


def config_yaml(project: Path) -> dict:
    """The keys of config.yaml that reach the code: Hydra consumes `defaults` and `hydra` itself."""
    config = yaml.safe_load((project / "config.yaml").read_text())
    return {key: value for key, value in config.items() if key not in ("defaults", "hydra")}


@pytest.mark.parametrize("template", TEMPLATES)
def test_template_config_is_config_yaml_for_every_answer_that_shapes_it(tmp_path: Path, template: str) -> None:
    for index, answers in enumerate(config_combinations(template)):
        project = Path(
            cookiecutter(
                str(REPO / template),
                no_input=True,
                extra_context=answers,
                output_dir=str(tmp_path / str(index)),
                accept_hooks=False,
            )
        )
        assert template_config(project) == config_yaml(project), (
            f"{template} with {answers}: TEMPLATE_CONFIG in utils.py must hold config.yaml's keys and values"
        )


# A key of each template's own part of config.yaml, removed with `backend` (which the Code-Generator's
# configs lack: its projects pass --backend on the command line).
OWN_KEY = {
    "vision-classification": "model",
    "text-classification": "max_length",
    "gan": "z_dim",
    "vision-segmentation": "crop_size",
}


# Each template once and each argparser once: the check is shared code (utils.py), what differs per
# template is TEMPLATE_CONFIG (checked above) and per argparser the path to the check.
REFUSED_RUNS = [
    ("vision-classification", "argparse"),
    ("text-classification", "fire"),
    ("gan", "hydra"),
    ("vision-segmentation", "argparse"),
]


@pytest.mark.parametrize("template,argparser", REFUSED_RUNS)
def test_config_lacking_keys_is_refused_naming_each_with_its_value(bake, template: str, argparser: str) -> None:
    project = bake(template, argparser=argparser, launcher="none")
    config = make_offline(project)
    own = OWN_KEY[template]
    for key in (own, "backend"):
        del config[key]
    (project / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    argv, _ = readme_train_command(project)
    proc = subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, f"training must not start without {own} and backend:\n{proc.stderr[-3000:]}"
    crashed = "Traceback" in proc.stderr or "AttributeError" in proc.stderr
    assert not crashed, f"a missing key must be reported, not crash:\n{proc.stderr[-3000:]}"
    assert f"lacks keys that this project reads: {own}, backend." in proc.stderr, proc.stderr
    # The values to paste in: the template's, as YAML.
    generated = template_config(project)
    assert yaml.safe_dump({own: generated[own], "backend": None}, sort_keys=False) in proc.stderr, proc.stderr


@pytest.mark.parametrize("argparser", ["argparse", "fire"])
def test_a_key_the_config_lacks_may_come_from_the_command_line(bake, argparser: str) -> None:
    """The Code-Generator's configs have no backend: its projects say `--backend gloo` when they train."""
    project = bake(argparser=argparser, launcher="none")
    config = make_offline(project)
    del config["backend"]
    path = project / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    utils = load_module(project / "utils.py")
    assert utils.load_config(path, backend="gloo").backend == "gloo"
    with pytest.raises(SystemExit, match=r"Unknown config keys \['bakend'\]"):
        utils.load_config(path, backend="gloo", bakend="gloo")
    # An empty file is a config that lacks every key.
    path.write_text("")
    with pytest.raises(SystemExit, match="lacks keys that this project reads: seed, dataset"):
        utils.load_config(path)
