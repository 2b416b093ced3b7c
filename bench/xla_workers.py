"""Loader workers on a TPU process: spawned once per loader and kept (today's project), against spawned at every pass.

Usage (repository root, the TPU venv's Python): python bench/xla_workers.py [--repeats N]. Bakes the TPU vision
project, deterministic (its config key), trains it with its README's command on one XLA CPU device (PJRT_DEVICE=CPU,
the suite's XLA flags), 3 epochs of 4 iterations with an evaluation after each, on the light XLA model, and prints a
table: the command's seconds (median of the repeats) and the loader workers it started
(tests/probes/process_starts.py). The "at every pass" variant is the same project with one change: its loaders
without ``persistent_workers``.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from projects import XLA_CPU, XLA_LIGHT_MODELS, make_offline, readme_train_command, spawned_by_spawned  # noqa: E402

KEPT = '{"persistent_workers": True}'


def bake(out: Path) -> Path:
    from cookiecutter.main import cookiecutter

    context = {"backend": "xla-tpu"}
    return Path(
        cookiecutter(
            str(ROOT), no_input=True, directory="vision-classification", output_dir=str(out), extra_context=context
        )
    )


def train(project: Path, starts: Path) -> tuple[float, int]:
    """One training command from scratch: its seconds and the loader workers started (a spawned replica's children)."""
    shutil.rmtree(project / "logs", ignore_errors=True)
    shutil.rmtree(starts, ignore_errors=True)
    starts.mkdir()
    argv, _ = readme_train_command(project, python=sys.executable)
    env = {**os.environ, **XLA_CPU, "PYTHONPATH": str(ROOT / "tests" / "probes"), "PROCESS_STARTS_DIR": str(starts)}
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"{argv} in {project}: exit code {proc.returncode}\n{proc.stderr[-3000:]}"
    seconds = time.perf_counter() - start
    return seconds, len(spawned_by_spawned(starts))


def set_workers(project: Path, workers: int) -> None:
    config = yaml.safe_load((project / "config.yaml").read_text()) | {"num_workers": workers}
    (project / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    with tempfile.TemporaryDirectory() as tmp:
        kept = bake(Path(tmp) / "kept")
        each_pass = Path(shutil.copytree(kept, Path(tmp) / "each-pass" / kept.name))
        loaders = each_pass / "machinery" / "data" / "loaders.py"
        assert KEPT in loaders.read_text(), "the project's loaders no longer keep spawned workers: update this script"
        loaders.write_text(loaders.read_text().replace(KEPT, "{}"))
        variants = {"kept (the project's)": (kept, 2), "spawned at every pass": (each_pass, 2), "no workers": (kept, 0)}
        for project, workers in variants.values():
            light = XLA_LIGHT_MODELS["vision-classification"]
            make_offline(project, max_epochs=3, train_epoch_length=4, num_workers=workers, deterministic=True, **light)
        results = {name: [] for name in variants}
        for _ in range(repeats):  # the variants alternate
            for name, (project, workers) in variants.items():
                set_workers(project, workers)
                results[name].append(train(project, Path(tmp) / "starts"))
    print("| loader workers | num_workers | command's seconds (median) | runs' seconds | loader workers started |")
    print("| --- | --- | --- | --- | --- |")
    for name, runs in results.items():
        seconds = [f"{s:.1f}" for s, _ in runs]
        started = sorted({n for _, n in runs})
        workers = variants[name][1]
        print(
            f"| {name} | {workers} | {statistics.median(s for s, _ in runs):.1f} | {', '.join(seconds)} | {started} |"
        )


if __name__ == "__main__":
    main()
