"""The generated trainers against hand-written loops of the same step on one GPU, at every precision, with and
without torch.compile and channels-last; and the generated trainer's data loading against its step.

    bash scripts/bench.sh --gpu          # on a machine with a CUDA GPU: one table per template (under 8 minutes)
    bash scripts/bench.sh --gpu --cpu    # the same script on the CPU, tiny vision model: the per-iteration cost

Each template is baked with its default answers and measured in its own process by bench/gpu_loop.py (see there for
what each loop does); the generated trainer runs each setting its config.yaml can say (`mixed_precision`: null,
float16, bfloat16; `compile`: false, true). Columns: the generated trainer's and the hand-written loop's steps per
second on the same batches held in memory, the overhead (how much longer a generated step takes: hand-written it/s /
generated it/s - 1, and in ms), the peak GPU memory each allocated, the time each generated step waited for the
project's loader at num_workers 2 (the default) and 0 with its steps per second then, and whether both loops ended
with the same weights where that is expected (fp32, no compile; elsewhere the loops' order of floating-point
operations may differ).
Settings the generated project cannot say in its config.yaml yet (channels-last) are "n/a (not an option yet)"
(bench/gpu_loop.py's PROJECT_OPTIONS: one line per option).
Target: the generated trainer within 5% of the hand-written loop at every setting.

The run keeps to --budget-s (default 430 s; under 8 minutes in all, for a 10-minute slot): each template gets an
equal share of what is left, the compiled settings come last (each starts only with a minute of its template's
share left), a setting that does not start in time says "skipped (time budget)", and one still running 20 s past
the budget (a long compilation) is stopped, the rows measured before it kept.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from run import STEADY_MALLOC, TEMPLATES, bake  # noqa: E402

TARGET = 0.05
COLUMNS = [
    "setting",
    "generated (it/s)",
    "hand-written (it/s)",
    "overhead",
    "overhead (ms/step)",
    "peak memory, generated (MiB)",
    "peak memory, hand-written (MiB)",
    "data wait, num_workers 2 (ms/step)",
    "data wait, num_workers 0 (ms/step)",
    "same weights after",
    "target <= 5%",
]


def overhead(generated_it_s: float, hand_written_it_s: float) -> float:
    """How much longer a generated step takes than a hand-written one (0.05: 5% longer)."""
    return hand_written_it_s / generated_it_s - 1


def same_weights(row: dict) -> str:
    """Whether every run of both loops ended with the same weights (fingerprints compared exactly).

    Expected at fp32 without compile only. Where the hand-written runs differ among themselves the device is not
    deterministic (atomics in a backward pass on a GPU): then the loops cannot be told apart this way.
    """
    setting = row["setting"]
    if "generated" not in row:
        return "-"
    gen, hand = row["generated"]["weights"], row["hand_written"]["weights"]
    expected = setting["precision"] == "fp32" and not setting["compile"]
    if len(set(gen) | set(hand)) == 1:
        return "yes"
    spread = (max(hand) - min(hand)) / abs(hand[0])
    apart = abs(gen[0] - hand[0]) / abs(hand[0])
    if not expected:
        return f"- (not expected; relative difference {apart:.1e})"
    if spread > 0:
        return f"nondeterministic device (hand-written runs {spread:.1e} apart, the loops {apart:.1e})"
    return f"NO (relative difference {apart:.1e})"


def cells(row: dict) -> list[str]:
    """A table row: one cell per COLUMNS."""
    if "skipped" in row:
        return [row["label"]] + [f"skipped ({row['skipped']})"] * (len(COLUMNS) - 1)
    hand = row["hand_written"]
    mib = lambda value: "-" if value is None else f"{value:,.0f}"  # noqa: E731  (the CPU has no GPU memory)
    if "generated" not in row:  # the project cannot say this setting yet: the hand-written loop's figures only
        na = f"n/a ({row.get('not_generated', 'not an option yet')})"
        return [row["label"], na, f"{hand['it_s']:.1f}", na, na, na, mib(hand["peak_mib"]), na, na, "-", "-"]
    gen = row["generated"]
    cost = overhead(gen["it_s"], hand["it_s"])
    weights = same_weights(row)
    ok = cost <= TARGET and not weights.startswith("NO")
    waits = []
    for workers in ("2", "0"):
        wait = row.get("data_wait", {}).get(workers)
        waits.append("-" if wait is None else f"{wait['ms']:.2f} ({wait['it_s']:.1f} it/s)")
    return [
        row["label"],
        f"{gen['it_s']:.1f}",
        f"{hand['it_s']:.1f}",
        f"{cost:+.1%}",
        f"{1000 / gen['it_s'] - 1000 / hand['it_s']:+.3f}",
        mib(gen["peak_mib"]),
        mib(hand["peak_mib"]),
        *waits,
        weights,
        "yes" if ok else "NO",
    ]


def without_bar(row: dict) -> dict | None:
    """The diagnosis row (--cpu): the generated trainer without its progress bar against the same hand-written runs."""
    if "generated_without_bar" not in row:
        return None
    label = f"{row['label']}: generated without its progress bar (diagnosis)"
    return {**row, "label": label, "generated": row["generated_without_bar"], "data_wait": {}}


def table(result: dict) -> str:
    """One Markdown table of a template's rows (bench/gpu_loop.py's JSON)."""
    lines = [f"{result['template']} on {result['device']} ({result['iterations']} timed iterations a run)", ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("| " + " | ".join("---" for _ in COLUMNS) + " |")
    for row in result["rows"]:
        lines += ["| " + " | ".join(cells(r)) + " |" for r in (row, without_bar(row)) if r is not None]
    return "\n".join(lines) + "\n"


def measure(template: str, options: dict, python: str = sys.executable, kill_at: float | None = None) -> dict:
    """Bake the template and run bench/gpu_loop.py in it; its JSON.

    glibc's heap kept (run.py's STEADY_MALLOC: BENCHMARKS.md section 1 says why). On the CPU, one compute thread:
    a tiny model gains nothing from a second, and on a shared machine OpenMP's threads waiting for each other
    are noise larger than the loops' difference.
    """
    env = {k: v for k, v in os.environ.items() if k not in (*STEADY_MALLOC, "LD_PRELOAD")}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **STEADY_MALLOC)
    if options.get("device") == "cpu":
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        project = bake(template, Path(tmp), save_best_model=False)
        partial = Path(tmp) / "result.json"  # the rows so far, written after each setting
        cmd = [python, str(BENCH / "gpu_loop.py"), template, json.dumps({**options, "result_path": str(partial)})]
        timeout = None if kill_at is None else max(1.0, kill_at - time.time())
        try:
            proc = subprocess.run(
                cmd, cwd=project, capture_output=True, text=True, env=env, check=False, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            # Past the whole run's budget (a long compilation): the settings measured so far; the rest say skipped.
            if partial.exists():
                return json.loads(partial.read_text())
            raise
    if proc.returncode != 0:
        raise RuntimeError(f"gpu_loop.py on {template} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="on the CPU, fp32, the vision model replaced by a tiny one")
    parser.add_argument("--templates", nargs="*", help="default: all (--cpu: vision-classification)")
    parser.add_argument("--budget-s", type=float, default=430, help="the whole run's time, seconds (GPU)")
    parser.add_argument("--repeats", type=int, help="runs of each loop per setting (default: 3, --cpu 7)")
    parser.add_argument("--iterations", type=int, default=0, help="timed iterations a run (0: about 1.5 s' worth)")
    args = parser.parse_args()
    templates = args.templates or (["vision-classification"] if args.cpu else list(TEMPLATES))
    if not args.cpu:
        import torch

        if not torch.cuda.is_available():
            sys.exit("bench/gpu.py: no CUDA GPU here (torch.cuda.is_available() is False); --cpu runs its CPU mode")
    start = time.time()
    machine = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"Machine: {machine}\nCommand: {' '.join(['bash scripts/bench.sh --gpu', *sys.argv[1:]])}\n", flush=True)
    for index, template in enumerate(templates):
        options = {"repeats": args.repeats or (7 if args.cpu else 3), "iterations": args.iterations}
        if args.cpu:
            # The per-iteration cost: fp32 only (today's mixed precision is CUDA's), repeats to beat the noise.
            options.update(device="cpu", tiny=True, settings=["fp32, eager"], warmup=10, window_s=2.0, without_bar=True)
        else:
            left = args.budget_s - (time.time() - start)
            options["deadline"] = time.time() + left / (len(templates) - index)
        # A setting that started in time but runs long (a compilation) is stopped 20 s after the whole budget.
        result = measure(template, options, kill_at=None if args.cpu else start + args.budget_s + 20)
        print(table(result), flush=True)
    print(f"Total: {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
