"""Runs survive preemption: a stop signal stops every process cleanly with a checkpoint, and the same
command continues the run, to the same final state as a run never interrupted.

The signals land at exact moments through tests/probes/stop_signals.py (a module the training processes
import at start-up): during an iteration, as an epoch's end handlers start (the classifiers' evaluation),
and in the middle of writing a checkpoint.
"""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

import pytest
import yaml
from answers import REPO, SUPERVISED, TEMPLATES
from checkpoints import differences, load_checkpoint
from environments import PYTHON, XLA_CPU, XLA_LIGHT_MODELS, XLA_PYTHON
from projects import (
    free_port,
    load_module,
    make_offline,
    read_log,
    readme_train_command,
    run_dirs,
    run_status,
    spawned_by_spawned,
)
from readme_examples import example, settings

pytestmark = pytest.mark.slow  # they train, stop and continue generated projects: not in the quick lane

PROBE = Path(__file__).parent / "probes"
SIGTERM_EXIT = 128 + signal.SIGTERM


def train(
    project: Path,
    probe: str = "",
    python: str = PYTHON,
    timeout: int = 300,
    master_port: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run the README's training command in ``project``, with the stop probe set to ``probe`` (and torchrun's
    ``master_port`` another, as a second node's command would have; ``env``: more probes' variables)."""
    probes = env or {}
    argv, env = readme_train_command(project, python)
    if master_port is not None:
        assert "PET_MASTER_PORT" in env, f"not a torchrun command: {argv}"
        env["PET_MASTER_PORT"] = master_port
    if python == XLA_PYTHON:
        env.update(XLA_CPU)
    env = {**os.environ, **env, **probes, "PYTHONPATH": str(PROBE), "STOP_PROBE": probe, "PYTHONUNBUFFERED": "1"}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    # Its output through files, not pipes: the command has ended when its first process has (a process it leaves
    # behind would hold a pipe open, and the call would wait for it).
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        try:
            proc = subprocess.run(argv, cwd=project, stdout=stdout, stderr=stderr, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            proc = None
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read(), stderr.read()
    ran = subprocess.CompletedProcess(argv, proc.returncode if proc else None, out, err)
    assert proc is not None, f"`{' '.join(argv)}` ran past {timeout} s\n{outcome(ran)}"
    return ran


def outcome(proc: subprocess.CompletedProcess) -> str:
    return f"exit code {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-5000:]}"


# Every key that keeps state across iterations or epochs is on, since each keeps its own: early stopping
# (patience: it counts, and never stops these 3 epochs), the best models (the default), the average of the weights
# (ema_momentum, where a template evaluates: state of its own, in every checkpoint), gradients added up over 3
# batches (the stops at iterations 2 and 4 land between two optimizer steps, with gradients to keep); the GAN keeps
# its loss history. On make_offline's light models (what stops and continues is the same for any model;
# segmentation's keeps an auxiliary head, whose loss and state cross the stops too).
STATEFUL = {t: {"patience": 5, "ema_momentum": 0.5, "accumulation_steps": 3} for t in SUPERVISED} | {"gan": {}}


def default_workers(project: Path) -> dict[str, int]:
    """The project's own ``num_workers`` (make_offline sets 0): the loader workers' random transforms must continue
    as the uninterrupted run's (vision's crops and flips, segmentation's rescales, crops and flips)."""
    workers = yaml.safe_load((project / "config.yaml").read_text())["num_workers"]
    assert workers > 0, "every generated config.yaml reads batches in worker processes"
    return {"num_workers": workers}


# What the every-behaviour test changes in a template's README block, where the block's value costs minutes here: the
# GAN's tiny networks compile in seconds, a torchvision model in about 3 minutes on these 2 cores (a cold inductor
# cache, as CI's; once per command); segmentation in full precision (these CPUs emulate bfloat16: FCN took 113 s,
# 13 s in float32). The GAN's float16 is the key's other value, which trains in full precision on a CPU, its scaler
# kept.
CHEAPER = {
    "vision-classification": {"compile": False},
    "vision-segmentation": {"compile": False, "mixed_precision": None},
    "gan": {"mixed_precision": "float16"},
}


# The templates whose state crosses these three stops by code of their own: vision and segmentation (their loaders'
# random transforms, their evaluations; segmentation's auxiliary head), the GAN (two networks, no evaluation). Text's
# state is the classifiers' (vision's here); its own run stopped and continued bit-identical is its launcher test's
# (test_sigterm_to_the_launcher_...: 2 processes, the same stateful answers, num_workers 2): 35 s saved.
THREE_STOPS = [template for template in TEMPLATES if template != "text-classification"]


@pytest.mark.parametrize("template", THREE_STOPS)
def test_every_behaviour_switched_on_trains_and_a_run_stopped_three_times_ends_bit_identical(
    bake, tmp_path: Path, template: str
) -> None:
    """The README's "every one switched on" config (its Configuration block: mixed precision, torch.compile,
    deterministic, the average of the weights, early stopping, the time limit, the timer, both checkpoint kinds with
    their counts and interval) set in config.yaml of a default project, smaller: a run stopped three times (during
    an iteration, at an epoch's end, while a checkpoint is written) and continued ends bit for bit as one never
    stopped, with the same checkpoints. The GAN's float16 trains in full precision on the CPU, its scaler off but
    kept in every training checkpoint, and restored. Each command compiles anew (a kernel per shape, in whatever
    order they come), logs its first iteration's time, and the checkpoints keep the modules' own names."""
    project = bake(template)
    switched_on = settings(example((project / "README.md").read_text(), "## Configuration", "yaml", "^mixed_precision"))
    assert {"compile", "deterministic", "timer", "limit_sec", "save_training", "n_saved"} <= set(switched_on)
    if template == "vision-classification":  # Ignite Templates' README shows a GPU project's, a classifier's
        ours = settings(example((REPO / "README.md").read_text(), "## Options", "yaml", "^mixed_precision"))
        assert ours == switched_on, "Ignite Templates' README shows the generated README's block"
    switched_on |= CHEAPER.get(template, {})
    # 3 epochs of 4 iterations, a checkpoint every 3 iterations and after each epoch, every loss logged; the
    # generated num_workers.
    own = STATEFUL[template] | default_workers(project)
    smaller = {"max_epochs": 3, "train_epoch_length": 4, "save_every_iters": 3, "log_every_iters": 1}
    make_offline(project, **{**switched_on, **smaller, **own})
    uninterrupted = tmp_path / "uninterrupted"
    shutil.copytree(project, uninterrupted)
    proc = train(uninterrupted)
    assert proc.returncode == 0, outcome(proc)
    (expected_dir,) = run_dirs(uninterrupted)

    # Each stop: where the signal lands, and the iteration the run stops after (its last checkpoint). The first
    # stopped command compiles as a user's does, in inductor's pool of worker processes (one per core; the suite
    # compiles in the training process, tests/conftest.py): its stop leaves none of them running.
    pool = {"TORCHINDUCTOR_COMPILE_THREADS": str(min(32, len(os.sched_getaffinity(0))))}  # torch's own default
    stops = [("iteration:2", 2, pool), ("epoch_end:1", 4, {}), ("save:6", 6, {})]
    for probe, stopped_at, env in stops:
        proc = train(project, probe, env=env)
        assert proc.returncode == SIGTERM_EXIT, f"SIGTERM at {probe}: the run must exit with 143\n{outcome(proc)}"
        left = left_in(project)
        assert not left, "processes left running after the stopped command:\n" + "\n".join(left)
        (run_dir,) = run_dirs(project)  # every rerun continues the same run, in its directory
        assert run_status(run_dir) == {
            "status": "stopped",
            "reason": "SIGTERM",
            "epoch": (stopped_at - 1) // 4 + 1,
            "iteration": stopped_at,
        }, f"after SIGTERM at {probe}"
        assert (run_dir / f"training_checkpoint_{stopped_at}.pt").is_file(), f"no checkpoint where {probe} stopped"
        assert not list(run_dir.glob("tmp*")), "a half-written checkpoint was left behind"
        if own.get("accumulation_steps", 1) > 1:
            saved = load_checkpoint(run_dir / f"training_checkpoint_{stopped_at}.pt", deterministic=True)
            gradients = saved["gradients"]
            between_steps = stopped_at % own["accumulation_steps"] != 0
            assert bool(gradients) == between_steps, f"at {stopped_at}: the gradients added up since the last step"
    proc = train(project)
    assert proc.returncode == 0, outcome(proc)
    assert run_status(run_dir) == {"status": "finished", "reason": "max_epochs", "epoch": 3, "iteration": 12}

    log = read_log(run_dir)
    assert log["iterations"] == list(range(1, 13)), "every iteration is trained exactly once across the four runs"
    assert log["text"].count("Continuing the run in") == 3, log["text"]
    compiled = 4 if switched_on["compile"] else 0
    assert log["text"].count("torch.compile compiled the model in it") == compiled, "each command logs its compile time"
    assert log["text"].count("s per iteration") == 3, "the timer's line at each of the 3 epochs' ends"
    if template != "gan":
        assert len(log["evals"]) == 3, "one evaluation per epoch: the one the stop landed in is not repeated"
        assert log["evals"] == read_log(expected_dir)["evals"], "the continued run evaluates as the uninterrupted one"
    final = load_checkpoint(run_dir / "training_checkpoint_12.pt", deterministic=True)
    expected = load_checkpoint(expected_dir / "training_checkpoint_12.pt", deterministic=True)
    assert not differences(final, expected), f"continued != uninterrupted: {differences(final, expected)[:10]}"
    assert ("scaler" in final) == (template == "gan"), "a gradient scaler is float16's only"
    names = [name for key, value in final.items() if key in ("model", "generator", "discriminator") for name in value]
    assert names and not [name for name in names if "_orig_mod" in name], "the modules' own names"
    ema = "ema_momentum" in switched_on
    assert ("ema_model" in final) == ema, "the average of the weights is in every checkpoint of a run that keeps one"
    if ema:  # predict.py and export.py take the average from a training checkpoint, as the best models hold it
        trained = load_module(project / "machinery" / "inference" / "trained.py")
        config_class = load_module(project / "config.py").Config
        _, weights = trained.load_trained(run_dir / "training_checkpoint_12.pt", config_class)
        assert not differences(weights, final["ema_model"]), "load_trained must give the average's weights"
    assert sorted(p.name for p in run_dir.glob("*.pt")) == sorted(p.name for p in expected_dir.glob("*.pt"))
    kept = sorted(p.name for p in run_dir.glob("training_checkpoint_*.pt"))
    assert len(kept) == switched_on["n_saved"], f"n_saved: {switched_on['n_saved']} training checkpoints kept: {kept}"
    # That the same command once more trains nothing is machinery/launch.py's, shared by every template:
    # test_the_same_command_continues_its_own_run_only.


def described(pids: list[int]) -> list[str]:
    """Each process's PID, parent's PID and command line, for a failure's message."""
    lines = []
    for pid in pids:
        with contextlib.suppress(OSError):
            parent = re.search(r"PPid:\s*(\d+)", Path(f"/proc/{pid}/status").read_text())[1]
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
            lines.append(f"{pid} (parent {parent}): {command}")
    return lines


def processes_in(project: Path) -> list[int]:
    """The processes still running in ``project`` (their working directory): launchers, workers, loaders."""
    alive = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and Path(os.readlink(proc / "cwd")) == project:
                alive.append(int(proc.name))
        except OSError:  # gone, or not ours to read
            continue
    return alive


def left_in(project: Path) -> list[str]:
    """The processes still running in ``project`` 2 s after its command ended, described: the multiprocessing resource
    tracker ends by itself a moment after the last process that used it; an orphaned loader worker notices its
    parent gone only every 5 s (torch's MP_STATUS_CHECK_INTERVAL), so a worker the command left is still there."""
    deadline = time.monotonic() + 2
    while (left := described(processes_in(project))) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


# The launcher each template's stop test starts: each launcher's stop handling is machinery/launch.py's, shared by
# every template, and each template's state (its loaders, models, optimizers) is the same under either launcher;
# so each launcher stops two templates, not all four twice (4 commands of 2 processes fewer).
LAUNCHER_OF = {
    "vision-classification": "torchrun",
    "text-classification": "spawn",
    "gan": "spawn",
    "vision-segmentation": "torchrun",
}


@pytest.mark.parametrize("template", TEMPLATES)
def test_sigterm_to_the_launcher_stops_both_processes_at_one_iteration_and_the_rerun_finishes(
    bake, tmp_path: Path, template: str
) -> None:
    """Two processes (gloo), deterministic, at the generated num_workers, with torchrun or spawn (LAUNCHER_OF):
    SIGTERM to the launcher during iteration 5 (epoch 2 of 2, between two optimizer steps) stops both processes
    after the same iteration, with one stop checkpoint, by rank 0, and leaves no process behind; the same command
    continues to the uninterrupted run's end, bit for bit."""
    launcher = LAUNCHER_OF[template]
    project = bake(template, launcher=launcher, backend="gloo")
    # 2 processes, 2 epochs of 4 iterations, a checkpoint every 3 and after each epoch; the processes agree on
    # stopping where they log (every iteration).
    own = STATEFUL[template] | default_workers(project) | {"deterministic": True}
    make_offline(project, max_epochs=2, train_epoch_length=4, save_every_iters=3, log_every_iters=1, **own)
    uninterrupted = shutil.copytree(project, tmp_path / "uninterrupted")
    proc = train(uninterrupted)
    assert proc.returncode == 0, outcome(proc)
    (expected_dir,) = run_dirs(uninterrupted)
    expected = load_checkpoint(expected_dir / "training_checkpoint_8.pt", deterministic=True)

    import torch

    records = tmp_path / "ranks"
    records.mkdir()
    proc = train(project, "iteration:5:PARENT", env={"RANK_PROBE_DIR": str(records)})
    # torchrun exits with its own status for a signal it got, 1, as the README says
    assert proc.returncode == (1 if launcher == "torchrun" else SIGTERM_EXIT), outcome(proc)
    left = left_in(project)
    assert not left, f"{launcher}: processes left running after the launcher exited:\n" + "\n".join(left)
    (run_dir,) = run_dirs(project)
    stopped = run_status(run_dir)
    assert stopped["status"] == "stopped" and stopped["epoch"] == 2 and stopped["iteration"] < 8, stopped
    ranks = [torch.load(path, weights_only=True) for path in sorted(records.glob("rank*.pt"))]
    assert [(r["rank"], r["iteration"]) for r in ranks] == [(0, stopped["iteration"]), (1, stopped["iteration"])], (
        f"{launcher}: both processes stop after the same iteration"
    )
    stop_checkpoint = f"training_checkpoint_{stopped['iteration']}.pt"
    assert [r["renamed"].count(stop_checkpoint) for r in ranks] == [1, 0], f"{launcher}: rank 0 saves it, once"
    assert "Traceback" not in (run_dir / "training.log").read_text()

    proc = train(project)
    assert proc.returncode == 0, outcome(proc)
    assert run_dirs(project) == [run_dir], "the rerun continues the stopped run"
    assert run_status(run_dir) == {"status": "finished", "reason": "max_epochs", "epoch": 2, "iteration": 8}
    assert read_log(run_dir)["iterations"] == list(range(1, 9)), f"{launcher}: each iteration trained once"
    final = load_checkpoint(run_dir / "training_checkpoint_8.pt", deterministic=True)
    diffs = differences(final, expected)
    assert not diffs, f"{launcher}: continued != uninterrupted: {diffs[:10]}"


def test_kill_9_while_writing_a_checkpoint_continues_from_the_newest_complete_one(bake) -> None:
    project = bake("vision-classification")
    make_offline(project, max_epochs=3, train_epoch_length=4, save_every_iters=3)
    proc = train(project, "save:6:KILL")  # SIGKILL with half of checkpoint 6 written
    assert proc.returncode == -signal.SIGKILL, outcome(proc)
    (run_dir,) = run_dirs(project)
    (half_written,) = run_dir.glob("tmp*")  # DiskSaver writes to a temporary file, renamed once complete
    # A file of a checkpoint's name that is not complete (copied in, or from a writer that is not atomic).
    shutil.copy(half_written, run_dir / "training_checkpoint_9.pt")
    # n_saved: 2 complete checkpoints stay while the third is written (ignite's Checkpoint would remove one first).
    assert sorted(p.name for p in run_dir.glob("training_checkpoint_*.pt")) == [
        "training_checkpoint_3.pt",
        "training_checkpoint_4.pt",
        "training_checkpoint_9.pt",
    ]

    proc = train(project)
    assert proc.returncode == 0, outcome(proc)
    log = read_log(run_dir)
    assert f"from {run_dir.relative_to(project)}/training_checkpoint_4.pt" in log["text"], log["text"][-3000:]
    assert log["iterations"][-8:] == list(range(5, 13)), "the continued run trains from iteration 5 to the end"
    assert run_status(run_dir)["status"] == "finished"


def test_the_same_command_continues_its_own_run_only(bake) -> None:
    project = bake("gan")
    make_offline(project, max_epochs=1, train_epoch_length=3)
    for _ in range(2):
        proc = train(project)
        assert proc.returncode == 0, outcome(proc)
    (run_dir,) = run_dirs(project)
    log = read_log(run_dir)
    assert log["iterations"] == [1, 2, 3], "a finished run is not trained again"
    assert "finished (max_epochs at epoch 1, iteration 3): nothing to train" in log["text"]

    # A larger max_epochs trains the finished run longer, in its directory.
    make_offline(project, max_epochs=2, train_epoch_length=3)
    proc = train(project)
    assert proc.returncode == 0, outcome(proc)
    assert run_dirs(project) == [run_dir]
    assert read_log(run_dir)["iterations"] == [1, 2, 3, 4, 5, 6]
    assert yaml.safe_load((run_dir / "config-lock.yaml").read_text())["max_epochs"] == 2, "the lock has the new value"

    # Any other change is another run.
    make_offline(project, max_epochs=2, train_epoch_length=3, lr=0.001)
    proc = train(project)
    assert proc.returncode == 0, outcome(proc)
    first, second = run_dirs(project)
    assert first == run_dir and read_log(second)["iterations"] == [1, 2, 3, 4, 5, 6]


SIGNALS = """
import os, signal, time
from machinery.runs import preemption

preemption.catch_stop_signals()
os.kill(os.getpid(), signal.SIGINT)
os.kill(os.getpid(), signal.SIGTERM)  # the same stop, delivered again (terminal, launcher, scheduler)
assert (preemption.STOP.signum, preemption.STOP.reason) == (signal.SIGINT, "SIGINT")
time.sleep(1.2)
try:
    os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C
except KeyboardInterrupt as aborted:
    print("aborted:", aborted)
"""


def test_the_first_stop_signal_asks_for_a_clean_stop_and_a_second_one_aborts(bake) -> None:
    project = bake("vision-classification")
    proc = subprocess.run([PYTHON, "-c", SIGNALS], cwd=project, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, outcome(proc)
    assert proc.stdout.strip() == "aborted: a second stop signal (SIGINT): aborted", proc.stdout


def test_a_tpu_run_stopped_with_nothing_unsaved_ends_at_once_and_a_continued_one_compiles_nothing_after_warm_up(
    bake, tmp_path: Path
) -> None:
    """A stop mid-epoch waits for the iteration and saves it; a stop while the continued command compiles its
    first iteration, with nothing trained since the checkpoint, ends the command at once (on a TPU that first
    compilation can outlast a preemption notice); the command after it compiles nothing after warm-up, and,
    deterministic, ends bit-identical to a run never stopped: the loader workers (the generated num_workers) read
    the batches, with their random crops and flips, beside the training step, in the device loader's thread. The
    workers, spawned (a TPU process does not fork), start once per loader, not at each pass and evaluation."""
    project = bake("vision-classification", backend="xla-tpu")
    light = XLA_LIGHT_MODELS["vision-classification"]
    workers = default_workers(project)
    make_offline(project, max_epochs=3, train_epoch_length=4, deterministic=True, **light, **workers)
    uninterrupted = shutil.copytree(project, tmp_path / "uninterrupted")
    starts = tmp_path / "starts"
    starts.mkdir()
    proc = train(uninterrupted, python=XLA_PYTHON, env={"PROCESS_STARTS_DIR": str(starts)})
    assert proc.returncode == 0, outcome(proc)
    loader_workers = spawned_by_spawned(starts)
    assert len(loader_workers) == 2 * workers["num_workers"], (
        f"{len(loader_workers)} loader workers started in 3 epochs and 3 evaluations: the train and eval loaders' "
        f"{workers['num_workers']} each, once, expected"
    )
    proc = train(project, "iteration:6:PARENT", python=XLA_PYTHON)  # to the launcher: replicas ignore signals
    assert proc.returncode == SIGTERM_EXIT, outcome(proc)
    (run_dir,) = run_dirs(project)
    assert run_status(run_dir)["iteration"] == 6 and (run_dir / "training_checkpoint_6.pt").is_file()

    proc = train(project, "iteration:7:PARENT", python=XLA_PYTHON)  # its first iteration: compiling
    assert proc.returncode == SIGTERM_EXIT, outcome(proc)
    # Its loader workers too, which hold batches the replica will never take (left, they could wait for ever).
    left = left_in(project)
    assert not left, "the launcher ended its replica process, and what that started, too:\n" + "\n".join(left)
    reason = "SIGTERM, with nothing trained since the last checkpoint: stopped at once"
    assert run_status(run_dir) == {"status": "stopped", "reason": reason}, "the stop did not wait for iteration 7"
    assert read_log(run_dir)["iterations"] == list(range(1, 7)) and f"Stopped: {reason}" in read_log(run_dir)["text"]
    assert run_dirs(project) == [run_dir] and not (run_dir / "training_checkpoint_7.pt").exists()

    proc = train(project, python=XLA_PYTHON)
    assert proc.returncode == 0, outcome(proc)
    assert read_log(run_dir)["iterations"] == list(range(1, 13))
    metrics = json.loads((run_dir / "xla_metrics.json").read_text())  # the continued run's: epochs 2 (part) and 3
    assert len(metrics["compilations_per_epoch"]) == 2, metrics
    assert metrics["compilations_per_epoch"][1:] == [0], f"training compiled after warm-up: {metrics}"
    assert metrics["eval_compilations_per_epoch"][1:] == [0], f"evaluation compiled after warm-up: {metrics}"
    # Epoch 2's end too, the first evaluation of the continued command (its eval workers' first start): the random
    # states it checkpoints are the uninterrupted run's (the eval loader draws from a generator of its own).
    for iteration in (8, 12):
        name = f"training_checkpoint_{iteration}.pt"
        final = load_checkpoint(run_dir / name, deterministic=True)
        expected = load_checkpoint(run_dirs(uninterrupted)[0] / name, deterministic=True)
        diffs = differences(final, expected)
        assert not diffs, f"continued != uninterrupted at iteration {iteration}: {diffs[:10]}"


def process_states(project: Path) -> dict[int, str]:
    """The state of each process running in ``project`` (``T``: stopped), by PID."""
    states = {}
    for pid in processes_in(project):
        with contextlib.suppress(OSError, IndexError):  # ended meanwhile
            states[pid] = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]  # after the command's name
    return states


def start_paused(
    project: Path, iteration: int, processes: int = 1, python: str = PYTHON, env: dict | None = None
) -> subprocess.Popen:
    """Start the README's training command, its ``processes`` training processes paused (SIGSTOP) as iteration
    ``iteration`` starts; return it (``resume`` continues them)."""
    argv, readme_env = readme_train_command(project, python)
    probe = {"PYTHONPATH": str(PROBE), "STOP_PROBE": f"iteration:{iteration}:PAUSE"}
    first = subprocess.Popen(
        argv,
        cwd=project,
        env={**os.environ, **readme_env, **probe, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 240
    while list(process_states(project).values()).count("T") < processes:
        assert first.poll() is None, f"training ended before iteration {iteration}:\n{first.communicate()}"
        assert time.monotonic() < deadline, f"training did not reach iteration {iteration} in 240 s"
        time.sleep(0.2)
    return first


def resume(project: Path) -> None:
    """Continue the paused processes running in ``project`` (SIGCONT)."""
    for pid, state in process_states(project).items():
        if state == "T":
            os.kill(pid, signal.SIGCONT)


@contextlib.contextmanager
def ended_after(project: Path):
    """End the processes running in ``project``, paused or not, when the block ends (a failed check leaves none
    behind)."""
    try:
        yield
    finally:
        for pid in processes_in(project):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def fill(disk: Path) -> Path:
    """Take all the space of ``disk`` but 256 KiB, as other programs would have; return the file that takes it."""
    filler = disk / "filler"
    with open(filler, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, shutil.disk_usage(disk).free - 256 * 1024)
    return filler


def files_of(run_dir: Path) -> dict[str, tuple[int, int]]:
    return {path.name: (path.stat().st_size, path.stat().st_mtime_ns) for path in run_dir.iterdir()}


@pytest.fixture
def small_disk(tmp_path: Path):
    """A real filesystem of its own (a 1 GiB tmpfs, mounted as root), which a test can fill."""
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1g", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        reason = f"cannot mount a tmpfs here (root needed): {proc.stderr.decode().strip()}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    yield mount
    subprocess.run(["umount", "--lazy", str(mount)], check=True)


def test_a_second_command_on_a_training_run_stops_at_once_and_a_full_disk_stops_the_run_to_continue(
    bake, tmp_path: Path, small_disk: Path
) -> None:
    """Two processes (torchrun, gloo). The same command twice: the second stops at once (on the first's port,
    torchrun refuses it; on another, it names the run and the PID of the first's process that holds it) and
    touches nothing, while another config trains beside it. Then the disk fills up: the first's next checkpoint
    (rank 0's, mid-run) does not fit, the run ends as stopped, naming the file and the space, though the other
    process then fails too (its peer gone from the next all-reduce); it keeps its checkpoint, and the same
    command continues it once there is space."""
    project = bake(launcher="torchrun", backend="gloo")
    # 2 processes, 3 epochs of 3 iterations, a checkpoint after each.
    make_offline(project, output_dir=str(small_disk), max_epochs=3, save_best_model=False)
    first = start_paused(project, 5, processes=2)  # epoch 2: the checkpoint of iteration 3 is written
    with ended_after(project):
        (run_dir,) = run_dirs(project, str(small_disk))
        before = files_of(run_dir)
        same_port = train(project)  # a second terminal: torchrun refuses the port the first one holds
        assert same_port.returncode == 1 and "address already in use" in same_port.stderr.lower(), outcome(same_port)
        second = train(project, master_port=free_port())  # a second node's command: it reaches the run's hold
        assert second.returncode == 1, outcome(second)
        held = re.search(rf"Another process \(PID (\d+)\) is training in {re.escape(str(run_dir))}, the", second.stderr)
        assert held and int(held[1]) in processes_in(project), f"the PID named is the first's\n{outcome(second)}"
        # (torchrun prints a traceback of its own when a process exits with 1: not the processes')
        assert not re.search(r"\[rank\d\]: Traceback", second.stderr), outcome(second)
        assert run_dirs(project, str(small_disk)) == [run_dir] and files_of(run_dir) == before, "the second touched it"
        config = yaml.safe_load((project / "config.yaml").read_text())
        another = {"seed": 7, "max_epochs": 1, "train_epoch_length": 1}  # the seed makes it another config
        (project / "config.yaml").write_text(yaml.safe_dump(config | another, sort_keys=False))
        other = train(project, master_port=free_port())
        assert other.returncode == 0, f"another config trains beside the held run: {outcome(other)}"
        (project / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        assert len(run_dirs(project, str(small_disk))) == 2

        filler = fill(small_disk)
        resume(project)
        stdout, stderr = first.communicate(timeout=240)
    assert first.returncode == 1, f"exit code {first.returncode}\n{stderr[-5000:]}"
    full = f"No space left on device for training_checkpoint_6.pt in {run_dir}: it takes "
    assert full in stderr and "MiB are free. The checkpoints saved before it are kept" in stderr, stderr[-3000:]
    assert "The run failed in process 1: " in read_log(run_dir)["text"], "process 1 failed after it"
    assert run_status(run_dir)["status"] == "stopped" and full in run_status(run_dir)["reason"], run_status(run_dir)
    assert sorted(p.name for p in run_dir.glob("*.pt")) == ["training_checkpoint_3.pt"]
    assert not [p.name for p in run_dir.iterdir() if p.name.startswith(("tmp", "."))], "a partial file was left"
    load_checkpoint(run_dir / "training_checkpoint_3.pt")

    filler.unlink()
    proc = train(project)
    assert proc.returncode == 0, outcome(proc)
    log = read_log(run_dir)
    assert f"Continuing the run in {run_dir} from {run_dir / 'training_checkpoint_3.pt'}" in log["text"]
    assert log["iterations"] == [1, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8, 9], "after checkpoint 3, each iteration trained again"
    assert run_status(run_dir) == {"status": "finished", "reason": "max_epochs", "epoch": 3, "iteration": 9}


def test_a_full_disk_at_replica_0s_checkpoint_ends_every_tpu_replica_with_the_run_stopped(
    bake, small_disk: Path
) -> None:
    """2 XLA replicas on the CPU (threads of one process, as in the 8-replica tests): replica 0's checkpoint does
    not fit, its run stops, naming the file; replica 1, which would wait for it in the next all-reduce for ever,
    is ended by the launcher, and the command exits 1 with replica 0's error, its checkpoint before kept."""
    project = bake(backend="xla-tpu")
    # 3 epochs of 3 iterations of 2 samples a replica, a checkpoint after each; the light model of XLA CPU runs.
    replicas = {"batch_size": 4, "eval_batch_size": 4, "train_epoch_length": 3, "eval_epoch_length": 1}
    light = XLA_LIGHT_MODELS["vision-classification"]
    make_offline(project, output_dir=str(small_disk), max_epochs=3, save_best_model=False, **light, **replicas)
    harness = {"XLA_CPU_REPLICAS": "2", "XLA_FLAGS": XLA_CPU["XLA_FLAGS"]}
    first = start_paused(project, 5, python=XLA_PYTHON, env=harness)  # the replicas' process, paused
    (run_dir,) = run_dirs(project, str(small_disk))
    fill(small_disk)
    with ended_after(project):
        resume(project)
        try:
            stdout, stderr = first.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the command hung: replica 1 still waits for replica 0 in the all-reduce")
    assert first.returncode == 1, f"exit code {first.returncode}\n{stderr[-5000:]}"
    full = f"No space left on device for training_checkpoint_6.pt in {run_dir}: it takes "
    assert "Replica 0 failed:" in stderr and full in stderr, stderr[-5000:]
    assert "The other replicas, waiting for it, were ended after 10 s." in stderr, stderr[-3000:]
    assert run_status(run_dir)["status"] == "stopped" and full in run_status(run_dir)["reason"], run_status(run_dir)
    assert sorted(p.name for p in run_dir.glob("*.pt")) == ["training_checkpoint_3.pt"]
    assert not processes_in(project), "a replica process is left"


def corrupt(checkpoint: Path) -> None:
    """Change bytes in the middle of the checkpoint's largest part: still a whole file, as torch.save wrote it."""
    with zipfile.ZipFile(checkpoint) as archive:
        part = max(archive.infolist(), key=lambda info: info.file_size)
    with open(checkpoint, "r+b") as f:
        f.seek(part.header_offset + 30 + len(part.filename) + 64 + part.file_size // 2)
        f.write(b"\xff" * 16)


def test_after_a_kill_the_same_command_continues_past_unreadable_runs_and_a_corrupt_checkpoint(
    bake, tmp_path: Path
) -> None:
    """kill -9 leaves no hold behind. Unreadable run files (an empty config-lock.yaml, a status.yaml cut short)
    are named in the log and their runs skipped; a corrupt newest checkpoint is named and set aside, and the run
    continues from the one before; with none left, the command says so."""
    project = bake()
    make_offline(project, max_epochs=3, save_best_model=False)  # checkpoints after iterations 3 and 6, the last 2 kept
    first = start_paused(project, 8)
    first.kill()
    first.wait()
    (run_dir,) = run_dirs(project)
    corrupt(run_dir / "training_checkpoint_6.pt")
    # Newer runs (their names sort after it) whose files cannot be read: one of this config.
    empty, cut_short = project / "logs" / "29990101-000001-single", project / "logs" / "29990101-000000-single"
    shutil.copytree(run_dir, cut_short)
    (cut_short / "status.yaml").write_text("status: stopped\nreason: [SIGT")
    empty.mkdir()
    (empty / "config-lock.yaml").write_text("")
    none_left = shutil.copytree(project, tmp_path / "none-left")
    corrupt(none_left / run_dir.relative_to(project) / "training_checkpoint_3.pt")

    proc = train(project)
    assert proc.returncode == 0, outcome(proc)
    log = read_log(run_dir)["text"]
    relative = run_dir.relative_to(project)  # as output_dir names it: ./logs
    for note in (
        f"Skipped {empty.relative_to(project)}: its config-lock.yaml cannot be read (empty)",
        f"Skipped {cut_short.relative_to(project)}: its status.yaml cannot be read (ParserError)",
        "training_checkpoint_6.pt does not load (archive/data/",
        f"Continuing the run in {relative} from {relative / 'training_checkpoint_3.pt'}",
    ):
        assert note in log, f"training.log lacks {note!r}:\n{log[-3000:]}"
    assert (run_dir / "training_checkpoint_6.pt.corrupt").is_file(), "the corrupt checkpoint is set aside"
    assert run_status(run_dir) == {"status": "finished", "reason": "max_epochs", "epoch": 3, "iteration": 9}

    proc = train(none_left)
    assert proc.returncode == 1, outcome(proc)
    message = f"None of the training checkpoints in {relative} loads (renamed *.corrupt)"
    assert message in proc.stderr and "Traceback" not in proc.stderr, outcome(proc)
