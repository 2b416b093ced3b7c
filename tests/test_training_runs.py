"""Generated projects train for real on CPU, offline, with each launcher and argparser.

Each run is short (synthetic data, 2 epochs of 3 iterations) and is checked the way a user would
check it: exit code, run directory, logged metrics and checkpoints.
"""

import math
import shlex
import subprocess
import sys

import pytest
import torch
import tracker_records
from helpers import (
    PYTHON,
    TEMPLATES,
    check_tracker_records,
    free_port,
    load_checkpoint,
    make_offline,
    read_log,
    readme_block,
    readme_train_command,
    run_cmd,
    run_dirs,
)

# Options chosen so that, across these runs, every runtime code path is exercised once.
SINGLE_PROCESS = {
    "argparse": {"logger": "tensorboard", "save_best_model": True, "output_dir": "./my runs"},
    "fire": {"deterministic": True, "mixed_precision": True, "timer": True, "patience": "2", "limit_sec": "600"},
    "hydra": {"save_training": False, "save_best_model": False, "terminate_on_nan": False},
}


def check_run(project, epochs: int = 2, iterations_per_epoch: int = 3, output_dir: str = "./logs"):
    """Assert what a user expects of a finished run and return its directory and log."""
    (run_dir,) = run_dirs(project, output_dir)
    assert (run_dir / "config-lock.yaml").is_file(), "each run saves its exact config"
    log = read_log(run_dir)
    assert log["losses"], f"no train_loss logged:\n{log['text']}"
    assert all(math.isfinite(v) for v in log["losses"]), f"non-finite training loss: {log['losses']}"
    assert len(log["evals"]) == epochs, f"expected one eval line per epoch:\n{log['text']}"
    assert all(0.0 <= float(e["accuracy"]) <= 1.0 for e in log["evals"])
    assert log["iterations"][-1] == epochs * iterations_per_epoch
    return run_dir, log


@pytest.mark.parametrize("argparser", list(SINGLE_PROCESS))
def test_single_process_run_trains_and_evaluates(bake, argparser: str) -> None:
    options = SINGLE_PROCESS[argparser]
    project = bake(argparser=argparser, launcher="none", **options)
    config = make_offline(project)
    argv, env = readme_train_command(project)
    assert not env
    run_cmd(argv, cwd=project)
    run_dir, _ = check_run(project, output_dir=options.get("output_dir", "./logs"))
    if options.get("save_training", True):
        assert (run_dir / "training_checkpoint_6.pt").is_file(), "the training state is saved at the end"
    else:
        assert not list(run_dir.glob("*.pt")), "no checkpoint was asked for"
    # Every checkpoint (training state with the scaler and DeterministicEngine's state, best models)
    # loads as resume_from loads it: weights_only.
    for path in run_dir.glob("*.pt"):
        load_checkpoint(path, deterministic=options.get("deterministic", False))
    if options.get("logger") == "tensorboard":
        # What TensorBoard shows: the loss, learning rate, eval metrics and config (see tracker_records.py).
        check_tracker_records(tracker_records.tensorboard(str(project / "my runs")), run_dir, config)
        assert shlex.split(readme_block(project, "## Experiment tracking")) == ["tensorboard", "--logdir", "./my runs"]


@pytest.mark.parametrize("launcher", ["torchrun", "spawn"])
def test_two_process_gloo_run_trains_on_both_ranks(bake, launcher: str) -> None:
    project = bake(argparser="argparse", backend="gloo", launcher=launcher, nproc_per_node="2", master_port=free_port())
    # batch_size is global: 8 per step split into 4 per process.
    make_offline(project)
    argv, _ = readme_train_command(project)
    proc = run_cmd(argv, cwd=project, timeout=600)
    run_dir, log = check_run(project)
    assert "World size: 2" in log["text"], "training must run in a world of 2 processes"
    assert (run_dir / "training_checkpoint_6.pt").is_file()
    assert "Traceback" not in proc.stderr


def test_resumed_run_ends_at_the_same_iteration_as_an_uninterrupted_one(bake) -> None:
    project = bake(argparser="fire", launcher="none", deterministic=True)
    # Whole epochs (1024 synthetic images / 128 = 8 iterations): the data order is then reproducible.
    make_offline(project, max_epochs=2, batch_size=128, train_epoch_length=None)
    run_cmd([PYTHON, "main.py", "config.yaml"], cwd=project)
    first_dir = run_dirs(project)[0]
    uninterrupted = load_checkpoint(first_dir / "training_checkpoint_16.pt", deterministic=True)

    # What a run stopped after epoch 1 leaves behind: its end-of-epoch-1 checkpoint. Resume from it.
    after_epoch_1 = first_dir / "training_checkpoint_8.pt"
    assert after_epoch_1.is_file(), "the training state must be saved at each epoch end"
    run_cmd([PYTHON, "main.py", "config.yaml", f"--resume_from={after_epoch_1}"], cwd=project)
    resumed_dir = run_dirs(project)[1]
    log = read_log(resumed_dir)
    assert "Resumed from" in log["text"]
    assert log["iterations"][0] == 9, "a resumed run continues after the saved iteration"
    assert len(log["evals"]) == 1, "only epoch 2 is left to train and evaluate"
    resumed = load_checkpoint(resumed_dir / "training_checkpoint_16.pt", deterministic=True)
    assert resumed["trainer"]["iteration"] == uninterrupted["trainer"]["iteration"] == 16
    # Deterministic training: the resumed model is the model of the uninterrupted run.
    for name, weight in uninterrupted["model"].items():
        assert torch.allclose(resumed["model"][name].float(), weight.float(), atol=1e-5), f"{name} differs after resume"


# The text template's own code (data, model, trainers, main) once per launcher: (answers, config overrides).
# The shared code in utils.py is covered by the vision runs above.
TEXT_RUNS = {
    # The CUDA mixed-precision code (its scaler off on a CPU), DeterministicEngine, a hidden classifier layer.
    "none": ({"argparser": "fire", "mixed_precision": True, "deterministic": True}, {"classifier_hidden": 16}),
    # DistributedDataParallel, which fails if a parameter gets no gradient (the encoder's pooler is dropped).
    "torchrun": ({"argparser": "argparse", "backend": "gloo", "nproc_per_node": "2"}, {}),
    "spawn": ({"argparser": "hydra", "backend": "gloo", "nproc_per_node": "2"}, {}),
}


@pytest.mark.parametrize("launcher", list(TEXT_RUNS))
def test_text_project_trains_with_each_launcher(bake, launcher: str) -> None:
    answers, overrides = TEXT_RUNS[launcher]
    if launcher != "none":
        answers = {**answers, "master_port": free_port()}
    project = bake("text-classification", launcher=launcher, **answers)
    make_offline(project, **overrides)
    argv, _ = readme_train_command(project)
    proc = run_cmd(argv, cwd=project, timeout=600)
    run_dir, log = check_run(project)
    assert f"World size: {1 if launcher == 'none' else 2}" in log["text"]
    assert "Traceback" not in proc.stderr
    checkpoint = load_checkpoint(
        run_dir / "training_checkpoint_6.pt", deterministic=answers.get("deterministic", False)
    )
    model = checkpoint["model"]
    assert {name.split(".")[0] for name in model} == {"encoder", "classifier"}
    assert not [name for name in model if "pooler" in name], "the encoder's unused pooler must be dropped"
    if overrides.get("classifier_hidden"):
        assert model["classifier.1.weight"].shape[0] == overrides["classifier_hidden"]


def test_nccl_without_a_gpu_stops_with_advice(bake) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: nccl would run")
    project = bake(argparser="argparse", launcher="none")
    make_offline(project)
    proc = subprocess.run(
        [sys.executable, "main.py", "config.yaml", "--backend", "nccl"], cwd=project, capture_output=True, text=True
    )
    assert proc.returncode != 0
    assert "nccl" in proc.stderr and "gloo" in proc.stderr, proc.stderr


@pytest.mark.parametrize("template", TEMPLATES)
def test_generated_project_tests_pass(bake, template: str) -> None:
    project = bake(template, include_test=True, logger="tensorboard", mixed_precision=True)
    run_cmd([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project)


class _RunsCodeWhenUnpickled:
    """A stand-in for a hostile object in a checkpoint: unpickling it opens (creates) a file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.mark.parametrize("template", TEMPLATES)
def test_resume_from_a_checkpoint_holding_code_refuses_it_and_runs_none_of_it(bake, tmp_path, template: str) -> None:
    # Deterministic: resume_from then also allows NumPy's random state, and still nothing else.
    project = bake(template, launcher="none", deterministic=True)
    marker = tmp_path / "code_ran"
    torch.save({"trainer": {"iteration": 1, "payload": _RunsCodeWhenUnpickled(str(marker))}}, project / "evil.pt")
    load = "import logging, utils; utils.resume_from({}, 'evil.pt', logging.getLogger())"
    proc = subprocess.run([PYTHON, "-c", load], cwd=project, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0, "resume_from must refuse a checkpoint that holds more than tensors and plain values"
    assert "Weights only load failed" in proc.stderr, proc.stderr[-3000:]
    assert not marker.exists(), "loading a checkpoint ran code from it"
