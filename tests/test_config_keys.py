"""The config: config.py's ``Config`` declares every key config.yaml holds, with its type and the value the
project was generated with; a run reads config.yaml into it, and refuses a key that is missing, undeclared or of
another type, naming it (with the value to add, for a missing one).

config.yaml is written from config.py (one source): these tests check that the two agree for every answer that
shapes them, and that every argparser's path refuses what it must.
"""

import re
import subprocess
import types
import typing
from pathlib import Path

import pytest
import yaml
from answers import TEMPLATES, pairwise, template_options, valid
from projects import load_module, make_offline, readme_train_command
from rendering import render

# Every answer the tests vary (any may shape config.yaml), and an output_dir with quotes, a " # " and a
# trailing backslash: the values a user types that YAML and Python quote.
ODD_OUTPUT_DIR = './it\'s "my" runs # 1\\'


# config.py's Config holds the project's own keys on machinery/settings.py's RunSettings (the run's settings).
CONFIG_FILES = ("config.py", "config.yaml", "machinery/__init__.py", "machinery/settings.py")


def config_combinations(template: str) -> list[dict]:
    options = template_options(template)
    options["output_dir"] = ["./logs", ODD_OUTPUT_DIR]
    return [valid(combo) for combo in pairwise(options)]


def generated_config(project: Path) -> dict:
    """config.py's Config defaults, the values the project was generated with, in config.yaml's order (the
    project's own keys, then the run settings). config.py needs no torch."""
    return load_module(project / "machinery" / "settings.py").as_dict(load_module(project / "config.py").Config())


def config_yaml(project: Path) -> dict:
    """The keys of config.yaml that reach the code: Hydra consumes `defaults` and `hydra` itself."""
    config = yaml.safe_load((project / "config.yaml").read_text())
    return {key: value for key, value in config.items() if key not in ("defaults", "hydra")}


@pytest.mark.parametrize("template", TEMPLATES)
def test_config_yaml_holds_config_py_keys_in_order_with_their_defaults(tmp_path: Path, template: str) -> None:
    for index, answers in enumerate(config_combinations(template)):
        project = tmp_path / str(index)  # config.py and config.yaml, rendered as cookiecutter renders them
        (project / "machinery").mkdir(parents=True)
        for name, text in zip(CONFIG_FILES, render(template, answers, *CONFIG_FILES), strict=True):
            (project / name).write_text(text)
        config = load_module(project / "config.py").Config
        defaults, written = generated_config(project), config_yaml(project)
        assert list(written.items()) == list(defaults.items()), (
            f"{template} with {answers}: config.yaml must hold config.py's keys, in its order, with its defaults"
        )
        hints = typing.get_type_hints(config)
        for key, value in written.items():  # each default of its declared type
            assert of_type(value, hints[key]), f"{template} with {answers}: {key}: {value!r} is not {hints[key]}"


def of_type(value, kind) -> bool:
    """Whether a default is of its declared type: None where it may be, one of a Literal's values (mixed_precision),
    a list[str] a list (its items by the settings' own check, in the project's tests)."""
    if typing.get_origin(kind) is typing.Literal:
        return value in typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return any(of_type(value, option) for option in typing.get_args(kind))
    return isinstance(value, typing.get_origin(kind) or kind)


# A key of each template's own part of config.yaml, removed with `backend` (which the Code-Generator's
# configs lack: its projects pass --backend on the command line).
OWN_KEY = {
    "vision-classification": "model",
    "text-classification": "max_length",
    "gan": "z_dim",
    "vision-segmentation": "crop_size",
}


# Each template once and each argparser once: the check is shared code (machinery/settings.py), what differs
# per template is its Config (checked above) and per argparser the path to the check.
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
    generated = generated_config(project)
    assert yaml.safe_dump({own: generated[own], "backend": None}, sort_keys=False) in proc.stderr, proc.stderr


@pytest.mark.parametrize("argparser", ["argparse", "fire"])
def test_config_keys_come_from_the_file_or_the_command_line_declared_and_of_their_type(bake, argparser: str) -> None:
    """The Code-Generator's configs have no backend: its projects say `--backend gloo` when they train. A key
    config.py does not declare, or a value of another type, is refused naming the key."""
    project = bake(argparser=argparser, launcher="none")
    config = make_offline(project)
    del config["backend"]
    path = project / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    settings = load_module(project / "machinery" / "settings.py")
    config_class = load_module(project / "config.py").Config
    assert settings.load_config(path, config_class, backend="gloo").backend == "gloo"
    # PyYAML reads 5e-5 as a string: a float key takes it as the number (`lr: 5e-5` in config.yaml).
    path.write_text(re.sub(r"(?m)^lr: .*$", "lr: 5e-5", path.read_text()))
    assert settings.load_config(path, config_class, backend=None).lr == 5e-5
    with pytest.raises(SystemExit, match=r"Unknown config keys \['bakend'\]"):
        settings.load_config(path, config_class, backend="gloo", bakend="gloo")
    wrong = r"values of the wrong type: lr: 'fast' is not float; max_epochs: 2.5 is not int"
    with pytest.raises(SystemExit, match=wrong):
        settings.load_config(path, config_class, backend=None, lr="fast", max_epochs=2.5)
    path.write_text(yaml.safe_dump({**config, "backend": None, "warmup": 3}, sort_keys=False))
    with pytest.raises(SystemExit, match="has keys that config.py does not declare: warmup. Declare each"):
        settings.load_config(path, config_class)
    # A key given twice (a `cruft update` conflict resolved by keeping both sides) is refused naming its lines:
    # PyYAML would keep the last one. Hydra's OmegaConf refuses it too, naming the key and its second line.
    text = yaml.safe_dump({**config, "backend": None}, sort_keys=False)
    first = text.splitlines().index("seed: 666") + 1
    path.write_text(text + "seed: 7\n")
    twice = rf"config.yaml gives a key more than once: seed \(lines {first}, {len(text.splitlines()) + 1}\)"
    with pytest.raises(SystemExit, match=twice):
        settings.load_config(path, config_class)
    # An empty file is a config that lacks every key.
    path.write_text("")
    with pytest.raises(SystemExit, match="lacks keys that this project reads: dataset, data_path"):
        settings.load_config(path, config_class)
