"""Helpers shared by the test modules: templates, option combinations and running generated projects."""

import itertools
import json
import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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
PYTHON = sys.executable
# Lighter models for runs on the XLA CPU device, where compiling a default one would take minutes:
# segmentation's DeepLabV3 on MobileNetV3 (auxiliary head included) for the one on ResNet-50.
XLA_CPU_CONFIG = {"vision-segmentation": {"model": "deeplabv3_mobilenet_v3_large"}}
# The TPU environment: torch_xla layered on the base venv (scripts/env.sh makes both).
XLA_PYTHON = os.environ.get("IGNITE_TEMPLATES_XLA_PYTHON", str(REPO / ".venv-xla" / "bin" / "python"))
# The experiment trackers' packages (mlflow, wandb, ...), layered on the base venv the same way.
TRACKERS_PYTHON = os.environ.get("IGNITE_TEMPLATES_TRACKERS_PYTHON", str(REPO / ".venv-trackers" / "bin" / "python"))


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
    """The launcher "auto" stands for: spawn on TPU, one process otherwise."""
    if combo["launcher"] == "auto":
        return "spawn" if combo["backend"] == "xla-tpu" else "none"
    return combo["launcher"]


def valid(combo: dict) -> dict:
    """Adjust a combination to the template's rules (one process for 'none', 8 spawned replicas on TPU)."""
    combo = dict(combo)
    if combo["backend"] == "xla-tpu":
        combo.update(launcher="auto" if combo["launcher"] == "auto" else "spawn", nproc_per_node="8", nnodes="1")
    elif resolved_launcher(combo) == "none":
        combo["nnodes"] = "1"
    else:
        combo["nproc_per_node"] = "2"
    if int(combo.get("nnodes", 1)) > 1:
        combo["master_addr"] = "node0"  # several nodes need an address the others can reach
    return combo


# A quick offline run, for the keys of config.yaml that have them (each template has its own keys).
OFFLINE = {
    "dataset": "synthetic",
    "batch_size": 8,
    "eval_batch_size": 8,
    "num_workers": 0,
    "max_epochs": 2,
    "train_epoch_length": 3,
    "eval_epoch_length": 2,
    "log_every_iters": 1,
    # GAN: small images and networks.
    "image_size": 16,
    "z_dim": 16,
    "g_filters": 8,
    "d_filters": 8,
    "num_samples": 16,
    # Segmentation: small crops, two pictures.
    "crop_size": 32,
    "num_pictures": 2,
}


def make_offline(project: Path, **overrides) -> dict:
    """Edit the project's config.yaml as a user would for a quick offline run; return the config."""
    path = project / "config.yaml"
    config = yaml.safe_load(path.read_text())
    unknown = set(overrides) - set(config)
    assert not unknown, f"config.yaml has no keys {sorted(unknown)}"
    config.update({key: value for key, value in OFFLINE.items() if key in config})
    config.update(overrides)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return config


# Ports for rendezvous and servers come from below Linux's ephemeral range (32768-60999), where the
# system never picks a port for a connection or a bind to port 0: a port handed out here cannot be taken
# by anything else of this suite before its run binds it. Each pytest-xdist worker has its own slice, and
# a port another program holds is skipped.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
_PORTS = iter(range(20000 + 500 * _WORKER, 20500 + 500 * _WORKER))


def free_port() -> str:
    """A TCP port for one distributed run's rendezvous or one server, never handed out twice in a run of
    the suite (a fixed port would collide with another test; one the system picked could be reused)."""
    for port in _PORTS:
        with socket.socket() as sock:
            try:
                sock.bind(("", port))
            except OSError:
                continue  # held by another program
            return str(port)
    raise RuntimeError("this pytest worker has used all of its 500 ports")


def run_cmd(cmd: list[str], cwd: Path, timeout: int = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a command in a generated project; fail the test with its output if it fails."""
    # Tests never reach the network: Hugging Face libraries fail at once instead of downloading.
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **(env or {})}
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env)
    assert proc.returncode == 0, (
        f"`{' '.join(cmd)}` failed in {cwd} with exit code {proc.returncode}\n"
        f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
    )
    return proc


def run_dirs(project: Path, output_dir: str = "./logs") -> list[Path]:
    """The run directories a project wrote, oldest first."""
    return sorted(p for p in (project / output_dir).iterdir() if p.is_dir())


def readme_block(project: Path, heading: str) -> str:
    """The first ``bash`` block of a section of the project's README, e.g. ``"## Train"``."""
    readme = (project / "README.md").read_text()
    section = readme.split(f"\n{heading}\n", 1)[1]
    return section.split("```bash\n", 1)[1].split("\n```", 1)[0].strip()


def readme_train_command(
    project: Path, python: str = PYTHON, heading: str = "## Train"
) -> tuple[list[str], dict[str, str]]:
    """The training command exactly as the project's README gives it, bound to the given Python.

    Returns the argv and the environment variables the command sets (``PJRT_DEVICE=TPU python ...``).
    ``heading`` picks another section's command, e.g. the offline run under ``## Experiment tracking``.
    """
    command = readme_block(project, heading)
    argv = shlex.split(command)
    env = {}
    while "=" in argv[0]:
        key, value = argv.pop(0).split("=", 1)
        env[key] = value
    if argv[0] == "python":
        return [python, *argv[1:]], env
    if argv[0] == "torchrun":
        return [python, "-m", "torch.distributed.run", *argv[1:]], env
    raise AssertionError(f"unexpected training command in README: {command}")


def notebook_training_command(source: str) -> str | None:
    """The shell command a notebook cell trains with (its ``COMMAND = "..."``), or None for another cell."""
    import ast

    for node in ast.parse(source).body if "\nCOMMAND = " in source else []:
        if isinstance(node, ast.Assign) and [target.id for target in node.targets] == ["COMMAND"]:
            return ast.literal_eval(node.value)
    return None


def read_log(run_dir: Path) -> dict:
    """What a user checks in training.log: the values logged per iteration and the eval metrics per epoch.

    ``train`` has one dict per logged iteration (``train_loss`` for vision; ``loss_d``, ``loss_g``, ...
    for the GAN); ``losses`` is every value logged in them.
    """
    log = (run_dir / "training.log").read_text()
    logged = re.findall(r" - iteration (\d+): (.*)$", log, flags=re.MULTILINE)
    train = [{name: float(v) for name, v in re.findall(r"(\w+)=([-+0-9.naif]+)", values)} for _, values in logged]
    evals = [dict(re.findall(r"(\w+)=([0-9.]+)", line)) for line in log.splitlines() if " - eval: " in line]
    return {
        "text": log,
        "train": train,
        "losses": [value for values in train for value in values.values()],
        "evals": evals,
        "iterations": [int(iteration) for iteration, _ in logged],
    }


def check_tracker_records(
    recorded: dict,
    run_dir: Path,
    config: dict,
    epochs: int = 2,
    iterations: int = 3,
    optimizers: tuple = ("optimizer",),
) -> None:
    """An experiment tracker holds the run (see tracker_records.py): its name, the config, and every value
    training.log shows, at the steps it shows them: each loss every ``log_every_iters`` iterations (the
    classifiers' ``train_loss``; the GAN's ``loss_d``, ``loss_g``, ``d_real``, ``d_fake``), each optimizer's
    learning rate at the same iterations, and the eval metrics at each epoch's end (a template with an evaluator).
    """
    log = read_log(run_dir)
    series = recorded["series"]
    assert recorded["name"] == run_dir.name, f"the tracker's run is named {recorded['name']!r}, not after {run_dir}"

    every = config["log_every_iters"]
    assert log["iterations"] == list(range(every, epochs * iterations + 1, every)), "training.log's logged iterations"
    for name in log["train"][0]:
        logged = series.get(f"train/{name}")
        assert logged, f"no train/{name} among {sorted(series)}"
        assert [step for step, _ in logged] == log["iterations"], (
            f"train/{name} must be logged every {every} iterations"
        )
        # training.log shows 4 decimals; the tracker has the full value.
        assert [value for _, value in logged] == pytest.approx([values[name] for values in log["train"]], abs=1e-4)

    epoch_ends = [iterations * epoch for epoch in range(1, epochs + 1)]
    for metric in ("accuracy", "loss") if log["evals"] else ():
        logged = series.get(f"eval/{metric}")
        assert logged, f"no eval/{metric} among {sorted(series)}"
        assert [step for step, _ in logged] == epoch_ends, f"eval/{metric} must be logged at each epoch's end"
        expected = [float(line[metric]) for line in log["evals"]]
        assert [value for _, value in logged] == pytest.approx(expected, abs=1e-4)
    if not log["evals"]:
        assert not [name for name in series if name.startswith("eval")], "no evaluator, no eval series"

    for optimizer in optimizers:
        # Named after the optimizer in main.py: "optimizer/lr/group_0" in most trackers.
        (lr_name,) = [name for name in series if name.startswith(f"{optimizer}/lr")]
        learning_rates = series[lr_name]
        assert [step for step, _ in learning_rates] == log["iterations"], (
            f"{lr_name}: the rate of every logged iteration"
        )
        values = [value for _, value in learning_rates]
        assert all(0.0 <= v <= config["lr"] * (1 + 1e-6) for v in values), values  # float32 in some trackers
        if log["evals"]:  # the classifiers warm up, then decay; the GAN's rate is constant
            assert len(set(values)) > 1, f"the learning-rate schedule must show in {lr_name}: {values}"
        else:
            assert values == pytest.approx([config["lr"]] * len(values)), lr_name

    logged_config = recorded["config"]
    for key in ("batch_size", "lr", "max_epochs", "model", "dataset", "z_dim"):
        if key in config:
            assert str(logged_config.get(key)) == str(config[key]), f"config {key}: {logged_config.get(key)!r}"


def pytest_outcomes(output: str) -> dict[str, int]:
    """The outcomes on pytest's closing line, e.g. ``{"passed": 3}`` for "3 passed, 1 warning in 1.2s" (exact,
    where a substring check would take "13 passed" for "3 passed"; warnings are not outcomes)."""
    closing = output.strip().splitlines()[-1]
    counts = {word: int(count) for count, word in re.findall(r"(\d+) (\w+)", closing)}
    return {word: count for word, count in counts.items() if not word.startswith("warning")}


def load_checkpoint(path: Path, deterministic: bool = False) -> dict:
    """A checkpoint loaded as the generated ``resume_from`` loads it: ``weights_only``, so it runs no code.

    A DeterministicEngine's trainer state holds NumPy's random state: with ``deterministic``, exactly
    the types of that array are allowed too, as the generated code allows them (and no others).
    """
    import numpy as np
    import torch

    allowed = []
    if deterministic:
        key = np.random.get_state()[1]
        allowed = [key.__reduce__()[0], np.ndarray, np.dtype, type(key.dtype)]
    with torch.serialization.safe_globals(allowed):
        return torch.load(path, map_location="cpu", weights_only=True)


def differences(saved, expected, where: str = "checkpoint") -> list[str]:
    """Where two loaded checkpoints differ, bit for bit: every tensor (``torch.equal``, and its dtype), NumPy
    array, number and string, walking dicts, lists and tuples alike. Empty when they are identical."""
    import numpy as np
    import torch

    if isinstance(expected, dict):
        if not isinstance(saved, dict) or saved.keys() != expected.keys():
            return [f"{where}: keys {sorted(map(str, saved))} != {sorted(map(str, expected))}"]
        return [diff for key in expected for diff in differences(saved[key], expected[key], f"{where}[{key!r}]")]
    if isinstance(expected, list | tuple):
        if type(saved) is not type(expected) or len(saved) != len(expected):
            return [f"{where}: {saved!r} != {expected!r}"]
        pairs = enumerate(zip(saved, expected, strict=True))
        return [diff for i, (a, b) in pairs for diff in differences(a, b, f"{where}[{i}]")]
    if isinstance(expected, torch.Tensor):
        same = isinstance(saved, torch.Tensor) and saved.dtype == expected.dtype and torch.equal(saved, expected)
        return [] if same else [f"{where}: tensors differ"]
    if isinstance(expected, np.ndarray):
        return [] if np.array_equal(saved, expected) else [f"{where}: arrays differ"]
    return [] if type(saved) is type(expected) and saved == expected else [f"{where}: {saved!r} != {expected!r}"]


def run_recording_ranks(
    cmd: list[str], cwd: Path, records: Path, timeout: int = 600
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """Run a distributed training command; return it and what each of its processes trained on, by rank.

    ``tests/rank_probe/sitecustomize.py`` records, in every process, its rank, the trainer's iteration and
    epoch, a digest of each training batch and the networks' final weights: the log shows rank 0 only.
    """
    import torch

    records.mkdir(parents=True, exist_ok=True)
    paths = [str(REPO / "tests" / "rank_probe"), os.environ.get("PYTHONPATH", "")]
    env = {"PYTHONPATH": os.pathsep.join(filter(None, paths)), "RANK_PROBE_DIR": str(records)}
    proc = run_cmd(cmd, cwd, timeout, env=env)
    return proc, [torch.load(path, weights_only=True) for path in sorted(records.glob("rank*.pt"))]


def check_both_ranks_trained(ranks: list[dict], iterations: int, networks: list[dict]) -> None:
    """Two processes each trained every iteration on batches of their own (each its share of the data), and
    ended with the same parameters (their gradients averaged at each step): those of the ``networks`` rank 0
    saved. Buffers (BatchNorm's running statistics) are rank 0's in the checkpoint; DistributedDataParallel
    sends them to every rank before each forward pass, which then updates them with its own batch."""
    assert [(r["rank"], r["world_size"]) for r in ranks] == [(0, 2), (1, 2)], "one record per rank of a world of 2"
    for record in ranks:
        rank = record["rank"]
        assert record["iteration"] == len(record["batches"]) == iterations, f"rank {rank} trained {record['iteration']}"
        assert len(record["weights"]) == len(networks), f"rank {rank} built {len(record['weights'])} networks"
        for index, (weights, saved) in enumerate(zip(record["weights"], networks, strict=True)):
            if rank:
                parameters = record["parameters"][index]
                weights, saved = ({name: w[name] for name in parameters} for w in (weights, saved))
            diffs = differences(weights, saved, f"rank {rank}'s network {index}")
            assert not diffs, "each rank must end with the parameters rank 0 saved:\n" + "\n".join(diffs)
    shared = set(ranks[0]["batches"]) & set(ranks[1]["batches"])
    assert not shared, f"{len(shared)} batch(es) trained on by both ranks: each must train on its own share"


# The generated test in which a short run learns its synthetic data (random data would leave nothing to learn).
LEARNING_TESTS = {
    "vision-classification": "test_a_short_run_learns_the_synthetic_data",
    "text-classification": "test_a_short_run_learns_the_synthetic_data",
    "gan": "test_a_short_run_brings_the_generated_images_closer_to_the_data",
    "vision-segmentation": "test_a_short_run_learns_the_synthetic_data",
}
