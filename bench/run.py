"""Benchmarks of the generated projects: prints a Markdown table, each figure measured side by side.

    bash scripts/bench.sh            # all templates
    bash scripts/bench.sh --quick    # fewer iterations, for checking the script itself

1. Training-loop overhead on CPU: steps per second of each template's generated trainer (synthetic
   data, one process, its handlers attached as in main.py) against a minimal hand-written PyTorch loop
   doing the same forward, backward, step and LR schedule on the same model and data (checked: both
   end with the same weights). Once with glibc's heap trimming off, once with its defaults (see
   STEADY_MALLOC). Target: within 10%, with the steady allocator.
2. XLA on PJRT_DEVICE=CPU: compilations per epoch and device-to-host transfers per training
   iteration of each generated TPU project, against a naive port of the same loop (per-step
   `.item()`, partial last batch, no device loader). Target: no new compilation after epoch 2, at
   most one transfer per logging interval.
3. Evaluation on PJRT_DEVICE=CPU: device-to-host transfers and wall time per evaluation of each TPU
   classifier, at two eval lengths, against a naive port (`.item()` per batch). Target: one transfer per
   evaluation whatever its length, no compilation after the first evaluation. Segmentation: its confusion
   matrix counted on the device (generated) against predicted masks sent to ignite's metrics on the CPU per
   batch, and a naive port (logits to the CPU per batch); a light model, medians of repeated runs.
4. Generation: seconds to bake each template with cookiecutter.
5. Preemption on CPU: seconds from SIGTERM to exit with the training checkpoint on disk, each template's
   default model (bench/preemption.py). Target: well inside a 30-second preemption notice (<= 10 s).

Run with the base venv's Python; the XLA part runs in the TPU venv (`--xla-python`).

6. On a GPU (`bash scripts/bench.sh --gpu`, bench/gpu.py; `--gpu --cpu`: its tiny-model CPU mode): each generated
   trainer against a hand-written loop of the same step at fp32, fp16 and bf16, with and without torch.compile and
   channels-last, and the generated trainer's data loading against its step.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from cookiecutter.main import cookiecutter

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
PARTS = ["loop", "xla", "eval", "replicas", "bake", "preemption"]
TEMPLATES = json.loads((REPO / "cookiecutter.json").read_text())["templates"]
# Eval lengths in batches (full, quick): segmentation's synthetic eval set is 64 scenes, 6 batches of 12
# (the last one short), where the classifiers' is 256 items, 11 batches of 24.
EVAL_LENGTHS = {"vision-segmentation": ([2, 6], [2])}
DEFAULT_EVAL_LENGTHS = ([4, 11], [4])


def bake(template: str, out: Path, **values) -> Path:
    """Bake the template: each of ``values`` that is one of its questions as an answer, the rest as config.yaml keys
    (where the project has them: save_best_model, for one, only where it evaluates)."""
    questions = json.loads((REPO / template / "cookiecutter.json").read_text())
    answers = {key: value for key, value in values.items() if key in questions}
    project = Path(cookiecutter(str(REPO / template), no_input=True, extra_context=answers, output_dir=str(out)))
    set_config(project, **{key: value for key, value in values.items() if key not in questions})
    return project


def set_config(project: Path, **keys) -> None:
    """config.yaml's keys set to ``keys``' values, as a user would edit it; a key the project lacks is left out."""
    path = project / "config.yaml"
    config = yaml.safe_load(path.read_text())
    if any(key in config for key in keys):
        config.update({key: value for key, value in keys.items() if key in config})
        path.write_text(yaml.safe_dump(config, sort_keys=False))


def generation_seconds(template: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            bake(template, Path(tmp))
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def in_baked_project(template: str, script: str, args: list, python: str, env: dict | None = None, **values) -> dict:
    """Bake the template (``values``: see bake), run a bench script with the given Python inside it, return its JSON
    line."""
    with tempfile.TemporaryDirectory() as tmp:
        project = bake(template, Path(tmp), **values)
        cmd = [python, str(BENCH / script), template, *map(str, args)]
        proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{script} on {template} failed:\n{proc.stdout}\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# glibc's malloc hands freed memory at the top of its heap back to the OS (above 128 KiB by default)
# and page-faults it back in at the next step: on CPU that costs up to ~20% per step (BENCHMARKS.md), by
# amounts that depend on where small Python objects happen to sit in the heap, so one loop's
# luck reads as the other's overhead. Keeping freed memory (PyTorch's CPU tuning guide preloads
# jemalloc or tcmalloc for the same reason) leaves only the loops' own costs to compare.
STEADY_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 * 2**20), "MALLOC_TRIM_THRESHOLD_": str(16 * 2**30)}


def loop_overhead(template: str, python: str, iterations: int, repeats: int, steady_malloc: bool) -> dict:
    """Generated trainer against a hand-written loop, one process, synthetic data (bench/loop.py)."""
    # The defaults run must get glibc's defaults, whatever this shell exports (the README's tip, a preload).
    env = {k: v for k, v in os.environ.items() if k not in (*STEADY_MALLOC, "LD_PRELOAD")}
    env.update(HF_HUB_OFFLINE="1", **(STEADY_MALLOC if steady_malloc else {}))
    return in_baked_project(template, "loop.py", [iterations, repeats], python, env, save_best_model=False)


# The TPU project, without checkpoints: their device-to-host copies are not the training loop's.
XLA_PROJECT = {"backend": "xla-tpu", "save_best_model": False, "save_training": False}


def xla_behaviour(template: str, xla_python: str, epochs: int) -> dict:
    """The generated TPU project's xla_metrics.json, and the naive port's counts, on one XLA CPU device."""
    env = {**os.environ, "PJRT_DEVICE": "CPU"}
    return in_baked_project(template, "xla_loops.py", [epochs], xla_python, env, **XLA_PROJECT)


def xla_replicas(template: str, xla_python: str, epochs: int) -> dict:
    """The generated TPU project's xla_metrics.json as 8 replicas on the CPU (bench/xla_replicas.py)."""
    return in_baked_project(template, "xla_replicas.py", [epochs], xla_python, dict(os.environ), **XLA_PROJECT)


def xla_evaluation(template: str, xla_python: str, lengths: list[int]) -> dict:
    """Per-evaluation transfers and seconds of the generated TPU classifier and a naive port (bench/xla_eval.py)."""
    env = {**os.environ, "PJRT_DEVICE": "CPU", "HF_HUB_OFFLINE": "1"}
    return in_baked_project(template, "xla_eval.py", lengths, xla_python, env, **XLA_PROJECT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xla-python", default=str(REPO / ".venv-xla" / "bin" / "python"))
    parser.add_argument("--quick", action="store_true", help="fewer iterations and repeats")
    parser.add_argument("--templates", nargs="*", default=list(TEMPLATES))
    parser.add_argument("--parts", nargs="*", default=PARTS, choices=PARTS)
    parser.add_argument("--iterations", type=int, help="timed iterations per loop run (default: 50, quick: 5)")
    parser.add_argument("--repeats", type=int, help="loop runs per loop (default: 5, quick: 1)")
    args = parser.parse_args()
    args.xla_python = os.path.abspath(args.xla_python)  # the scripts run inside baked projects
    iterations, repeats, epochs = (5, 1, 3) if args.quick else (50, 5, 3)
    iterations, repeats = args.iterations or iterations, args.repeats or repeats

    machine = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"Machine: {machine}")
    command = ["bash scripts/bench.sh", "--quick" if args.quick else ""]
    command += ["--parts", *args.parts] if args.parts != PARTS else []
    command += ["--templates", *args.templates] if args.templates != list(TEMPLATES) else []
    command += [f"--iterations {args.iterations}"] if args.iterations else []
    command += [f"--repeats {args.repeats}"] if args.repeats else []
    print(f"Command: {' '.join(filter(None, command))}\n")

    if "loop" in args.parts:
        loop_table(args.templates, iterations, repeats)
    if "xla" in args.parts:
        xla_table(args.templates, args.xla_python, epochs)
    if "eval" in args.parts:
        eval_table(args.templates, args.xla_python, args.quick)
    if "replicas" in args.parts:
        replicas_table(args.templates, args.xla_python, epochs)
    if "bake" in args.parts:
        bake_table(args.templates, 3 if args.quick else 10)
    if "preemption" in args.parts:
        preemption_table(args.templates, 1 if args.quick else 3)


def loop_table(templates: list[str], iterations: int, repeats: int) -> None:
    print(
        "| template | malloc | generated trainer (it/s) | hand-written loop (it/s) | overhead"
        " | same weights after | target <= 10% |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for template in templates:
        for steady in (True, False):
            r = loop_overhead(template, sys.executable, iterations, repeats, steady)
            overhead = r["hand_written"] / r["generated"] - 1
            # Judged with the steady allocator only: with glibc's defaults the figure measures page faults.
            ok = ("yes" if overhead <= 0.10 and r["same_weights"] else "NO") if steady else "-"
            print(
                f"| {template} | {'steady' if steady else 'glibc defaults'} | {r['generated']:.2f}"
                f" | {r['hand_written']:.2f} | {overhead:+.1%} | {'yes' if r['same_weights'] else 'NO'} | {ok} |"
            )
    print()


def xla_table(templates: list[str], xla_python: str, epochs: int) -> None:
    print("| template | loop | compilations per epoch | transfers per training iteration | log interval | target met |")
    print("| --- | --- | --- | --- | --- | --- |")
    for template in templates:
        r = xla_behaviour(template, xla_python, epochs)
        for loop in ("generated", "naive"):
            m = r[loop]
            # Reads by the loop itself: each CPU fallback (an operation without an XLA lowering on this CPU
            # device, as segmentation's upsampling backward) is a transfer too, shown apart.
            fallbacks = m.get("fallbacks_per_epoch") or [0] * len(m["transfers_per_epoch"])
            own = [t - f for t, f in zip(m["transfers_per_epoch"], fallbacks, strict=True)]
            per_iter = [t / m["iterations_per_epoch"] for t in own]
            steady = all(c == 0 for c in m["compilations_per_epoch"][2:])
            few_reads = max(per_iter) <= 1 / m["log_every_iters"] + 1e-9 if loop == "generated" else None
            met = "-" if few_reads is None else ("yes" if steady and few_reads else "NO")
            reads = ", ".join(f"{v:.2f}" for v in per_iter)
            if any(fallbacks):
                extra = ", ".join(f"{f / m['iterations_per_epoch']:.2f}" for f in fallbacks)
                reads += f" (+ CPU fallbacks: {extra})"
            print(f"| {template} | {loop} | {m['compilations_per_epoch']} | {reads} | {m['log_every_iters']} | {met} |")

    print()


def replicas_table(templates: list[str], xla_python: str, epochs: int) -> None:
    print(
        "| template | replicas | compilations per epoch | reads per replica and steady epoch (training and"
        " evaluation) | target | target met |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for template in templates:
        m = xla_replicas(template, xla_python, epochs)
        n, one = m["replicas"], m["one_epoch"]
        reads = (one["transfers"] - one["fallbacks"]) / n
        # One read per logging interval, and one at each epoch's end: the evaluation's (segmentation's picture of
        # its predictions is one more, by replica 0 only), or the GAN's sample grid (every replica generates it).
        target = m["iterations_per_epoch"] / m["log_every_iters"] + 1 + (template == "vision-segmentation") / n
        # Compilations: xla_metrics.json's, per epoch (how many the first epoch compiles varies from run to run
        # with the replica threads' interleaving, so two runs' totals do not tell the later epochs').
        steady = all(c == 0 for c in m["compilations_per_epoch"][2:])
        met = "yes" if steady and reads <= target + 1e-9 else "NO"
        shown = f"{reads:g}" + (f" (+ CPU fallbacks: {one['fallbacks'] / n:g})" if one["fallbacks"] else "")
        row = [template, n, m["compilations_per_epoch"], shown, f"{target:g}", met]
        print("| " + " | ".join(map(str, row)) + " |")
    print()


def eval_table(templates: list[str], xla_python: str, quick: bool) -> None:
    classifiers = [t for t in templates if t not in ("gan", "vision-segmentation")]  # the GAN has no evaluator
    if classifiers:
        classifier_eval_table(classifiers, xla_python, DEFAULT_EVAL_LENGTHS[quick])
    if "vision-segmentation" in templates:
        segmentation_eval_table(xla_python, EVAL_LENGTHS["vision-segmentation"][quick])


def classifier_eval_table(templates: list[str], xla_python: str, lengths: list[int]) -> None:
    print(
        "| template | eval batches | loop | transfers per evaluation | ms per evaluation"
        " | later compilations | target met |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for template in templates:
        r = xla_evaluation(template, xla_python, lengths)
        for length in lengths:
            for loop in ("generated", "naive"):
                m = r[str(length)][loop]
                ok = m["transfers"] <= 1 and not any(m["later_compilations"])
                met = ("yes" if ok else "NO") if loop == "generated" else "-"
                print(
                    f"| {template} | {length} | {loop} | {m['transfers']} | {1000 * m['seconds']:.0f}"
                    f" | {m['later_compilations']} | {met} |"
                )
    print()


def segmentation_eval_table(xla_python: str, lengths: list[int]) -> None:
    """Three ways to count the confusion matrix on XLA (bench/xla_eval.py), medians of repeated runs."""
    print(
        "| eval batches | metric | transfers per evaluation | ms per evaluation (median) | median of each run"
        " | evaluations | later compilations | target met |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    r = xla_evaluation("vision-segmentation", xla_python, lengths)
    names = {"generated": "generated (device)", "argmax_to_cpu": "argmax to CPU", "naive": "naive"}
    for length in lengths:
        for variant, name in names.items():
            m = r[str(length)][variant]
            ok = m["transfers"] == [1] and not any(m["later_compilations"])
            met = ("yes" if ok else "NO") if variant == "generated" else "-"
            runs = ", ".join(f"{1000 * s:.0f}" for s in m["seconds_per_run"])
            transfers = ", ".join(map(str, m["transfers"]))
            print(
                f"| {length} | {name} | {transfers} | {1000 * m['seconds']:.0f} | {runs} | {m['evaluations']}"
                f" | {sum(m['later_compilations'])} | {met} |"
            )
    print()


def bake_table(templates: list[str], repeats: int) -> None:
    print("| template | seconds to bake (median) |")
    print("| --- | --- |")
    for template in templates:
        print(f"| {template} | {generation_seconds(template, repeats):.2f} |")
    print()


def preemption_table(templates: list[str], repeats: int) -> None:
    print("| template | signal lands | seconds to exit (median) | slowest | checkpoint (MB) | target <= 10 s |")
    print("| --- | --- | --- | --- | --- | --- |")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for template in templates:
        r = in_baked_project(template, "preemption.py", [repeats], sys.executable, env)
        for landing, m in r.items():
            ok = "yes" if m["max_seconds"] <= 10 else "NO"
            print(
                f"| {template} | {landing} | {m['seconds']:.2f} | {m['max_seconds']:.2f}"
                f" | {m['megabytes']:.0f} | {ok} |"
            )
    print()


if __name__ == "__main__":
    main()
