"""What a sweep costs beyond its trials' training: sweep.py against the README's train command on the same config.

Usage (repository root, the base venv's Python): python bench/sweep_overhead.py [--trials N] [--repeats R]. Bakes the
default vision project with ``sweep: optuna``, on the offline config of the tests (1 epoch of 2 iterations, the light
model, num_workers 2), and prints a table: the train command's seconds (median of R), the sweep's seconds for N trials
(no pruning, SQLite in output_dir) and per trial, the gap between one trial's last log line and the next one's first
(a process's end and the next one's start, torch's import, the study's bookkeeping), and the train command's time
outside its log (its start and end), which a trial pays too: the sweep's own overhead is the difference.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from projects import make_offline, readme_train_command, set_sweep  # noqa: E402

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def bake(out: Path) -> Path:
    from cookiecutter.main import cookiecutter

    context = {"sweep": "optuna"}
    return Path(
        cookiecutter(
            str(ROOT), no_input=True, directory="vision-classification", output_dir=str(out), extra_context=context
        )
    )


def stamps(log: Path) -> list[datetime]:
    return [
        datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
        for line in log.read_text().splitlines()
        if line[:2] == "20"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = bake(Path(tmp))
        make_offline(project, num_workers=2, max_epochs=1, train_epoch_length=2)
        set_sweep(project, n_trials=args.trials, pruning="false")
        argv, _ = readme_train_command(project, python=sys.executable)
        train, starts = [], []
        for _ in range(args.repeats):
            shutil.rmtree(project / "logs", ignore_errors=True)
            began = time.time()
            subprocess.run(argv, cwd=project, env=ENV, check=True, capture_output=True)
            train.append(time.time() - began)
            (log,) = project.glob("logs/*/training.log")
            logged = stamps(log)
            starts.append(train[-1] - (logged[-1] - logged[0]).total_seconds())  # its process outside its log
        shutil.rmtree(project / "logs", ignore_errors=True)
        began = time.perf_counter()
        subprocess.run(
            [sys.executable, "sweep.py", "sweep.yaml"], cwd=project, env=ENV, check=True, capture_output=True
        )
        swept = time.perf_counter() - began
        logs = sorted(project.glob("logs/sweeps/*/trial-*/*/training.log"))
        gaps = [(stamps(b)[0] - stamps(a)[-1]).total_seconds() for a, b in zip(logs, logs[1:], strict=False)]
    rows = [
        ("train command (median)", statistics.median(train)),
        (f"sweep of {args.trials} trials", swept),
        ("sweep, per trial", swept / args.trials),
        ("gap between trials (median)", statistics.median(gaps)),
        ("train command outside its log (median)", statistics.median(starts)),
        ("sweep's own overhead a trial", statistics.median(gaps) - statistics.median(starts)),
    ]
    overhead = rows[-1][1]
    rows.append(("sweep's start and end (imports, study, report)", swept - args.trials * (rows[0][1] + overhead)))
    print("| what | seconds |\n| --- | --- |")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
