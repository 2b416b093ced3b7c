"""TPU projects train for real on one XLA CPU device (PJRT_DEVICE=CPU), in the TPU environment.

No TPU exists here: the single-device path runs for real, and so does the launch (one replica on the one
device, in the generated project's own tests/test_xla.py, run here in the same environment, which also
unit-tests the logic for 8 replicas).
"""

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml
from answers import TEMPLATES
from checkpoints import load_checkpoint
from environments import PYTHON, XLA_CPU_CONFIG, XLA_PYTHON
from projects import LEARNING_TESTS, load_module, make_offline, read_log, readme_train_command, run_cmd, run_dirs
from torchvision.models import resnet18
from torchvision.models.segmentation import deeplabv3_mobilenet_v3_large

CPU_XLA = {"PJRT_DEVICE": "CPU"}

# Run in the base venv: loads a checkpoint as a user without torch_xla would, with no map_location (a
# tensor saved on the XLA device would then fail to load, or load onto it), and prints where its tensors are.
LOAD_AS_SAVED = """
import importlib.util, json, sys, torch

def tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict | list | tuple):
        for item in value.values() if isinstance(value, dict) else value:
            yield from tensors(item)

checkpoint = torch.load(sys.argv[1], weights_only=True)
devices = [str(tensor.device) for tensor in tensors(checkpoint)]
print(json.dumps({"torch_xla": importlib.util.find_spec("torch_xla") is not None, "devices": devices}))
"""


def check_loads_without_torch_xla(checkpoint: Path) -> None:
    """The checkpoint of an XLA run holds CPU tensors as saved: it loads where no XLA device exists."""
    proc = run_cmd([PYTHON, "-c", LOAD_AS_SAVED, str(checkpoint)], cwd=checkpoint.parent)
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not loaded["torch_xla"], f"{PYTHON} must be an environment without torch_xla"
    assert loaded["devices"], f"{checkpoint.name} holds no tensors"
    assert set(loaded["devices"]) == {"cpu"}, f"{checkpoint.name} must hold CPU tensors only: {loaded['devices']}"


@pytest.fixture(autouse=True)
def xla_environment() -> None:
    assert Path(XLA_PYTHON).exists(), f"no TPU test environment at {XLA_PYTHON}: run `bash scripts/env.sh`"


# Answers per template. Text in bfloat16: padded to max_length, the transformer must compile once too.
XLA_RUNS = {
    "vision-classification": {"save_best_model": False},
    "text-classification": {"save_best_model": False, "mixed_precision": True},
    "vision-segmentation": {"save_best_model": False},
}
# Evaluations of two lengths: vision's whole synthetic eval set (256 images: 10 batches of 24 and a short
# last one, padded), text's first 2 batches; segmentation's whole set (64 scenes: 2 batches of 24 and a
# short last one), with gradients accumulated over 2 batches (the steps with and without the optimizer
# step are two programs, both compiled in epoch 1).
XLA_EVALS = {
    "vision-classification": {"eval_epoch_length": None, "eval_batch_size": 24},
    "text-classification": {"eval_epoch_length": 2},
    "vision-segmentation": {"eval_epoch_length": None, "eval_batch_size": 24, "accumulation_steps": 2},
}


def train_on_xla_cpu(project: Path, **config: int) -> tuple[Path, dict]:
    """Run the README's training command (made for a TPU) on the XLA CPU device, with these config values."""
    make_offline(project, **config)
    argv, env = readme_train_command(project, python=XLA_PYTHON)
    assert env == {"PJRT_DEVICE": "TPU"}, "the README runs on the TPU"
    run_cmd(argv, cwd=project, timeout=600, env=CPU_XLA)
    (run_dir,) = run_dirs(project)
    return run_dir, read_log(run_dir)


def train_3_epochs_on_xla_cpu(project: Path, **config: int | None) -> tuple[Path, dict]:
    """3 epochs of 4 iterations, the losses read every 3: at a different position in each epoch."""
    return train_on_xla_cpu(project, max_epochs=3, train_epoch_length=4, log_every_iters=3, **config)


@pytest.mark.parametrize("template", list(XLA_RUNS))
def test_xla_project_trains_3_epochs_and_stops_compiling(bake, template: str) -> None:
    project = bake(template, backend="xla-tpu", **XLA_RUNS[template])
    run_dir, log = train_3_epochs_on_xla_cpu(project, **XLA_EVALS[template], **XLA_CPU_CONFIG.get(template, {}))
    assert len(log["evals"]) == 3
    assert log["iterations"] == [3, 6, 9, 12]
    # One device here, 8 expected: the run goes on and says so in one line.
    assert log["text"].count("Expected 8 TPU replicas (nproc_per_node) but this runtime has 1 device(s)") == 1

    metrics = json.loads((run_dir / "xla_metrics.json").read_text())
    compilations = metrics["compilations_per_epoch"]
    assert len(compilations) == 3 and all(isinstance(n, int) for n in compilations)
    assert compilations[0] > 0, "the first epoch compiles the training step"
    # Epoch 1's 4 steps compile all the step's programs; nothing else in training compiles one.
    assert compilations[1:] == [0, 0], f"training compiled after epoch 1: {metrics}"
    # Reads from the device during training: one per loss read (at iterations 3, 6, 9 and 12), and one per
    # operation run on the CPU: none, but for segmentation's bilinear upsampling's backward pass on this CPU
    # device (torch_xla lowers it on a TPU only).
    fallbacks = metrics["cpu_fallbacks_per_epoch"]
    allowed = {"aten::upsample_bilinear2d_backward"} if template == "vision-segmentation" else set()
    assert all(set(epoch) <= allowed for epoch in fallbacks), f"operations ran on the CPU: {fallbacks}"
    transfers = metrics["device_to_host_transfers_per_epoch"]
    reads = [total - sum(epoch.values()) for total, epoch in zip(transfers, fallbacks, strict=True)]
    assert reads == [1, 1, 2], metrics
    # The evaluation sums its metrics on the device and reads them once, whatever its length; its padded
    # batches share one shape, so nothing compiles after the first evaluation. The epoch-end checkpoint,
    # saved after the evaluation (it holds what the evaluation's handlers did), is the epoch end's other read;
    # segmentation's picture of the predicted masks is a third.
    reads = 3 if template == "vision-segmentation" else 2
    assert metrics["eval_device_to_host_transfers_per_epoch"] == [reads] * 3, f"one read per evaluation: {metrics}"
    assert metrics["eval_compilations_per_epoch"][1:] == [0, 0], f"the evaluation compiled again: {metrics}"

    # The checkpoint loads where there is no torch_xla at all, into the model a GPU or CPU user would build.
    check_loads_without_torch_xla(run_dir / "training_checkpoint_12.pt")
    checkpoint = load_checkpoint(run_dir / "training_checkpoint_12.pt")  # as resume_from loads it
    assert checkpoint["trainer"]["iteration"] == 12
    if template == "vision-classification":
        resnet18(num_classes=10).load_state_dict(checkpoint["model"])
    elif template == "vision-segmentation":
        model = deeplabv3_mobilenet_v3_large(num_classes=21, aux_loss=True, weights_backbone=None)
        model.load_state_dict(checkpoint["model"])
        assert checkpoint["gradients"] == {}, "an optimizer step just zeroed them: nothing to keep"
        pictures = sorted(path.name for path in (run_dir / "predictions").iterdir())
        assert pictures == [f"epoch_{epoch:04d}.png" for epoch in (1, 2, 3)], "a picture of predictions per epoch"
    else:
        assert {name.split(".")[0] for name in checkpoint["model"]} == {"encoder", "classifier"}


# Segmentation's own training tests take 6 minutes on this CPU device (its models compile for minutes): its
# TPU project runs its tests/test_xla.py here (launch, shim, eval metrics on the device), and all its own tests,
# the learning one included, on the CPU (tests/test_training_runs.py). Its XLA training is
# test_xla_project_trains_3_epochs_...
XLA_OWN_TESTS = {"vision-segmentation": ["tests/test_xla.py"]}


@pytest.mark.parametrize("template", TEMPLATES)
def test_xla_project_own_tests_pass_with_bf16_and_fire(bake, template: str) -> None:
    """The generated tests, as a TPU user runs them: the launch logic for 8 replicas, the shim, the eval
    metrics, and short bf16 runs on the XLA device, the one that shows the project learning included."""
    project = bake(template, backend="xla-tpu", argparser="fire", mixed_precision=True, include_test=True)
    assert (project / "tests" / "test_xla.py").is_file()
    argv = [XLA_PYTHON, "-m", "pytest", "-v", "-p", "no:cacheprovider", *XLA_OWN_TESTS.get(template, [])]
    proc = run_cmd(argv, cwd=project, timeout=600, env=CPU_XLA)
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed and int(passed[1]) >= 8 and "skipped" not in proc.stdout, proc.stdout
    if template not in XLA_OWN_TESTS:
        learns = LEARNING_TESTS[template]
        assert f"tests/test_training.py::{learns} PASSED" in proc.stdout, f"{learns} must run and pass:\n{proc.stdout}"


def test_gpu_and_cpu_runs_use_an_environment_without_torch_xla() -> None:
    """Where torch_xla is importable, ignite 0.5.5 breaks gloo and nccl runs: users of those have none."""
    assert importlib.util.find_spec("torch_xla") is None, "torch_xla leaked into the base test venv"


def test_gan_trains_3_epochs_in_bf16_and_stops_compiling(bake) -> None:
    """Both optimizers stepped by xm.optimizer_step, bf16 autocast, device loader, samples from the XLA device."""
    project = bake("gan", backend="xla-tpu", mixed_precision=True)
    run_dir, log = train_3_epochs_on_xla_cpu(project)
    assert log["iterations"] == [3, 6, 9, 12] and all(set(v) >= {"loss_d", "loss_g"} for v in log["train"])
    assert [p.name for p in sorted((run_dir / "samples").iterdir())] == [f"epoch_{e:04d}.png" for e in (1, 2, 3)]
    assert (run_dir / "losses.png").is_file()

    metrics = json.loads((run_dir / "xla_metrics.json").read_text())
    # Epoch 1 compiles the step's programs; the epoch-end checkpoint and sample grid add none to training.
    assert metrics["compilations_per_epoch"][0] > 0 and metrics["compilations_per_epoch"][1:] == [0, 0], metrics
    # Reads from the device during training: all the losses in one transfer at each read (iterations 3, 6,
    # 9 and 12). At each epoch's end (counted apart): the checkpoint and the sample grid, which compiles once.
    assert metrics["device_to_host_transfers_per_epoch"] == [1, 1, 2], metrics
    assert metrics["eval_compilations_per_epoch"][1:] == [0, 0], metrics
    assert metrics["eval_device_to_host_transfers_per_epoch"] == [2, 2, 2], "the checkpoint, then the sample grid"

    # The checkpoint loads where there is no torch_xla, into the project's own networks.
    check_loads_without_torch_xla(run_dir / "training_checkpoint_12.pt")
    checkpoint = load_checkpoint(run_dir / "training_checkpoint_12.pt")  # as resume_from loads it
    models = load_module(project / "models.py")
    c = yaml.safe_load((project / "config.yaml").read_text())
    generator = models.Generator(c["z_dim"], c["g_filters"], c["channels"], c["image_size"])
    generator.load_state_dict(checkpoint["generator"])
    discriminator = models.Discriminator(c["channels"], c["d_filters"], c["image_size"])
    discriminator.load_state_dict(checkpoint["discriminator"])
    assert set(checkpoint) >= {"optimizer_g", "optimizer_d", "trainer"}


# The other precision than each template's run above: both shape the step's programs.
LATE_READ_ANSWERS = {
    "vision-classification": {"save_best_model": False, "mixed_precision": True},
    "text-classification": {"save_best_model": False},
    "gan": {},
}


@pytest.mark.parametrize("template", list(LATE_READ_ANSWERS))
def test_xla_loss_read_after_warm_up_compiles_nothing(bake, template: str) -> None:
    """A logging interval longer than the epoch: the first loss read comes in epoch 3, after the warm-up.

    5 epochs of 2 iterations, the losses read every 5 (at iterations 5 and 10: the start of epoch 3 and
    the end of epoch 5). A read is a transfer of values the step has already computed, never a program
    of its own, so training compiles nothing after epoch 2 however the interval and the epoch relate.
    """
    project = bake(template, backend="xla-tpu", **LATE_READ_ANSWERS[template])
    run_dir, log = train_on_xla_cpu(project, max_epochs=5, train_epoch_length=2, log_every_iters=5)
    assert log["iterations"] == [5, 10], log["text"]

    metrics = json.loads((run_dir / "xla_metrics.json").read_text())
    assert metrics["compilations_per_epoch"][2:] == [0, 0, 0], f"training compiled after the warm-up: {metrics}"
    # One transfer per read (the epoch-end checkpoint is counted with the epoch end's work): the progress
    # bar, which moves every iteration, reads nothing from the device.
    assert metrics["device_to_host_transfers_per_epoch"] == [0, 0, 1, 0, 1], metrics
