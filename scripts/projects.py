"""Generated projects, configured and run as their user would: the quick offline config edits, the README's
commands, the run directories and logs, a free port. What the test suite and the test lanes share."""

import importlib.util
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import yaml

# XLA:CPU's own code generator for fused operations (its LLVM IR emitters) in place of the MLIR fusion emitters it
# uses by default: programs compile in about 60% of the CPU time and run as fast (measured alone: a segmentation
# TPU run of 4 iterations, 44 -> 26 s of CPU; vision's own tests on the XLA device, 80 -> 67 s). A flag of the CPU
# device only, which stands in for the TPU here (a TPU compiles with its own backend); torch_xla 2.8's XLA has it too.
XLA_CPU_CODEGEN = "--xla_cpu_use_fusion_emitters=false"
# The XLA CPU device, for the short XLA training runs (not for the projects' own tests: their learning test runs
# long enough that slower programs cost more than a cheaper compile saves: measured 64 s, 102 s with the flags).
# The flags compile with LLVM's cheapest optimisation: these runs check which programs compile and what crosses
# between device and host, never how fast a compiled program runs, and compiling is most of their time
# (measured: a vision TPU run of 6 iterations, 28.5 s of CPU, 18.0 s with them).
XLA_CPU = {
    "PJRT_DEVICE": "CPU",
    "XLA_FLAGS": f"{XLA_CPU_CODEGEN} --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true",
}
# The XLA CPU device for the projects' own tests on it.
XLA_CPU_OWN_TESTS = {"PJRT_DEVICE": "CPU", "XLA_FLAGS": XLA_CPU_CODEGEN}
# Lighter models for runs on the XLA CPU device, where compiling a default one would take minutes:
# segmentation's DeepLabV3 on MobileNetV3 (auxiliary head included) for the one on ResNet-50.
XLA_CPU_CONFIG = {"vision-segmentation": {"model": "deeplabv3_mobilenet_v3_large"}}
# The lightest models for runs on the XLA CPU device whose claim is not about the model (which programs compile
# and when, what crosses to the host, what 8 replicas share): compiling is most of such a run. Segmentation on
# LR-ASPP; vision on SqueezeNet 1.1 at 64 pixels (at 32 its last pooling has nothing left to pool): 8 replicas
# trained in 48 s, where ResNet-18 took 68.
XLA_LIGHT_MODELS = {
    "vision-classification": {"model": "squeezenet1_1", "image_size": 64},
    "vision-segmentation": {"model": "lraspp_mobilenet_v3_large"},
}
# Segmentation's own training tests take 6 minutes on the XLA CPU device (its models compile for minutes): its
# TPU project runs its tests/test_xla.py there (launch, shim, eval metrics on the device); all its own tests,
# the learning one included, run on the CPU.
XLA_OWN_TESTS = {"vision-segmentation": ["tests/test_xla.py"]}


# Downloads fail at once: every URL goes to a proxy on a port where nothing listens.
NO_NETWORK = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "no_proxy": ""}


# Script lines run in a text project once ``root`` (a Path) is set: a tiny BERT and its tokenizer saved as a Hugging
# Face model folder, root/model, which from_pretrained reads as it reads a Hub model.
SAVE_TINY_MODEL = """
from transformers import BertConfig, BertModel
from config import Config
from data import setup_tokenizer
from models import TINY_ENCODER

tokenizer = setup_tokenizer(Config(dataset="synthetic"))
tokenizer.save_pretrained(root / "model")
encoder = BertConfig(vocab_size=len(tokenizer), max_position_embeddings=32, **TINY_ENCODER)
BertModel(encoder).save_pretrained(root / "model")
"""


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


# Lighter models of the same kind for the quick runs, whose claims (checkpoints, stops and continues, logs,
# trackers, what each process trained) hold for any model. Measured on 2 cores, one thread, OFFLINE's shapes:
# a vision run 8.9 s with ResNet-18 (134 MB a training checkpoint, 196 ms an iteration), 5.2 s with ShuffleNet
# V2 x0.5 (4.5 MB, 31 ms); a segmentation run 15.6 s with DeepLabV3 on ResNet-50 (1 GB of checkpoints), 7.7 s on
# MobileNetV3 (its auxiliary head kept). The default models train where the claim is the model's: the demo, the
# projects' own tests (their learning test included), the notebooks; a test about a model names it (model=...).
QUICK_MODELS = {"resnet18": "shufflenet_v2_x0_5", "deeplabv3_resnet50": "deeplabv3_mobilenet_v3_large"}


def make_offline(project: Path, light: bool = True, **overrides) -> dict:
    """Edit the project's config.yaml as a user would for a quick offline run, on a light model of the same kind
    as the default one (``light``: see QUICK_MODELS), on a port of its own (``master_port``: the spawned processes'
    rendezvous, and torchrun's through readme_train_command); return the config."""
    path = project / "config.yaml"
    config = yaml.safe_load(path.read_text())
    unknown = set(overrides) - set(config)
    assert not unknown, f"config.yaml has no keys {sorted(unknown)}"
    config.update({key: value for key, value in OFFLINE.items() if key in config})
    if light and config.get("model") in QUICK_MODELS:
        config["model"] = QUICK_MODELS[config["model"]]
    if "master_port" in config:  # a TPU project's replicas have none
        config["master_port"] = int(free_port())
    config.update(overrides)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return config


def set_sweep(project: Path, **values) -> dict:
    """Edit sweep.yaml's keys as a user would (their lines' comments kept); return its settings."""
    path = project / "sweep.yaml"
    text = path.read_text()
    for key, value in values.items():
        text, found = re.subn(rf"^{key}:[^#\n]*", f"{key}: {value} ", text, flags=re.MULTILINE)
        assert found == 1, f"sweep.yaml has no line for {key}"
    path.write_text(text)
    return yaml.safe_load(text)


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


def run_cmd(
    cmd: list[str], cwd: Path, timeout: int = 300, env: dict | None = None, returncode: int = 0
) -> subprocess.CompletedProcess:
    """Run a command in a generated project; fail the test with its output if it exits otherwise than with
    ``returncode`` (0: it succeeded)."""
    # Tests never reach the network: Hugging Face libraries fail at once instead of downloading.
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **(env or {})}
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env)
    assert proc.returncode == returncode, (
        f"`{' '.join(cmd)}` in {cwd} ended with exit code {proc.returncode}, not {returncode}\n"
        f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
    )
    return proc


def spawned_by_spawned(starts: Path) -> list[int]:
    """The PIDs tests/probes/process_starts.py recorded in ``starts`` whose parent it recorded too: on a TPU process,
    the DataLoader workers (spawned by a replica, itself spawned by the launcher)."""
    parents = {int(path.name): int(path.read_text()) for path in starts.iterdir()}
    return [pid for pid, parent in parents.items() if parent in parents]


def wait_for(condition, timeout: float, what: str) -> None:
    """Wait till ``condition()`` holds, checking every 0.3 s; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.3)


def run_dirs(project: Path, output_dir: str = "./logs") -> list[Path]:
    """The run directories a project wrote, oldest first."""
    return sorted(p for p in (project / output_dir).iterdir() if p.is_dir())


def readme_block(project: Path, heading: str) -> str:
    """The first ``bash`` block of a section of the project's README, e.g. ``"## Train"``."""
    readme = (project / "README.md").read_text()
    section = readme.split(f"\n{heading}\n", 1)[1]
    return section.split("```bash\n", 1)[1].split("\n```", 1)[0].strip()


def readme_train_command(
    project: Path, python: str = sys.executable, heading: str = "## Train"
) -> tuple[list[str], dict[str, str]]:
    """The training command exactly as the project's README gives it, bound to the given Python.

    Returns the argv and the environment variables the command sets (``PJRT_DEVICE=TPU python ...``), and, for
    torchrun, the port of config.yaml's ``master_port`` (make_offline gives each project its own) as torchrun's
    ``PET_MASTER_PORT``, which its ``--master_port`` defaults to: tests side by side never meet on 29500.
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
        port = yaml.safe_load((project / "config.yaml").read_text()).get("master_port")
        return [python, "-m", "torch.distributed.run", *argv[1:]], {**env, "PET_MASTER_PORT": str(port)}
    raise AssertionError(f"unexpected training command in README: {command}")


def notebook_training_command(source: str) -> str | None:
    """The shell command a notebook cell trains with (its ``COMMAND = "..."``), or None for another cell."""
    import ast

    for node in ast.parse(source).body if "\nCOMMAND = " in source else []:
        if isinstance(node, ast.Assign) and [target.id for target in node.targets] == ["COMMAND"]:
            return ast.literal_eval(node.value)
    return None


def run_status(run_dir: Path) -> dict:
    """The run's status.yaml: its status (finished, stopped, failed, ...), the reason, the epoch and iteration."""
    return yaml.safe_load((run_dir / "status.yaml").read_text())


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


def pytest_outcomes(output: str) -> dict[str, int]:
    """The outcomes on pytest's closing line, e.g. ``{"passed": 3}`` for "3 passed, 1 warning in 1.2s" (exact,
    where a substring check would take "13 passed" for "3 passed"; warnings are not outcomes)."""
    closing = output.strip().splitlines()[-1]
    counts = {word: int(count) for count, word in re.findall(r"(\d+) (\w+)", closing)}
    return {word: count for word, count in counts.items() if not word.startswith("warning")}


# The generated test in which a short run learns its synthetic data (random data would leave nothing to learn).
LEARNING_TESTS = {
    "vision-classification": "test_a_short_run_learns_the_synthetic_data",
    "text-classification": "test_a_short_run_learns_the_synthetic_data",
    "gan": "test_a_short_run_brings_the_generated_images_closer_to_the_data",
    "vision-segmentation": "test_a_short_run_learns_the_synthetic_data",
}


def load_module(path: Path) -> ModuleType:
    """Import a module by its path (a generated project's, a hook, a script), as the one way the tests do.

    It is named after its folder and file, so two projects' modules of one name never meet in ``sys.modules``;
    the modules it imports from its project (a project's ``config``, ``machinery.runs``, ...: its folder, or the
    folder above a project's ``machinery/``) are found there while it loads, and forgotten after, for the same reason.
    """
    root = next((folder.parent for folder in path.parents if folder.name == "machinery"), path.parent)
    own = {child.stem for child in root.glob("*.py")} | {child.name for child in root.iterdir() if child.is_dir()}
    before = set(sys.modules)
    spec = importlib.util.spec_from_file_location(f"loaded_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(root))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(root))
        for name in set(sys.modules) - before:
            if name.split(".")[0] in own:
                del sys.modules[name]
    return module
