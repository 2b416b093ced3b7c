"""TPU projects train for real on one XLA CPU device (PJRT_DEVICE=CPU), in the TPU environment.

No TPU exists here: the single-device path runs for real, and so does the launch (one replica on the one
device, in the generated project's own tests/test_xla.py, run here in the same environment, which also
unit-tests the logic for 8 replicas). Each template's TPU project trains once, by its notebook, and the
``test_tpu_*`` tests each check one thing of that run (``tpu_run``): compiling is most of an XLA run's time.
"""

import importlib.util
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import yaml
from answers import TEMPLATES, template_context
from checkpoints import check_loads_without_torch_xla, load_checkpoint
from environments import XLA_CPU, XLA_CPU_OWN_TESTS, XLA_LIGHT_MODELS, XLA_PYTHON
from notebooks import run_notebook_alone, setup_cell
from projects import (
    LEARNING_TESTS,
    load_module,
    read_log,
    readme_train_command,
    run_cmd,
)
from scheduling import on_one_worker
from torchvision.models import squeezenet1_1
from torchvision.models.segmentation import lraspp_mobilenet_v3_large

pytestmark = pytest.mark.slow  # they train generated projects on the XLA CPU device: not in the quick lane


@pytest.fixture(autouse=True)
def xla_environment() -> None:
    assert Path(XLA_PYTHON).exists(), f"no TPU test environment at {XLA_PYTHON}: run `bash scripts/env.sh`"


# Each template's TPU project is trained once here, by its notebook run top to bottom (it writes the project's files,
# then trains with the README's command): 3 epochs of 4 iterations, the losses read every 5 (an interval the epoch
# does not divide): none in epoch 1, whose steps compile, then at iteration 5 (epoch 2's first) and 10 (epoch 3's
# second), after the warm-up. The tests below each check one thing of that run. Per template, the answers and config
# values: text in bfloat16 (padded to max_length, the transformer must compile once too: the classifiers' step in
# bfloat16; vision's and segmentation's runs are its float32); the GAN in bfloat16 (both optimizers stepped by
# xm.optimizer_step, samples from the XLA device); evaluations of two lengths: vision's whole synthetic eval set (256
# images: 10 batches of 24 and a short last one, padded), text's first 2 batches, segmentation's whole set (64 scenes:
# 2 batches of 24 and a short last one), with gradients accumulated over 2 batches (the steps with and without the
# optimizer step are two programs, both compiled in epoch 1).
TPU_RUNS = {
    "vision-classification": {"save_best_model": False, "eval_epoch_length": None, "eval_batch_size": 24},
    "text-classification": {"save_best_model": False, "mixed_precision": "bfloat16", "eval_epoch_length": 2},
    "gan": {"mixed_precision": "bfloat16"},
    "vision-segmentation": {
        "save_best_model": False,
        "eval_epoch_length": None,
        "eval_batch_size": 24,
        "accumulation_steps": 2,
    },
}
THREE_EPOCHS = {"max_epochs": 3, "train_epoch_length": 4, "log_every_iters": 5}
# The notebooks train the lightest models (XLA_LIGHT_MODELS): what these tests check (which programs compile and
# when, what crosses to the host) is the same for any model, and compiling is most of a run (measured alone:
# segmentation's notebook 139 s with DeepLabV3-MobileNetV3, 74 s with LR-ASPP; vision's 71 s with ResNet-18, 36 s
# with SqueezeNet). The auxiliary head's loss and its state across a stop are checked in the CPU runs
# (test_preemption.py); ResNet-18 trains on the XLA device in vision's own tests (below).
NOTEBOOK_MODELS = XLA_LIGHT_MODELS
# Reads from the device at each epoch's end (counted apart from training's): the evaluation's one read of its
# sums, then the epoch-end checkpoint (saved after the evaluation: it holds what the evaluation's handlers did);
# segmentation's picture of the predicted masks is a third; the GAN has no evaluation: its checkpoint, then its
# sample grid.
EPOCH_END_READS = {"vision-classification": 2, "text-classification": 2, "gan": 2, "vision-segmentation": 3}
# Operations that run on the CPU: none, but for segmentation's bilinear upsampling's backward pass on this CPU
# device (torch_xla lowers it on a TPU only).
CPU_FALLBACKS = {"vision-segmentation": {"aten::upsample_bilinear2d_backward"}}


@dataclass
class TpuRun:
    """What a TPU notebook's run left: the project it was made from, the folder it ran in, its run directory."""

    project: Path
    folder: Path
    run_dir: Path
    executed: nbformat.NotebookNode

    @property
    def log(self) -> dict:
        return read_log(self.run_dir)

    @property
    def metrics(self) -> dict:
        return json.loads((self.run_dir / "xla_metrics.json").read_text())


@pytest.fixture(scope="session")
def tpu_run(baked, tmp_path_factory) -> Callable[[str], TpuRun]:
    """The template's one TPU run (see TPU_RUNS), made the first time a test asks for it on this worker:
    the tests of a template share an xdist group, so one worker runs them all, after one run. A run that
    failed fails its other tests with the same error, without running again."""
    runs: dict[str, TpuRun | BaseException] = {}

    def run(template: str) -> TpuRun:
        if template not in runs:
            project = baked(template, backend="xla-tpu")  # the notebook runs in a folder of its own
            folder = tmp_path_factory.mktemp(f"tpu-{template}")
            config = {**THREE_EPOCHS, **TPU_RUNS[template], **NOTEBOOK_MODELS.get(template, {})}
            try:
                executed = run_notebook_alone(project, folder, XLA_PYTHON, XLA_CPU, **config)
                (run_dir,) = (folder / "logs").iterdir()
                runs[template] = TpuRun(project, folder, run_dir, nbformat.read(executed, as_version=4))
            except BaseException as failure:  # an AssertionError from run_cmd, with the notebook's output
                runs[template] = failure
        if isinstance(runs[template], BaseException):
            raise runs[template]
        return runs[template]

    return run


EACH_TPU_RUN = [on_one_worker(f"tpu-run-{template}", template) for template in TEMPLATES]


@pytest.mark.parametrize("template", EACH_TPU_RUN)
def test_tpu_notebook_runs_top_to_bottom_on_an_xla_cpu_device(tpu_run, template: str) -> None:
    run = tpu_run(template)
    setup_output = "".join(out.get("text", "") for out in setup_cell(run.executed).outputs)
    assert "already installed: nothing to do" in setup_output, "the install cell must skip a present torch_xla"
    for path in ("main.py", "config.py", "machinery/launch.py", "machinery/tpu/xla.py", "README.md"):
        assert (run.folder / path).read_bytes() == (run.project / path).read_bytes(), f"the notebook's {path}"
    _, env = readme_train_command(run.project, python="python")
    assert env == {"PJRT_DEVICE": "TPU"}, "the README (and so the notebook) trains on the TPU"


@pytest.mark.parametrize("template", EACH_TPU_RUN)
def test_tpu_run_trains_every_epoch_on_the_one_device_it_has_and_says_so(tpu_run, template: str) -> None:
    log = tpu_run(template).log
    assert log["iterations"] == [5, 10]
    assert len(log["evals"]) == (3 if template_context(template)["_eval_metric"] else 0), "one evaluation an epoch"
    # One device here, 8 expected: the run goes on and says so in one line.
    assert log["text"].count("Expected 8 TPU replicas (nproc_per_node) but this runtime has 1 device(s)") == 1


@pytest.mark.parametrize("template", EACH_TPU_RUN)
def test_tpu_training_compiles_its_programs_in_epoch_1_only(tpu_run, template: str) -> None:
    metrics = tpu_run(template).metrics
    compilations = metrics["compilations_per_epoch"]
    assert len(compilations) == 3 and all(isinstance(n, int) for n in compilations)
    assert compilations[0] > 0, "the first epoch compiles the training step"
    # Epoch 1's 4 steps compile all the step's programs; nothing else in training compiles one: not the loss reads
    # of epochs 2 and 3, the first after the warm-up (a read is a transfer of values the step has computed, never a
    # program of its own, however the logging interval and the epoch relate).
    assert compilations[1:] == [0, 0], f"training compiled after epoch 1: {metrics}"


@pytest.mark.parametrize("template", EACH_TPU_RUN)
def test_tpu_training_reads_the_device_once_per_logged_loss_and_runs_nothing_on_the_cpu(tpu_run, template) -> None:
    metrics = tpu_run(template).metrics
    fallbacks = metrics["cpu_fallbacks_per_epoch"]
    allowed = CPU_FALLBACKS.get(template, set())
    assert all(set(epoch) <= allowed for epoch in fallbacks), f"operations ran on the CPU: {fallbacks}"
    # One read per loss read (at iterations 5 and 10; the GAN's four losses in one transfer), plus one per operation
    # run on the CPU: none in epoch 1, whose progress bar moves every iteration and reads nothing from the device.
    transfers = metrics["device_to_host_transfers_per_epoch"]
    reads = [total - sum(epoch.values()) for total, epoch in zip(transfers, fallbacks, strict=True)]
    assert reads == [0, 1, 1], metrics


@pytest.mark.parametrize("template", EACH_TPU_RUN)
def test_tpu_epoch_end_reads_the_device_a_fixed_number_of_times_and_compiles_once(tpu_run, template: str) -> None:
    """The evaluation sums its metrics on the device and reads them once, whatever its length; its padded
    batches share one shape, so nothing compiles after the first evaluation (the GAN's sample grid: once)."""
    metrics = tpu_run(template).metrics
    reads = EPOCH_END_READS[template]
    assert metrics["eval_device_to_host_transfers_per_epoch"] == [reads] * 3, f"reads at each epoch end: {metrics}"
    assert metrics["eval_compilations_per_epoch"][1:] == [0, 0], f"the epoch end compiled again: {metrics}"


@pytest.mark.parametrize("template", EACH_TPU_RUN)
def test_tpu_checkpoint_loads_without_torch_xla_into_the_networks_a_gpu_user_builds(tpu_run, template) -> None:
    run = tpu_run(template)
    checkpoint_path = run.run_dir / "training_checkpoint_12.pt"
    check_loads_without_torch_xla(checkpoint_path)
    checkpoint = load_checkpoint(checkpoint_path)  # as resume_from loads it
    assert checkpoint["trainer"]["iteration"] == 12
    if template == "vision-classification":
        squeezenet1_1(num_classes=10).load_state_dict(checkpoint["model"])
    elif template == "vision-segmentation":
        model = lraspp_mobilenet_v3_large(num_classes=21, weights_backbone=None)
        model.load_state_dict(checkpoint["model"])
        assert checkpoint["gradients"] == {}, "an optimizer step just zeroed them: nothing to keep"
    elif template == "gan":
        models = load_module(run.folder / "models.py")
        c = yaml.safe_load((run.run_dir / "config-lock.yaml").read_text())
        models.Generator(c["z_dim"], c["g_filters"], c["channels"], c["image_size"]).load_state_dict(
            checkpoint["generator"]
        )
        models.Discriminator(c["channels"], c["d_filters"], c["image_size"]).load_state_dict(
            checkpoint["discriminator"]
        )
        assert set(checkpoint) >= {"optimizer_g", "optimizer_d", "trainer"}
    else:
        assert {name.split(".")[0] for name in checkpoint["model"]} == {"encoder", "classifier"}


# The pictures a TPU run draws at each epoch's end, from the XLA device.
PICTURES = {"gan": "samples", "vision-segmentation": "predictions"}


@pytest.mark.parametrize("template", [p for p in EACH_TPU_RUN if p.values[0] in PICTURES])
def test_tpu_run_draws_a_picture_each_epoch(tpu_run, template: str) -> None:
    run = tpu_run(template)
    pictures = sorted(path.name for path in (run.run_dir / PICTURES[template]).iterdir())
    assert pictures == [f"epoch_{epoch:04d}.png" for epoch in (1, 2, 3)], "a picture per epoch"
    if template == "gan":
        assert (run.run_dir / "losses.png").is_file()
        assert all(set(values) >= {"loss_d", "loss_g"} for values in run.log["train"])


# The templates whose own training tests run on the XLA device here: vision's (ResNet-18 learns there, in bf16). The
# others run their tests/test_xla.py there (launch, shim, eval metrics on the device): segmentation's models compile
# for minutes (scripts/projects.py's XLA_OWN_TESTS, for the lanes too); text's and the GAN's tests/test_training.py
# are the CPU projects' file, byte for byte, which passes on the CPU (test_ci_commands_pass_in_a_fresh_venv,
# test_gan_runs.py), and their models train on the XLA device in their notebook runs above (66 s saved, measured).
OWN_TRAINING_TESTS_ON_XLA = {"vision-classification"}


@pytest.mark.parametrize("template", TEMPLATES)
def test_xla_project_own_tests_pass_with_bf16_and_fire(bake, template: str) -> None:
    """The generated tests, as a TPU user runs them: the launch logic for 8 replicas, the shim, the eval
    metrics; for vision, short bf16 runs on the XLA device, the one that shows the project learning included."""
    project = bake(template, backend="xla-tpu", argparser="fire")
    assert (project / "tests" / "test_xla.py").is_file()
    config = project / "config.yaml"  # the tests' short runs read it: in bfloat16, as the TPU computes
    config.write_text(config.read_text().replace("mixed_precision: null", "mixed_precision: bfloat16"))
    # Not tests/test_export.py: export.py runs on the CPU with the torch TPU projects pin (2.9.0, the base test
    # venv's, where the projects' own tests export: test_ci_commands_pass_in_a_fresh_venv, and segmentation's).
    argv = [XLA_PYTHON, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--deselect", "tests/test_export.py"]
    on_xla = [] if template in OWN_TRAINING_TESTS_ON_XLA else ["tests/test_xla.py"]  # none named: every file
    argv += on_xla
    proc = run_cmd(argv, cwd=project, timeout=600, env=XLA_CPU_OWN_TESTS)
    passed = re.search(r"(\d+) passed", proc.stdout)
    at_least = 6 if on_xla else 8  # test_xla.py's own (the GAN has 6), or every file's
    assert passed and int(passed[1]) >= at_least and "skipped" not in proc.stdout, proc.stdout
    if not on_xla:
        learns = LEARNING_TESTS[template]
        assert f"tests/test_training.py::{learns} PASSED" in proc.stdout, f"{learns} must run and pass:\n{proc.stdout}"


def test_gpu_and_cpu_runs_use_an_environment_without_torch_xla() -> None:
    """Where torch_xla is importable, ignite 0.5.5 breaks gloo and nccl runs: users of those have none."""
    assert importlib.util.find_spec("torch_xla") is None, "torch_xla leaked into the base test venv"
