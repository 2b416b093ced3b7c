"""Generated projects train for real on CPU, offline, with each launcher and argparser.

Each run is short (synthetic data, 2 epochs of 3 iterations) and is checked the way a user would
check it: exit code, run directory, logged metrics and checkpoints.
"""

import math
import re
import shlex
import subprocess
import sys

import pytest
import torch
import tracker_records
from answers import TEMPLATES
from checkpoints import differences, load_checkpoint
from environments import PYTHON
from projects import (
    LEARNING_TESTS,
    QUICK_MODELS,
    make_offline,
    read_log,
    readme_block,
    readme_train_command,
    run_cmd,
    run_dirs,
)
from ranks import check_both_ranks_trained, check_each_eval_sample_scored_once, run_recording_ranks, with_eval_set_of
from tracker_checks import check_tracker_records

pytestmark = pytest.mark.slow  # they train generated projects: not in the quick lane

# Per argparser, its answers and config keys, chosen so that, across these runs, every runtime code path is exercised
# once.
SINGLE_PROCESS = {
    "argparse": ({"logger": "tensorboard"}, {"save_best_model": True}),
    "fire": (
        {},
        {"deterministic": True, "mixed_precision": "bfloat16", "timer": True, "patience": 2, "limit_sec": 600},
    ),
    "hydra": ({}, {"save_training": False, "save_best_model": False, "terminate_on_nan": False}),
}


def check_run(project, epochs: int = 2, iterations_per_epoch: int = 3, output_dir: str = "./logs", metric="accuracy"):
    """Assert what a user expects of a finished run and return its directory and log."""
    (run_dir,) = run_dirs(project, output_dir)
    assert (run_dir / "config-lock.yaml").is_file(), "each run saves its exact config"
    log = read_log(run_dir)
    assert log["losses"], f"no train_loss logged:\n{log['text']}"
    assert all(math.isfinite(v) for v in log["losses"]), f"non-finite training loss: {log['losses']}"
    assert len(log["evals"]) == epochs, f"expected one eval line per epoch:\n{log['text']}"
    assert all(0.0 <= float(e[metric]) <= 1.0 for e in log["evals"]), f"{metric} per epoch: {log['evals']}"
    assert log["iterations"][-1] == epochs * iterations_per_epoch
    return run_dir, log


def check_best_models(run_dir, log: dict, n_saved: int) -> None:
    """The best-model files are the ``n_saved`` epochs of highest eval accuracy in training.log, each named
    ``best_model_<epoch>_accuracy=<score>.pt`` with the score the log shows."""
    logged = {epoch: line["accuracy"] for epoch, line in enumerate(log["evals"], start=1)}
    saved = {}
    for path in run_dir.glob("best_model_*.pt"):
        match = re.fullmatch(r"best_model_(\d+)_accuracy=(\d\.\d{4})\.pt", path.name)
        assert match, f"{path.name}: a best model is named best_model_<epoch>_accuracy=<score>.pt"
        saved[int(match[1])] = match[2]
    assert len(saved) == n_saved < len(logged), f"keep the best n_saved={n_saved} of {len(logged)} epochs: {saved}"
    for epoch, score in saved.items():
        assert score == logged[epoch], f"the best model of epoch {epoch} is named {score}, the log says {logged[epoch]}"
    top = sorted(map(float, logged.values()))[-n_saved:]
    assert sorted(map(float, saved.values())) == top, f"saved {saved}, not the top {n_saved} of {logged}"


def check_timer(log: dict, epochs: int, timer: bool) -> None:
    """With ``timer``, each epoch logs its average time per iteration (a positive number); without, none."""
    timed = re.findall(r"Epoch (\d+) - (\S+) s per iteration$", log["text"], flags=re.MULTILINE)
    if not timer:
        assert not timed, "the timer is off: no time per iteration is logged"
        return
    assert [int(epoch) for epoch, _ in timed] == list(range(1, epochs + 1)), f"one time per epoch:\n{log['text']}"
    assert all(float(seconds) > 0 for _, seconds in timed), f"times per iteration must be positive: {timed}"


@pytest.mark.parametrize("argparser", list(SINGLE_PROCESS))
def test_single_process_run_trains_and_evaluates_with_the_asked_checkpoints_and_timer(bake, argparser: str) -> None:
    answers, options = SINGLE_PROCESS[argparser]
    project = bake(argparser=argparser, **answers)
    # One epoch more than the checkpoints of each kind kept (n_saved, 2 by default), and the training state
    # saved every 2 iterations too: the run must drop some of each kind.
    saving = {"save_every_iters": 2} if options.get("save_training", True) else {}
    config = make_offline(project, max_epochs=3, **saving, **options)
    argv, env = readme_train_command(project)
    assert not env
    run_cmd(argv, cwd=project)
    run_dir, log = check_run(project, epochs=3)
    checkpoints = {path.name for path in run_dir.glob("*.pt")}
    training = {name for name in checkpoints if name.startswith("training_checkpoint_")}
    if options.get("save_training", True):
        # Saved every 2 iterations and at each epoch end (2, 3, 4, 6, 8, 9): the last n_saved=2 are kept.
        assert training == {"training_checkpoint_8.pt", "training_checkpoint_9.pt"}, sorted(checkpoints)
    if options.get("save_best_model", True):
        check_best_models(run_dir, log, config["n_saved"])
    best = {name for name in checkpoints if name.startswith("best_model_")}
    assert checkpoints == training | best, f"checkpoints of another kind: {sorted(checkpoints - training - best)}"
    if not options.get("save_training", True):
        assert not training, "no training checkpoint was asked for"
    if not options.get("save_best_model", True):
        assert not best, "no best model was asked for"
    check_timer(log, epochs=3, timer=options.get("timer", False))
    # Every checkpoint (training state with DeterministicEngine's state, best models) loads as resume_from loads
    # it: weights_only. bfloat16 (autocast on the CPU) keeps no gradient scaler.
    for path in run_dir.glob("*.pt"):
        loaded = load_checkpoint(path, deterministic=options.get("deterministic", False))
        assert "scaler" not in loaded, f"{path.name}: only float16 has a gradient scaler"
    if answers.get("logger") == "tensorboard":
        # What TensorBoard shows: the loss, learning rate, eval metrics and config (see tracker_records.py).
        check_tracker_records(tracker_records.tensorboard(str(project / "logs")), run_dir, config, epochs=3)
        assert shlex.split(readme_block(project, "## Experiment tracking")) == ["tensorboard", "--logdir", "./logs"]


def train_to_a_stop(project) -> dict:
    """Train with the README's command, as a user would; return training.log (see read_log), where the
    trainer says that a handler stopped it and the handler (EarlyStopping, TerminateOnNan, the time limit) why."""
    argv, _ = readme_train_command(project)
    run_cmd(argv, cwd=project)
    (run_dir,) = run_dirs(project)
    log = read_log(run_dir)
    assert "Terminate signaled" in log["text"], f"training was not stopped by a handler:\n{log['text']}"
    return log


def test_early_stopping_ends_training_after_patience_epochs_without_improvement(bake) -> None:
    project = bake(argparser="argparse")
    # A flat eval accuracy: a learning rate of 0 leaves the weights as they are, and squeezenet has no batch
    # norm whose running statistics (updated by every training step) would change the eval outputs. Epoch 2
    # is then no better than epoch 1 (ignite counts a score <= the best as no improvement).
    # squeezenet's pooling needs images of more than 16 pixels (OFFLINE's image_size, small for the GAN).
    make_offline(project, model="squeezenet1_1", lr=0.0, max_epochs=5, image_size=32, patience=1, save_training=False)
    log = train_to_a_stop(project)
    accuracies = [line["accuracy"] for line in log["evals"]]
    assert len(accuracies) == 2 and len(set(accuracies)) == 1, f"patience 1 stops after epoch 2 of 5: {accuracies}"
    assert log["iterations"][-1] == 2 * 3, "no iteration of epoch 3 runs"
    assert "EarlyStopping: Stop training" in log["text"], log["text"][-3000:]


def test_the_score_config_yaml_names_ranks_best_models_and_a_name_no_metric_has_is_refused(bake) -> None:
    """``score: -loss``: the best models are the epochs of lowest eval loss, named ``neg_loss=<-loss>`` (early
    stopping reads the same ``evaluation.score_of``); a score naming no eval metric stops at the first evaluation,
    saying which exist."""
    project = bake(argparser="fire")
    make_offline(project, max_epochs=3, score="-loss", patience=3, save_training=False)
    argv, _ = readme_train_command(project)
    run_cmd(argv, cwd=project)
    (run_dir,) = run_dirs(project)
    log = read_log(run_dir)
    losses = {epoch: float(line["loss"]) for epoch, line in enumerate(log["evals"], start=1)}
    saved = {}
    for path in run_dir.glob("best_model_*.pt"):
        match = re.fullmatch(r"best_model_(\d+)_neg_loss=(-\d\.\d{4})\.pt", path.name)
        assert match, f"{path.name}: with score -loss a best model is named best_model_<epoch>_neg_loss=<-loss>.pt"
        saved[int(match[1])] = float(match[2])
    lowest = sorted(losses, key=losses.get)[:2]  # n_saved: 2
    assert sorted(saved) == sorted(lowest), f"the 2 epochs of lowest eval loss {losses}, not {saved}"
    assert all(saved[epoch] == -losses[epoch] for epoch in saved), f"named after the negated loss: {saved}, {losses}"
    proc = subprocess.run([*argv, "--score=acc"], cwd=project, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0, "a score that names no eval metric must stop the run"
    assert "score: 'acc' names no eval metric; the evaluation gives accuracy, loss" in proc.stderr, proc.stderr[-3000:]


def test_a_nan_loss_stops_training_at_the_iteration_it_appears(bake) -> None:
    project = bake(argparser="argparse")
    # lr: .inf in config.yaml. The warm-up starts at (inf - 0) * 0 = NaN: the first step makes every weight
    # NaN, whatever the data, and the loss of iteration 2 is NaN (logged, and so checked, every iteration).
    make_offline(project, lr=float("inf"), terminate_on_nan=True, save_training=False)
    log = train_to_a_stop(project)
    assert log["iterations"] == [1, 2], f"training must stop at the NaN loss of iteration 2 of 6:\n{log['text']}"
    first, second = (values["train_loss"] for values in log["train"])
    assert math.isfinite(first) and math.isnan(second), log["train"]
    assert not log["evals"], "a run stopped within epoch 1 never evaluates"
    assert "TerminateOnNan: Output '[nan]' contains NaN or Inf. Stop training" in log["text"], log["text"][-3000:]


def test_time_limit_stops_training_with_a_checkpoint_and_the_same_command_continues(bake) -> None:
    project = bake(argparser="argparse")
    # 2000 iterations of resnet18 take a minute or more on a CPU: far beyond the limit of 1 second.
    total = 2000
    config = make_offline(project, max_epochs=1, train_epoch_length=total, limit_sec=1, save_best_model=False)
    assert config["limit_sec"] == 1
    log = train_to_a_stop(project)
    stopped = log["iterations"][-1]
    assert stopped < total, f"1 s must stop the run before iteration {total}"
    assert not log["evals"], "the run stopped within its only epoch"
    assert f"Stopping after iteration {stopped}: the time limit (limit_sec: 1)" in log["text"], log["text"][-3000:]
    (run_dir,) = run_dirs(project)
    assert (run_dir / f"training_checkpoint_{stopped}.pt").is_file(), "a run stopped by the time limit can continue"

    # Each command trains for limit_sec: the same command continues the run, and stops it again.
    log = train_to_a_stop(project)
    assert run_dirs(project) == [run_dir], "the same command continues the run in its directory"
    assert f"from {run_dir.relative_to(project)}/training_checkpoint_{stopped}.pt" in log["text"], log["text"][-3000:]
    assert log["iterations"][-1] > stopped, "the continued run trains on from where the first stopped"


# An eval set 2 processes do not divide (a sampler that pads it repeats a sample, which would count twice),
# scored whole in batches of 3 per process: 2 batches on the process of 4 samples, 1 on the other.
ODD_EVAL_SET = 7
WHOLE_ODD_EVAL = {"eval_epoch_length": None, "eval_batch_size": 6}


@pytest.mark.parametrize("launcher", ["torchrun", "spawn"])
def test_two_process_gloo_run_trains_on_both_ranks(bake, tmp_path, launcher: str) -> None:
    project = bake(argparser="argparse", backend="gloo", launcher=launcher)
    # batch_size is global: 8 per step split into 4 per process. The eval set is scored whole (see ODD_EVAL_SET).
    with_eval_set_of(project, ODD_EVAL_SET)
    make_offline(project, **WHOLE_ODD_EVAL)
    argv, _ = readme_train_command(project)
    # The log is rank 0's: what rank 1 did is recorded in each process by the test's probe.
    proc, ranks = run_recording_ranks(argv, project, tmp_path / "ranks")
    run_dir, log = check_run(project)
    assert "World size: 2" in log["text"], "training must run in a world of 2 processes"
    checkpoint = load_checkpoint(run_dir / "training_checkpoint_6.pt")
    check_both_ranks_trained(ranks, iterations=6, networks=[checkpoint["model"]])
    check_each_eval_sample_scored_once(ranks, ODD_EVAL_SET)
    assert "Traceback" not in proc.stderr


def test_resumed_run_ends_at_the_same_iteration_as_an_uninterrupted_one(bake) -> None:
    project = bake(argparser="fire")
    # Whole epochs (1024 synthetic images / 128 = 8 iterations): the data order is then reproducible.
    make_offline(project, max_epochs=2, batch_size=128, train_epoch_length=None, deterministic=True)
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
    # Deterministic training on a CPU: the resumed run ends with the uninterrupted run's state, bit for bit:
    # every weight, the optimizer's moments and param groups, the LR scheduler, the trainer (iteration,
    # epoch, random states). Anything else would mean the data order or a random draw changed on resume.
    assert set(resumed) == set(uninterrupted), "both checkpoints hold the same objects"
    diffs = differences(resumed, uninterrupted)
    assert not diffs, "the resumed run's last checkpoint differs from the uninterrupted run's:\n" + "\n".join(diffs)


# The text template's own code (data, model, trainers, main) once per launcher: (answers, config overrides).
# The machinery (shared code) is covered by the vision runs above.
TEXT_RUNS = {
    # float16's code (CUDA's: on a CPU full precision, its scaler off), DeterministicEngine, a hidden classifier layer.
    "none": ({"argparser": "fire"}, {"mixed_precision": "float16", "deterministic": True, "classifier_hidden": 16}),
    # DistributedDataParallel, which fails if a parameter gets no gradient (the encoder's pooler is dropped).
    "torchrun": ({"argparser": "argparse", "backend": "gloo"}, {}),
    "spawn": ({"argparser": "hydra", "backend": "gloo"}, {}),
}


def train_with_launcher(
    bake, tmp_path, template: str, launcher: str, answers: dict, overrides: dict, metric: str = "accuracy"
):
    """Bake ``template`` for ``launcher``, train with the README's command (2 processes but with none), check
    the run, and that both processes trained, each on its own batches; return its directory and log."""
    project = bake(template, launcher=launcher, **answers)
    if launcher != "none":  # the eval set scored whole (see ODD_EVAL_SET)
        with_eval_set_of(project, ODD_EVAL_SET)
        overrides = {**WHOLE_ODD_EVAL, **overrides}
    make_offline(project, **overrides)
    argv, _ = readme_train_command(project)
    if launcher == "none":
        proc = run_cmd(argv, cwd=project, timeout=600)
    else:
        proc, ranks = run_recording_ranks(argv, project, tmp_path / "ranks")
    run_dir, log = check_run(project, metric=metric)
    assert f"World size: {1 if launcher == 'none' else 2}" in log["text"]
    assert "Traceback" not in proc.stderr
    if launcher != "none":
        checkpoint = load_checkpoint(run_dir / "training_checkpoint_6.pt")
        check_both_ranks_trained(ranks, iterations=6, networks=[checkpoint["model"]])
        check_each_eval_sample_scored_once(ranks, ODD_EVAL_SET)
    return run_dir, log


@pytest.mark.parametrize("launcher", list(TEXT_RUNS))
def test_text_project_trains_with_each_launcher(bake, tmp_path, launcher: str) -> None:
    answers, overrides = TEXT_RUNS[launcher]
    run_dir, _ = train_with_launcher(bake, tmp_path, "text-classification", launcher, answers, overrides)
    checkpoint = load_checkpoint(
        run_dir / "training_checkpoint_6.pt", deterministic=overrides.get("deterministic", False)
    )
    model = checkpoint["model"]
    assert {name.split(".")[0] for name in model} == {"encoder", "classifier"}
    assert not [name for name in model if "pooler" in name], "the encoder's unused pooler must be dropped"
    if overrides.get("classifier_hidden"):
        assert model["classifier.1.weight"].shape[0] == overrides["classifier_hidden"]
    # float16 keeps its gradient scaler in the training state; on a CPU the run says it trains in full precision.
    assert ("scaler" in checkpoint) == (overrides.get("mixed_precision") == "float16")
    float32 = "mixed_precision: float16 autocasts on CUDA GPUs only; this run trains on the cpu in full precision"
    assert (float32 in read_log(run_dir)["text"]) == (overrides.get("mixed_precision") == "float16")


# The segmentation template's own code once per launcher, each with another of the models tested and
# gradients added up over 2 batches (2 optimizer steps per epoch of 3 iterations: one spans the epochs).
SEGMENTATION_RUNS = {
    # DeterministicEngine, FCN (auxiliary head).
    "none": ({"argparser": "fire"}, {"deterministic": True, "model": "fcn_resnet50"}),
    # DistributedDataParallel over DeepLabV3 (make_offline's, on MobileNetV3): every parameter, the auxiliary
    # head's too, gets a gradient.
    "torchrun": ({"argparser": "argparse", "backend": "gloo"}, {}),
    # LR-ASPP: no auxiliary head; bfloat16 autocast on the CPU. This CPU has no bfloat16 instructions, so autocast
    # emulates them: on the lightest model (measured, one process: LR-ASPP 12.7 s in bfloat16, 5.7 s in float32;
    # FCN on ResNet-50 113 s and 13 s). The loss adds the auxiliary head's the same way in either precision.
    "spawn": (
        {"argparser": "hydra", "backend": "gloo"},
        {"mixed_precision": "bfloat16", "model": "lraspp_mobilenet_v3_large"},
    ),
}


@pytest.mark.parametrize("launcher", list(SEGMENTATION_RUNS))
def test_segmentation_project_trains_with_each_launcher(bake, tmp_path, launcher: str) -> None:
    answers, overrides = SEGMENTATION_RUNS[launcher]
    overrides = {"accumulation_steps": 2, **overrides}
    run_dir, log = train_with_launcher(
        bake, tmp_path, "vision-segmentation", launcher, answers, overrides, metric="mIoU"
    )
    assert all({"pixel_accuracy", "IoU_background", "IoU_tvmonitor"} <= set(e) for e in log["evals"]), log["evals"]
    checkpoint = load_checkpoint(
        run_dir / "training_checkpoint_6.pt", deterministic=overrides.get("deterministic", False)
    )
    heads = {name.split(".")[0] for name in checkpoint["model"]}
    with_aux = overrides.get("model") != "lraspp_mobilenet_v3_large"
    assert ("aux_classifier" in heads) == with_aux, (
        f"{overrides.get('model', QUICK_MODELS['deeplabv3_resnet50'])}: {heads}"
    )
    assert checkpoint["gradients"] == {}, "iteration 6 steps the optimizer: no gradient is left to keep"
    pictures = sorted(path.name for path in (run_dir / "predictions").iterdir())
    assert pictures == ["epoch_0001.png", "epoch_0002.png"], "rank 0 draws one picture per epoch"


def test_segmentation_project_own_tests_pass_on_the_cpu(bake) -> None:
    """Segmentation's generated tests, the learning one included, as a GPU or CPU user runs them."""
    project = bake("vision-segmentation", backend="gloo", argparser="hydra", include_test=True)
    proc = run_cmd([PYTHON, "-m", "pytest", "-v", "-p", "no:cacheprovider"], cwd=project, timeout=600)
    learns = LEARNING_TESTS["vision-segmentation"]
    assert f"tests/test_training.py::{learns} PASSED" in proc.stdout, f"{learns} must run and pass:\n{proc.stdout}"
    assert "failed" not in proc.stdout and "skipped" not in proc.stdout, proc.stdout


def test_nccl_without_a_gpu_stops_with_advice(bake) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: nccl would run")
    project = bake(argparser="argparse")
    make_offline(project)
    proc = subprocess.run(
        [sys.executable, "main.py", "config.yaml", "--backend", "nccl"], cwd=project, capture_output=True, text=True
    )
    assert proc.returncode != 0
    assert "nccl" in proc.stderr and "gloo" in proc.stderr, proc.stderr


# Each template's own tests (the learning test among them) run as its generated CI runs them:
# tests/test_project_tooling.py::test_ci_commands_pass_in_a_fresh_venv.


class _RunsCodeWhenUnpickled:
    """A stand-in for a hostile object in a checkpoint: unpickling it opens (creates) a file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.mark.parametrize("template", TEMPLATES)
def test_resume_from_a_checkpoint_holding_code_refuses_it_and_runs_none_of_it(bake, tmp_path, template: str) -> None:
    # resume_from allows NumPy's random state (a deterministic run's), and nothing else.
    project = bake(template)
    marker = tmp_path / "code_ran"
    torch.save({"trainer": {"iteration": 1, "payload": _RunsCodeWhenUnpickled(str(marker))}}, project / "evil.pt")
    load = "import logging; from machinery.training import handlers as h; "
    load += "h.resume_from({}, 'evil.pt', logging.getLogger())"
    proc = subprocess.run([PYTHON, "-c", load], cwd=project, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0, "resume_from must refuse a checkpoint that holds more than tensors and plain values"
    assert "Weights only load failed" in proc.stderr, proc.stderr[-3000:]
    assert not marker.exists(), "loading a checkpoint ran code from it"
