"""Seconds from SIGTERM to exit, with the training checkpoint on disk, in a generated project (run inside it).

Usage: python preemption.py TEMPLATE REPEATS. Trains the project's default model on synthetic data (one
process, the CPU; for the text template, a BERT of bert-base-uncased's size with random weights) and has
tests/probes/stop_signals.py send SIGTERM at a fixed moment: in the middle of an epoch (during iteration 20) and, for
templates with an evaluator, as the evaluation after epoch 1 starts (the stop then waits for it to end).
Prints one JSON line: for each landing, the seconds from the signal to the process's exit (median of
REPEATS), the slowest, and the size of the checkpoint it saved.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

PROBE = Path(__file__).resolve().parents[1] / "tests" / "probes"


def stop_once(probe: str) -> dict:
    shutil.rmtree("logs", ignore_errors=True)
    stamp = Path("stamp.txt")
    stamp.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(PROBE), "STOP_PROBE": probe, "STOP_PROBE_STAMP": str(stamp)}
    proc = subprocess.run([sys.executable, "main.py", "config.yaml"], env=env, capture_output=True, text=True)
    exited = time.time()
    (run_dir,) = Path("logs").iterdir()
    status = yaml.safe_load((run_dir / "status.yaml").read_text())
    checkpoint = run_dir / f"training_checkpoint_{status['iteration']}.pt"
    if proc.returncode != 143 or status["status"] != "stopped" or not checkpoint.is_file():
        raise SystemExit(f"{probe}: no clean stop (exit {proc.returncode}, {status}):\n{proc.stderr[-3000:]}")
    return {"seconds": exited - float(stamp.read_text()), "megabytes": checkpoint.stat().st_size / 2**20}


def main(template: str, repeats: int) -> None:
    config = yaml.safe_load(Path("config.yaml").read_text())
    # The default model; synthetic data, and epochs of 40 iterations so that a stop lands within one.
    config.update(dataset="synthetic", num_workers=0, max_epochs=3, train_epoch_length=40, log_every_iters=10)
    if template == "text-classification":
        # Synthetic data trains a tiny BERT: give it bert-base-uncased's shapes (random weights, no
        # download), so that the checkpoint has the default model's size; short batches keep a step short.
        models = Path("models.py")
        text = models.read_text()
        tiny = next(line for line in text.splitlines() if line.startswith("TINY_ENCODER = "))
        models.write_text(text.replace(tiny, "TINY_ENCODER = {}"))
        config.update(batch_size=4, eval_batch_size=4, max_length=64, eval_epoch_length=8)
    Path("config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    landings = {"mid-epoch": "iteration:20"}
    if template != "gan":
        landings["evaluation"] = "epoch_end:1"
    results = {}
    for landing, probe in landings.items():
        runs = [stop_once(probe) for _ in range(repeats)]
        results[landing] = {
            "seconds": statistics.median(run["seconds"] for run in runs),
            "max_seconds": max(run["seconds"] for run in runs),
            "megabytes": runs[0]["megabytes"],
            "eval_epoch_length": config.get("eval_epoch_length"),
        }
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
