"""A generated project's Slurm job (slurm.sh) on a real one-node Slurm that the tests start and stop
(tests/slurm_cluster.py): submitted as the README says, with `sbatch slurm.sh`, and stopped the ways a
cluster stops jobs.

One project (gloo, 2 processes per node through srun and torchrun, deterministic), two jobs, submitted
together: one preempted mid-run, one that reaches its time limit and is then cancelled. Where Slurm is not
installed (scripts/install_services.sh) the tests skip, except under CI, where they fail.
"""

import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

import optuna
import pytest
from checkpoints import differences, load_checkpoint
from environments import PYTHON
from projects import make_offline, read_log, readme_train_command, run_dirs, run_status, set_sweep
from readme_examples import commands, example
from slurm_cluster import Slurm, missing

pytestmark = pytest.mark.slow  # they train a generated project under Slurm: not in the quick lane

PROBES = Path(__file__).parent / "probes"
# What a user's shell passes on to the job (sbatch exports it): the venv's torchrun first on PATH; offline.
JOB_ENV = {
    "PATH": f"{Path(PYTHON).parent}{os.pathsep}{os.environ['PATH']}",
    "PYTHONPATH": str(PROBES),
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
}
# Slurm's states of a job that will not start again by itself: ended, or held until someone releases it.
ENDED = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY")
ENDED += ("PREEMPTED", "REQUEUE_HOLD", "SPECIAL_EXIT")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A one-node Slurm for this module's jobs, stopped with everything it ran when they are done."""
    if reason := missing():
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the Slurm tests, and {reason}")
        pytest.skip(reason)
    cluster = Slurm(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


class Job(NamedTuple):
    id: str
    project: Path  # the project the job was submitted from: its output file and run directory are here


class Jobs(NamedTuple):
    preempted: Job
    preempted_uninterrupted: Path  # the same project, trained by the README's command, never stopped
    time_limited: Job


@pytest.fixture(scope="module")
def jobs(slurm: Slurm, bake_for_a_shared_run, tmp_path_factory) -> Jobs:
    """The module's two jobs, submitted together: the time-limited one sleeps through its iterations until Slurm's
    signal (at no CPU cost) while the other trains, is stopped and continues."""
    project = bake_for_a_shared_run(backend="gloo", scheduler="slurm")
    folder = tmp_path_factory.mktemp("slurm-projects")
    preempted, uninterrupted, time_limited = (folder / name for name in ("preempted", "uninterrupted", "time"))
    # 2 epochs of 6 iterations, a checkpoint every 4, every loss logged; half a second asleep per iteration
    # in the job, so that the test stops it mid-run wherever the other tests keep the CPUs.
    make_offline(project, max_epochs=2, train_epoch_length=6, save_every_iters=4, log_every_iters=1, deterministic=True)
    shutil.copytree(project, preempted)
    shutil.copytree(project, uninterrupted)
    # Longer than the time limit: 1 s asleep per iteration.
    shutil.copytree(project, time_limited)
    make_offline(time_limited, max_epochs=1, train_epoch_length=1000, log_every_iters=1)
    return Jobs(
        preempted=Job(slurm.sbatch(preempted, env={**JOB_ENV, "SLOW_ITERATIONS": "0.5"}), preempted),
        preempted_uninterrupted=uninterrupted,
        # Slurm's signal 60 s before a 2-minute limit: Slurm checks the limits every 30 s and signals once the time
        # left is within the lead and one interval, so 30 to 60 s after the start (measured), when it trains.
        time_limited=Job(
            slurm.sbatch(time_limited, "--time=2", "--signal=B:TERM@60", env={**JOB_ENV, "SLOW_ITERATIONS": "1"}),
            time_limited,
        ),
    )


def job_output(job: Job, job_id: str = "") -> str:
    """The job's output file, every start of it (slurm.sh: --output=%x-%j.out, --open-mode=append); an array task's
    is named by its own ``JobId``, not by ``ARRAY_TASK``."""
    (path,) = job.project.glob(f"*-{job_id or job.id}.out")
    return path.read_text()


def trained(project: Path) -> list[int]:
    """The iterations the project's run logged, in order, across every start."""
    logs = list(project.glob("logs/*/training.log"))
    return read_log(logs[0].parent)["iterations"] if logs else []


def start_again(slurm: Slurm, job: Job) -> None:
    """Start a requeued job now: Slurm holds it back for a while (BeginTime) to let its last start end.

    slurmd refuses a job whose credential was revoked (the last start's, as it ended) in the same second: the
    job then fails ("Job credential revoked"). So 2 s pass between the requeue and the new start.
    """
    time.sleep(2)
    slurm.run("scontrol", "update", f"JobId={job.id}", "StartTime=now")


def wait_until_requeued(slurm: Slurm, job: Job, starts: int, timeout: float) -> None:
    """Wait until the job has stopped ``starts`` times and waits in the queue to start again."""

    def requeued() -> bool:
        fields = slurm.job(job.id)
        state = fields["JobState"]
        # Only an ended job fails the wait: on its way to the queue a job passes through states of its own, and
        # Slurm names more of them than one run shows (SIGNALING while its time limit's signal is sent, in CI).
        assert state not in ENDED, f"job {job.id} is {state}, not requeued:\n{job_output(job, fields['JobId'])}"
        return state == "PENDING" and fields["Restarts"] == str(starts)

    slurm.wait_for(requeued, timeout, f"job {job.id} requeued after start {starts}")


def training_a_trial(slurm: Slurm, task: Job, study_dir: Path) -> bool:
    """Whether the array's ``task`` runs and trains a trial: the last trial its output names has logged 2 iterations
    and not ended."""
    fields = slurm.job(task.id)
    if fields.get("JobState") != "RUNNING":  # a pending task has no script to signal
        return False
    outputs = list(task.project.glob(f"*-{fields['JobId']}.out"))  # slurm.sh's --output=%x-%j.out, %j the task's id
    started = re.findall(r"^Trial (\d+): ", outputs[0].read_text(), re.MULTILINE) if outputs else []
    runs = [path.parent for path in study_dir.glob(f"trial-{int(started[-1]):04d}/*/training.log")] if started else []
    return bool(runs) and len(read_log(runs[0])["iterations"]) >= 2 and not (runs[0] / "status.yaml").exists()


def test_a_preempted_job_requeues_itself_and_its_next_start_ends_the_run_bit_identical_to_an_uninterrupted_one(
    slurm: Slurm, jobs: Jobs
) -> None:
    job = jobs.preempted
    slurm.wait_for(lambda: len(trained(job.project)) >= 2, 180, f"job {job.id} training iteration 2")
    # A preemption notice: SIGTERM to the job's script, as `--signal=B:TERM` and a PreemptMode's grace time send it.
    slurm.run("scancel", "--signal=TERM", "--batch", job.id)
    wait_until_requeued(slurm, job, starts=1, timeout=120)
    (run_dir,) = run_dirs(job.project)
    stopped = run_status(run_dir)
    assert stopped["status"] == "stopped" and stopped["reason"] == "SIGTERM", (stopped, job_output(job))
    assert (run_dir / f"training_checkpoint_{stopped['iteration']}.pt").is_file(), "the stop saved a checkpoint"

    # Meanwhile, the same project trained by the README's torchrun command, never stopped.
    argv, _ = readme_train_command(jobs.preempted_uninterrupted)
    proc = subprocess.run(argv, cwd=jobs.preempted_uninterrupted, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"exit code {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    (expected_dir,) = run_dirs(jobs.preempted_uninterrupted)

    start_again(slurm, job)
    slurm.wait_for(lambda: slurm.job(job.id)["JobState"] == "COMPLETED", 180, f"job {job.id} completed")
    output = job_output(job)
    lines = (", start 1,", "training stopped (status", f"requeueing job {job.id}", ", start 2,", "training finished")
    for line in lines:
        assert line in output, f"the job's output file lacks {line!r}: both starts append to it\n{output}"
    assert output.index(", start 1,") < output.index(", start 2,")
    assert slurm.job(job.id)["Restarts"] == "1", "requeued once: a finished run is not requeued"

    assert run_dirs(job.project) == [run_dir], "the second start continued the run in its directory"
    assert run_status(run_dir) == {"status": "finished", "reason": "max_epochs", "epoch": 2, "iteration": 12}
    log = read_log(run_dir)
    assert log["iterations"] == list(range(1, 13)), "each iteration trained once across the two starts"
    assert log["text"].count("Continuing the run in") == 1
    assert log["evals"] == read_log(expected_dir)["evals"], "the continued run evaluates as the uninterrupted one"
    final = load_checkpoint(run_dir / "training_checkpoint_12.pt", deterministic=True)
    expected = load_checkpoint(expected_dir / "training_checkpoint_12.pt", deterministic=True)
    assert not differences(final, expected), f"continued != uninterrupted: {differences(final, expected)[:10]}"


def test_a_job_at_its_time_limit_requeues_itself_to_continue_and_a_cancelled_one_is_not_requeued(
    slurm: Slurm, jobs: Jobs
) -> None:
    job = jobs.time_limited
    # --time=2 --signal=B:TERM@60: Slurm's own signal comes 30 to 60 s after the start.
    wait_until_requeued(slurm, job, starts=1, timeout=200)
    (run_dir,) = run_dirs(job.project)
    first = run_status(run_dir)
    assert first["status"] == "stopped" and first["reason"] == "SIGTERM", (first, job_output(job))
    assert (run_dir / f"training_checkpoint_{first['iteration']}.pt").is_file(), "the stop saved a checkpoint"
    assert f"requeueing job {job.id}" in job_output(job)

    # Its second start gets 10 minutes (no time-limit signal of its own before the cancel below).
    slurm.run("scontrol", "update", f"JobId={job.id}", "TimeLimit=10")
    start_again(slurm, job)
    slurm.wait_for(lambda: len(trained(job.project)) > first["iteration"] + 1, 120, "the second start training")
    assert "Continuing the run in" in read_log(run_dir)["text"]
    slurm.run("scancel", job.id)
    # The job ends (its script has Slurm's KillWait, 30 s, to finish), and stays cancelled.
    slurm.wait_for(lambda: not slurm.queued(job.id), 90, f"job {job.id} to end")
    fields = slurm.job(job.id)
    assert (fields["JobState"], fields["Restarts"]) == ("CANCELLED", "1"), f"{fields}\n{job_output(job)}"
    second = run_status(run_dir)
    assert second["status"] == "stopped" and second["iteration"] > first["iteration"], second
    assert (run_dir / f"training_checkpoint_{second['iteration']}.pt").is_file(), "the cancel's stop saved a checkpoint"
    assert "the job is not requeued" in job_output(job)


def test_a_sweep_as_a_job_array_requeues_a_preempted_task_which_continues_its_trial_and_ends_exact(
    slurm: Slurm, bake
) -> None:
    """The README's `sbatch --array=... slurm.sh sweep`, two tasks (two sweep workers sharing the study's SQLite file
    on this one node), each trial two processes through torchrun. The task that runs as the array's own job (its
    SLURM_JOB_ID the array's, which names every task) is preempted mid-trial: it alone stops, requeues itself, and its
    next start continues that trial's run from its checkpoint. The study ends with exactly n_trials."""
    project = bake(backend="gloo", scheduler="slurm", sweep="optuna")
    make_offline(project, max_epochs=2, train_epoch_length=4, save_every_iters=2, log_every_iters=1, deterministic=True)
    settings = set_sweep(project, n_trials=3, pruning="false", heartbeat_interval=2)
    (command,) = commands(example((project / "README.md").read_text(), "## Sweep", "bash", r"^sbatch "))
    assert command == "sbatch --array=0-3 slurm.sh sweep", command
    job_id = slurm.sbatch(project, "--array=0-1", args=("sweep",), env={**JOB_ENV, "SLOW_ITERATIONS": "0.5"})
    study_dir = project / "logs" / "sweeps" / settings["study"]

    # Slurm starts the tasks side by side (a CPU each), the last one started as the array's own job record.
    tasks = [Job(f"{job_id}_{index}", project) for index in (0, 1)]
    training: list[Job] = []

    def outputs() -> str:
        return "".join(path.read_text() for path in project.glob("*.out"))  # a task of the array each (%j)

    def the_arrays_own_task_training() -> bool:
        assert slurm.queued(job_id), f"the array ended before the test could preempt a task:\n{outputs()[-3000:]}"
        own = [task for task in tasks if slurm.job(task.id).get("JobId") == job_id]
        training[:] = [task for task in own if training_a_trial(slurm, task, study_dir)]
        return bool(training)

    slurm.wait_for(the_arrays_own_task_training, 240, f"the task running as job {job_id} training a trial")
    task = training[0]
    slurm.run("scancel", "--signal=TERM", "--batch", task.id)  # a preemption notice to the task's script
    wait_until_requeued(slurm, task, starts=1, timeout=120)
    start_again(slurm, task)
    slurm.wait_for(lambda: not slurm.queued(job_id), 300, f"job array {job_id} to end")

    output = outputs()
    assert f"requeueing job {task.id} " in output, output[-3000:]
    assert output.count("training stopped") == 1, f"the other task was stopped too:\n{output[-3000:]}"
    study = optuna.load_study(study_name=settings["study"], storage=f"sqlite:///{study_dir / 'study.db'}")
    trials = study.get_trials()
    states = [(trial.number, trial.state.name, trial.user_attrs.get("run")) for trial in trials]
    assert sum(trial.state.name in ("COMPLETE", "PRUNED") for trial in trials) == 3, f"{states}\n{output[-3000:]}"
    stopped = [trial for trial in trials if trial.state.name == "FAIL" and not trial.user_attrs.get("surplus")]
    assert len(stopped) == 1, states
    (continued,) = [
        t for t in trials if t.number > stopped[0].number and t.user_attrs["run"] == stopped[0].user_attrs["run"]
    ]
    assert continued.state.name == "COMPLETE" and continued.params == stopped[0].params, states
    (run_dir,) = [path for path in (study_dir / stopped[0].user_attrs["run"]).iterdir() if path.is_dir()]
    assert "Continuing the run" in (run_dir / "training.log").read_text(), "the preempted trial continued its run"
    assert run_status(run_dir)["status"] == "finished"
