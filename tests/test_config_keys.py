"""The config: config.py's ``Config`` declares every key config.yaml holds, with its type and the value the
project was generated with; a run reads config.yaml into it, and refuses a key that is missing, undeclared, of
another type, out of its range or at odds with another, naming it (with the value to add, for a missing one), before
it writes anything.

config.yaml is written from config.py (one source): these tests check that the two agree for every answer that
shapes them, and that every argparser's path refuses what it must.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from answers import TEMPLATES, pairwise, template_options, valid
from environments import PYTHON
from projects import load_module, make_offline, readme_train_command
from rendering import render

# config.py's Config holds the project's own keys on machinery/settings.py's RunSettings (the run's settings).
CONFIG_FILES = ("config.py", "config.yaml", "machinery/__init__.py", "machinery/settings.py")


def config_combinations(template: str) -> list[dict]:
    """Every answer the tests vary, pairwise: any may shape config.yaml."""
    return [valid(combo) for combo in pairwise(template_options(template))]


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
        config(**written)  # each default of its declared type and range: the run's own check


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
    assert not (project / "logs").exists(), "a refused config writes nothing"
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
    files = load_module(project / "machinery" / "config_files.py")
    config_class = load_module(project / "config.py").Config
    assert files.load_config(path, config_class, backend="gloo").backend == "gloo"
    # PyYAML reads 5e-5 as a string: a float key takes it as the number (`lr: 5e-5` in config.yaml).
    path.write_text(re.sub(r"(?m)^lr: .*$", "lr: 5e-5", path.read_text()))
    assert files.load_config(path, config_class, backend=None).lr == 5e-5
    with pytest.raises(SystemExit, match=r"Unknown config keys \['bakend'\]"):
        files.load_config(path, config_class, backend="gloo", bakend="gloo")
    wrong = (
        r"config.yaml with the command line's keys has values that are not allowed: lr: 'fast' is not allowed: it "
        r"must be a valid number; max_epochs: 2.5 is not allowed: it must be a valid integer"
    )
    with pytest.raises(SystemExit, match=wrong):
        files.load_config(path, config_class, backend=None, lr="fast", max_epochs=2.5)
    path.write_text(yaml.safe_dump({**config, "backend": None, "warmup": 3}, sort_keys=False))
    with pytest.raises(SystemExit, match="has keys that config.py does not declare: warmup. Declare each"):
        files.load_config(path, config_class)
    # A key given twice (a `cruft update` conflict resolved by keeping both sides) is refused naming its lines:
    # PyYAML would keep the last one. Hydra's OmegaConf refuses it too, naming the key and its second line.
    text = yaml.safe_dump({**config, "backend": None}, sort_keys=False)
    first = text.splitlines().index("seed: 666") + 1
    path.write_text(text + "seed: 7\n")
    twice = rf"config.yaml gives a key more than once: seed \(lines {first}, {len(text.splitlines()) + 1}\)"
    with pytest.raises(SystemExit, match=twice):
        files.load_config(path, config_class)
    # An empty file is a config that lacks every key.
    path.write_text("")
    with pytest.raises(SystemExit, match="lacks keys that this project reads: dataset, data_path"):
        files.load_config(path, config_class)


# What a user may give a run key, in config.yaml or on the command line, that the run refuses before it writes
# anything: (case, project, values, what the message says). The project: a GPU one, a TPU one, the GAN (no
# evaluation). These were the pre-generation hook's rules while the keys were questions.
REFUSED = [
    ("port 0", "gpu", {"master_port": 0}, "master_port: 0 is not allowed: it must be greater than or equal to 1"),
    ("port above 65535", "gpu", {"master_port": 65536}, "master_port: 65536 is not allowed: it must be less than"),
    ("port that is not a number", "gpu", {"master_port": "http"}, "master_port: 'http' is not allowed"),
    ("nproc_per_node 0", "gpu", {"nproc_per_node": 0, "backend": "gloo"}, "nproc_per_node: 0 is not allowed"),
    ("nproc_per_node text", "gpu", {"nproc_per_node": "two"}, "nproc_per_node: 'two' is not allowed"),
    (
        "processes without a backend",
        "gpu",
        {"nproc_per_node": 4},
        "nproc_per_node: 4 is not allowed with backend: null",
    ),
    ("nodes without a backend", "gpu", {"nnodes": 2}, "nnodes: 2 is not allowed with backend: null"),
    ("nnodes 0", "gpu", {"nnodes": 0}, "nnodes: 0 is not allowed: it must be greater than 0"),
    ("nodes on the loopback", "gpu", {"nnodes": 2, "backend": "gloo"}, "master_addr: '127.0.0.1' is not allowed with"),
    ("a node rank past the nodes", "gpu", {"node_rank": 1}, "node_rank: 1 is not allowed with nnodes: 1: it must be"),
    ("shell in the master address", "gpu", {"master_addr": "host; rm -rf /"}, "master_addr: 'host; rm -rf /' is"),
    ("no master address", "gpu", {"master_addr": ""}, "master_addr: '' is not allowed: it must be a host name"),
    ("checkpoint prefix with a path", "gpu", {"filename_prefix": "../x"}, "filename_prefix: '../x' is not allowed"),
    ("checkpoint prefix with a space", "gpu", {"filename_prefix": "a b"}, "it must be letters, digits, '_' or '-'"),
    ("n_saved 0", "gpu", {"n_saved": 0}, "n_saved: 0 is not allowed: it must be greater than 0"),
    ("log interval 0", "gpu", {"log_every_iters": 0}, "log_every_iters: 0 is not allowed"),
    ("patience 0", "gpu", {"patience": 0}, "patience: 0 is not allowed: it must be greater than 0, or null"),
    ("negative time limit", "gpu", {"limit_sec": -1}, "limit_sec: -1 is not allowed: it must be greater than 0, or"),
    ("an average's share above 1", "gpu", {"ema_momentum": 2}, "ema_momentum: 2 is not allowed"),
    ("output_dir on two lines", "gpu", {"output_dir": "logs\nrm -rf /"}, "it must be a path on one line"),
    ("a precision no device has", "gpu", {"mixed_precision": "fp16"}, "it must be 'float16' or 'bfloat16', or null"),
    ("a yes/no precision", "gpu", {"mixed_precision": True}, "mixed_precision: true is not allowed"),
    ("the TPU's backend on GPUs", "gpu", {"backend": "xla-tpu"}, "backend: 'xla-tpu' is not allowed: it must be"),
    ("float16 on a TPU", "tpu", {"mixed_precision": "float16"}, "it must be 'bfloat16' or null (TPUs compute in"),
    ("torch.compile on a TPU", "tpu", {"compile": True}, "compile: true is not allowed with backend: 'xla-tpu'"),
    ("a GPU backend on TPUs", "tpu", {"backend": "nccl"}, "backend: 'nccl' is not allowed: it must be 'xla-tpu'"),
    ("early stopping without an evaluation", "gan", {"patience": 3}, "has patience: keys of a project that evaluates"),
]
PROJECTS = {"gpu": ("vision-classification", {}), "tpu": ("vision-classification", {"backend": "xla-tpu"})}
PROJECTS["gan"] = ("gan", {})


@pytest.mark.parametrize("project_kind", sorted(PROJECTS))
def test_a_value_a_run_cannot_take_is_refused_naming_the_key_the_value_and_what_is_allowed(
    baked, project_kind: str
) -> None:
    """Each row's values given to the project's own config reading (config.yaml's keys, then the command line's, as
    every argparser reads them): refused with the key, its value and what is allowed, before anything is written
    (the run's directory is made after; test_config_lacking_keys_is_refused_... runs each argparser's command)."""
    template, answers = PROJECTS[project_kind]
    project = baked(template, **answers)
    files = load_module(project / "machinery" / "config_files.py")
    config_class = load_module(project / "config.py").Config
    for case, kind, values, expected in REFUSED:
        if kind != project_kind:
            continue
        overrides = {key: value for key, value in values.items() if key in config_class.model_fields}
        with pytest.raises(SystemExit) as refused:
            if overrides == values:
                files.load_config(project / "config.yaml", config_class, **values)
            else:  # a key this project does not declare: config.yaml's own line, as a user adds it
                text = (project / "config.yaml").read_text() + "".join(
                    f"{key}: {value}\n" for key, value in values.items()
                )
                files.checked_config(yaml.safe_load(text), "config.yaml", config_class)
        assert expected in str(refused.value), f"{case}: {refused.value}"


def test_processes_torchrun_started_must_have_a_backend_and_spawn_none_of_their_own(baked, monkeypatch) -> None:
    """Under torchrun (its WORLD_SIZE in the environment), a config of one process, or one that would spawn more, is
    refused naming the key and how to give it in the project's own command-line syntax."""
    project = baked(argparser="fire")
    launch = load_module(project / "machinery" / "launch.py")
    config_class = load_module(project / "config.py").Config
    override = "--{key}={value}"
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit, match=r"backend: null \(one process\) is not allowed where torchrun started 2"):
        launch.check_processes(config_class(), override)
    with pytest.raises(SystemExit, match="nproc_per_node: 2 is not allowed where torchrun started the processes"):
        launch.check_processes(config_class(backend="gloo", nproc_per_node=2), override)
    launch.check_processes(config_class(backend="gloo"), override)


# What argparse's --help says a key takes (the line after its name), at a terminal 120 columns wide.
HELP_LINES = {
    "vision-classification": [
        "--mixed_precision VALUE\n                        'float16' or 'bfloat16' or null",
        "--ema_momentum VALUE  a float above 0 and at most 1 or null",
        "--master_port VALUE   an int at least 1 and at most 65535",
        "--backend VALUE       'nccl' or 'gloo' or null",
        "--lr VALUE            a float",
    ],
    "gan": ["--backend VALUE       'xla-tpu'", "--n_saved VALUE       an int above 0"],
}


@pytest.mark.parametrize("template", sorted(HELP_LINES))
def test_argparse_help_names_every_config_key_and_the_values_it_takes(bake, template: str) -> None:
    """`python main.py --help` lists each key of config.yaml as an option, with its type, range or choices."""
    project = bake(template, argparser="argparse", **({"backend": "xla-tpu"} if template == "gan" else {}))
    proc = subprocess.run(
        [PYTHON, "main.py", "--help"], cwd=project, capture_output=True, text=True, env={**os.environ, "COLUMNS": "120"}
    )
    assert proc.returncode == 0, proc.stderr
    options = re.findall(r"(?m)^  --(\w+) VALUE", proc.stdout)
    assert options == list(config_yaml(project)), "the options are config.yaml's keys, in its order"
    for line in HELP_LINES[template]:
        assert line in proc.stdout, f"--help lacks {line!r}:\n{proc.stdout}"
