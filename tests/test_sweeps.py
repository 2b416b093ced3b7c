"""Sweeps (``sweep: optuna``): the README's ``python sweep.py sweep.yaml`` run for real, on Optuna with a real SQLite
file and a real PostgreSQL server (one of the tests' own, as the Slurm tests start Slurm).

- A sweep whose worker is killed with kill -9 mid-trial: its trial's training stops cleanly (SIGTERM from the kernel,
  a checkpoint saved); the same command continues that trial, with the same values, from that checkpoint, prunes a
  bad trial in both of its processes, and ends with exactly n_trials finished; the best config, trained with the
  train command, gives its trial's score exactly.
- Two workers at once on PostgreSQL: exactly n_trials, and the database's password in no file and no output.
- Workers let go at one instant on a new database (SQLite, PostgreSQL), as a Slurm array's tasks start: each opens it.
- What a sweep refuses (a key the config lacks, a distribution of the wrong type, an unreachable database, another
  search space for the same study): a clear message naming it, and nothing changed.
"""

import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import optuna
import pytest
import yaml
from checkpoints import differences, load_checkpoint
from environments import PYTHON, XLA_CPU, XLA_LIGHT_MODELS, XLA_PYTHON
from postgres_server import Postgres, missing
from projects import free_port, make_offline, read_log, run_status, set_sweep, wait_for
from readme_examples import commands, example

pytestmark = pytest.mark.slow  # they train generated projects: not in the quick lane

PROBE = Path(__file__).parent / "probes"
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def readme_sweep_command(project: Path) -> list[str]:
    """The README's sweep command, exactly as written, run by the tests' Python."""
    readme = (project / "README.md").read_text()
    (command,) = commands(example(readme, "## Sweep", "bash", r"^python sweep\.py"))
    argv = shlex.split(command)
    assert argv[0] == "python", command
    return [PYTHON, *argv[1:]]


def sweep(project: Path, argv: list[str], env: dict | None = None, **popen) -> subprocess.Popen:
    """Start a sweep worker in ``project``."""
    full = {**os.environ, **OFFLINE_ENV, **(env or {})}
    return subprocess.Popen(argv, cwd=project, env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finished(proc: subprocess.Popen, timeout: float = 600) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def study_of(project: Path, name: str, url: str | None = None) -> optuna.Study:
    url = url or f"sqlite:///{project / 'logs' / 'sweeps' / name / 'study.db'}"
    return optuna.load_study(study_name=name, storage=url)


def test_a_sweep_killed_mid_trial_continues_that_trial_prunes_in_every_process_and_ends_exact(bake) -> None:
    """Two processes (gloo, spawned) a trial, num_workers 2 (the generated default). Three trials are enqueued in the
    study first (Optuna's API; the sampler's own choices would make pruning a matter of chance): twice the same good
    values, then a learning rate of 1e-7. The first command is killed with kill -9 in trial 0; the second finishes
    the study: trial 1 completes, trial 2 (1e-7) is pruned at its first evaluation, trial 3 continues trial 0's run
    and ends with trial 1's scores and weights, bit for bit (the same values uninterrupted)."""
    project = bake("vision-classification", sweep="optuna", backend="gloo", launcher="spawn", logger="none")
    overrides = {"max_epochs": 2, "train_epoch_length": 6, "eval_batch_size": 32, "save_every_iters": 2}
    overrides["deterministic"] = True
    make_offline(project, light=False, num_workers=2, log_every_iters=2, **overrides)  # resnet18 learns in 6 steps
    settings = set_sweep(project, n_trials=3, startup_trials=1, warmup_epochs=0, heartbeat_interval=1)
    name, argv = settings["study"], readme_sweep_command(project)
    command = "python main.py {config} --backend gloo --nproc_per_node 2"
    assert settings["command"] == command, "the README's train command, for a trial"
    values = [{"lr": 0.003, "batch_size": 64}, {"lr": 0.003, "batch_size": 64}, {"lr": 1e-7, "batch_size": 64}]
    (project / "logs" / "sweeps" / name).mkdir(parents=True)
    study = optuna.create_study(
        study_name=name, storage=f"sqlite:///{project / 'logs' / 'sweeps' / name / 'study.db'}", direction="maximize"
    )
    for value in values:
        study.enqueue_trial(value)

    # kill -9 of the sweep itself, at trial 0's iteration 3 (after its checkpoint 2): its two processes agree on the
    # stop at the next loss reading, iteration 4.
    env = {"PYTHONPATH": str(PROBE), "STOP_PROBE": "iteration:3:KILL_SWEEP"}
    status, out = finished(sweep(project, argv, env))
    assert status == -signal.SIGKILL, f"the probe kills the sweep worker\n{out[-3000:]}"
    trial_dir = project / "logs" / "sweeps" / name / "trial-0000"
    (run_dir,) = [path for path in trial_dir.iterdir() if path.is_dir()]
    wait_for(lambda: (run_dir / "status.yaml").is_file(), 60, "the orphaned trial's clean stop")
    assert run_status(run_dir) == {"status": "stopped", "reason": "SIGTERM", "epoch": 1, "iteration": 4}
    assert (run_dir / "training_checkpoint_4.pt").is_file(), "the trial saved where its kernel's SIGTERM stopped it"
    time.sleep(2.5)  # the worker's heartbeat (1 s) is stale after two missed beats: its trial is free

    status, out = finished(sweep(project, argv))
    assert status == 0, out[-5000:]
    trials = study_of(project, name).get_trials()
    states = [trial.state.name for trial in trials]
    scores = [trial.intermediate_values for trial in trials]
    assert states == ["FAIL", "COMPLETE", "PRUNED", "COMPLETE"], f"{states} {scores}\n{out[-3000:]}"
    assert [trial.params for trial in trials] == [values[0], values[1], values[2], values[0]]
    assert trials[3].user_attrs["run"] == "trial-0000", "trial 3 continues trial 0's run"
    assert scores[3] == scores[1], "the trial continued after kill -9 scores as the same values uninterrupted"
    log = (run_dir / "training.log").read_text()
    assert f"Continuing the run in logs/sweeps/{name}/trial-0000" in log and "training_checkpoint_4.pt" in log
    assert run_status(run_dir)["status"] == "finished"
    (pruned,) = [path for path in (trial_dir.parent / "trial-0002").iterdir() if path.is_dir()]
    assert run_status(pruned)["status"] == "pruned" and run_status(pruned)["epoch"] == 1, run_status(pruned)
    pruned_log = (pruned / "training.log").read_text()
    assert "Pruned: the sweep pruned it at epoch 1" in pruned_log, pruned_log[-2000:]

    # What the user reads at the end: the table, the pictures, the best config and the command that trains it.
    study_dir = trial_dir.parent
    table = (study_dir / "trials.csv").read_text().splitlines()
    assert table[0] == "trial,run,state,score,lr,batch_size" and len(table) == 5, table
    assert table[1].startswith('0,trial-0000,"stopped, continued by 3",'), table[1]
    for picture in ("history.png", "importances.png"):
        assert (study_dir / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", picture
    best = max(trials, key=lambda trial: trial.value if trial.state.name == "COMPLETE" else -1)
    (shown,) = re.findall(r"Train it: (.*)", out)
    assert shown == f"python main.py logs/sweeps/{name}/best-config.yaml --backend gloo --nproc_per_node 2", shown
    config = yaml.safe_load((study_dir / "best-config.yaml").read_text())
    assert config["output_dir"] == "./logs" and config["lr"] == best.params["lr"]
    train = subprocess.run(
        [PYTHON, *shlex.split(shown)[1:]], cwd=project, capture_output=True, text=True, timeout=300,
        env={**os.environ, **OFFLINE_ENV},
    )  # fmt: skip
    assert train.returncode == 0, train.stderr[-3000:]
    (best_run,) = [path for path in (project / "logs").iterdir() if path.is_dir() and path.name != "sweeps"]
    (trial_run,) = [path for path in (study_dir / best.user_attrs["run"]).iterdir() if path.is_dir()]
    assert read_log(best_run)["evals"] == read_log(trial_run)["evals"], "the best config scores as its trial did"
    (uninterrupted,) = [path for path in (study_dir / "trial-0001").iterdir() if path.is_dir()]
    final = {run: load_checkpoint(run / "training_checkpoint_12.pt", deterministic=True)["model"] for run in
             (best_run, trial_run, run_dir, uninterrupted)}  # fmt: skip
    assert not differences(final[best_run], final[trial_run]), "the best config trains its trial's weights"
    assert not differences(final[run_dir], final[uninterrupted]), "trial 0, killed and continued, ends as trial 1"


@pytest.fixture
def postgres():
    """A PostgreSQL server of this test's own, in a folder the user postgres can reach (pytest's is root's alone)."""
    if reason := missing():
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the PostgreSQL tests, and {reason}")
        pytest.skip(reason)
    server = Postgres(Path(tempfile.mkdtemp(prefix="pg-")), free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_two_workers_share_a_postgresql_study_end_exact_and_write_its_password_nowhere(bake, postgres) -> None:
    """The README's second block: the URL (with a password) in OPTUNA_STORAGE, two workers at once, a Hydra project
    with TensorBoard. Exactly n_trials finish; the password is in no file under the project (run directories, the
    study's outputs, TensorBoard's records) and in neither worker's output. Then what a sweep refuses, each naming
    the database or the key, with the study unchanged."""
    project = bake("text-classification", sweep="optuna", argparser="hydra", logger="tensorboard")
    make_offline(project, max_epochs=1, train_epoch_length=2)
    settings = set_sweep(project, n_trials=3, heartbeat_interval=1)
    assert settings["command"] == "python main.py --config-path {dir} --config-name {name}", settings["command"]
    password = "s3cret-Pa55word"
    url = postgres.url(password)
    block = example((project / "README.md").read_text(), "## Sweep", "bash", r"OPTUNA_STORAGE")
    export, command = commands(block)
    assert export.startswith("export OPTUNA_STORAGE='postgresql+psycopg://") and command == "python sweep.py sweep.yaml"
    argv = readme_sweep_command(project)
    workers = [sweep(project, argv, {"OPTUNA_STORAGE": url}) for _ in range(2)]
    outputs = [finished(worker) for worker in workers]
    for status, out in outputs:
        assert status == 0, out[-5000:]
    trials = study_of(project, settings["study"], url).get_trials()
    done = [trial for trial in trials if trial.state.name in ("COMPLETE", "PRUNED")]
    assert len(done) == 3, [(trial.number, trial.state.name, trial.user_attrs) for trial in trials]
    surplus = [trial for trial in trials if trial not in done]
    assert all(trial.user_attrs.get("surplus") for trial in surplus), "only a surplus trial ends unfinished"
    assert not (project / "logs" / "sweeps" / settings["study"] / "study.db").exists(), "the study is PostgreSQL's"
    written = [path for path in project.rglob("*") if path.is_file() and password.encode() in path.read_bytes()]
    assert not written, f"the password is written in {written}"
    assert not [out for _, out in outputs if password in out], "a worker printed the password"
    tensorboard = list(project.glob("logs/sweeps/*/trial-*/*/tensorboard/*"))
    assert len(tensorboard) >= 3, "each trial's run is recorded by the tracker"

    refused = {
        "postgresql+psycopg://postgres:" + password + "@/sweeps?host=/nonexistent&port=1": "postgres:***@",
        "postgresql+psycopg//postgres:" + password + "@/sweeps": "is not an SQLAlchemy URL",
    }
    for bad_url, why in refused.items():
        status, out = finished(sweep(project, argv, {"OPTUNA_STORAGE": bad_url}), timeout=120)
        assert status == 1 and why in out and password not in out and "Traceback" not in out, out[-2000:]
    another = project / "another.yaml"
    another.write_text((project / "sweep.yaml").read_text().replace("choices: [16, 32]", "choices: [8]"))
    status, out = finished(sweep(project, [PYTHON, "sweep.py", "another.yaml"], {"OPTUNA_STORAGE": url}), 120)
    assert status != 0 and "has another search space" in out and "another.yaml" in out, out[-2000:]
    text = (project / "sweep.yaml").read_text()
    for line, why in [
        ("  learning_rate: {type: float, low: 0.1, high: 1.0}", "space: learning_rate is not a config key"),
        ("  batch_size: {type: float, low: 8.0, high: 16.0}", "batch_size: [8.0, 16.0] cannot be"),
        ("  lr: {type: uniform, low: 0.1, high: 1.0}", "lr: give a mapping with type: float, int, categorical"),
        ("  lr: {type: float, low: 0.001, high: 0.1, log: true, step: 0.01}", "`step` is not supported"),
        ("  max_epochs: {type: int, low: 1, high: 5, step: 0}", "max_epochs: `step > 0` must hold"),
        ("command: python main.py config.yaml", "must name the trial's config"),
        ("command: python main.py {config", "command: expected '}'"),
        ("space: [lr]", "space must map config keys"),
        ("study: [", "is not YAML that can be read"),
    ]:
        bad, key = project / "bad.yaml", line.split(":")[0]
        if key.startswith(" "):  # a key of the space, added
            bad.write_text(text + line + "\n")
        else:  # a setting's line in place of the file's (space: the rest of the file)
            bad.write_text(text[: text.index("\nspace:") + 1] + line if key == "space" else text.replace(
                re.search(rf"(?m)^{key}:.*$", text).group(), line))  # fmt: skip
        status, out = finished(sweep(project, [PYTHON, "sweep.py", "bad.yaml"], {"OPTUNA_STORAGE": url}), 120)
        assert status == 1 and why in out and "bad.yaml" in out and "Traceback" not in out, f"{line}: {out[-2000:]}"
    status, out = finished(sweep(project, [PYTHON, "sweep.py", "missing.yaml"]), 120)
    assert status == 1 and "missing.yaml cannot be read: No such file" in out and "Traceback" not in out, out
    assert len(study_of(project, settings["study"], url).get_trials()) == len(trials), "nothing was added"

    # A training command that fails: each trial is told FAIL with its reason, never continued; the worker goes on to
    # the next trial, and ends (status 1, no endless loop) once three have failed in a row.
    broken = set_sweep(project, study="broken", command=settings["command"] + " +no_such_key=1")
    status, out = finished(sweep(project, argv, {"OPTUNA_STORAGE": url}), 300)
    assert status == 1 and "3 trials failed in a row" in out, out[-3000:]
    trials = study_of(project, broken["study"], url).get_trials()
    assert [(t.state.name, t.user_attrs["failed"]) for t in trials] == [("FAIL", "exit status 1")] * 3, trials


# A sweep worker up to the point where it opens its study (sweep.py's own code), held there until the test says go.
OPEN_STUDY = """
import sys, time
from pathlib import Path
from config import Config
from machinery.sweeps.space import load_sweep
from machinery.sweeps.study import open_study
settings, config = load_sweep(Path("sweep.yaml"), Config)
ready, go, url = sys.argv[1:]
Path(ready).touch()
while not Path(go).exists():
    time.sleep(0.001)
study, _ = open_study(settings, url, config["score"], Path("sweep.yaml"))
print("opened", study.study_name, study.user_attrs["space"] == settings.space)
"""


def test_workers_started_at_one_instant_on_a_new_database_each_open_its_study(baked, postgres, tmp_path) -> None:
    """A Slurm array's tasks start in the same second: each worker makes the study's tables, and all but one find
    them made under their hands (SQLite says "table studies already exists", PostgreSQL a duplicate key). Six workers
    on a new SQLite file and six on a new PostgreSQL database, let go at one instant: every one opens the study."""
    project = baked(sweep="optuna")
    urls = {"SQLite": f"sqlite:///{tmp_path / 'study.db'}", "PostgreSQL": postgres.url("s3cret")}
    go = tmp_path / "go"
    workers = {}
    for storage, url in urls.items():
        for index in range(6):
            ready = tmp_path / f"{storage}-{index}.ready"
            argv = [PYTHON, "-c", OPEN_STUDY, str(ready), str(go), url]
            workers[ready] = (storage, sweep(project, argv))

    def each_ready_or_ended() -> bool:  # one that fails on its way shows its output below
        return all(ready.exists() or worker.poll() is not None for ready, (_, worker) in workers.items())

    wait_for(each_ready_or_ended, 120, "the workers ready to open the study")
    go.touch()
    for storage, worker in workers.values():
        status, out = finished(worker, timeout=120)
        assert status == 0 and out.endswith("opened vision_classification True\n"), f"a worker on {storage}:\n{out}"


def test_a_tpu_project_sweeps_its_trials_each_on_the_xla_device_with_scores_reported_from_the_replica(bake) -> None:
    """A TPU project's sweep: each trial its README command (`PJRT_DEVICE=TPU python main.py {config} --backend
    xla-tpu`, the device set to the XLA CPU one as the TPU tests do), its scores reported by the replica to the study;
    exactly n_trials finish and the report is written."""
    assert Path(XLA_PYTHON).exists(), f"no TPU test environment at {XLA_PYTHON}: run `bash scripts/env.sh`"
    project = bake("vision-classification", sweep="optuna", backend="xla-tpu")
    make_offline(project, max_epochs=1, train_epoch_length=2, **XLA_LIGHT_MODELS["vision-classification"])
    settings = set_sweep(project, n_trials=2, startup_trials=1, warmup_epochs=0, heartbeat_interval=2)
    assert settings["command"] == "PJRT_DEVICE=TPU python main.py {config} --backend xla-tpu", settings["command"]
    set_sweep(project, command="PJRT_DEVICE=CPU python main.py {config} --backend xla-tpu")
    status, out = finished(sweep(project, [XLA_PYTHON, "sweep.py", "sweep.yaml"], XLA_CPU))
    assert status == 0, out[-5000:]
    trials = study_of(project, settings["study"]).get_trials()
    assert [trial.state.name in ("COMPLETE", "PRUNED") for trial in trials] == [True, True], trials
    assert all(list(trial.intermediate_values) == [1] for trial in trials), "the replica reported epoch 1's score"
    study_dir = project / "logs" / "sweeps" / settings["study"]
    assert (study_dir / "best-config.yaml").is_file() and (study_dir / "history.png").is_file()
