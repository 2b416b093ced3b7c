"""`torch_xla.compile` around the training step, against today's lazy step, on one XLA CPU device (issue 50.2).

    .venv-xla/bin/python bench/xla_compile.py [--steps 30] [--repeats 3] [--rounds 2] [--warmup 3]

The vision template's training step with its light model for the XLA CPU device (scripts/projects.py's
XLA_LIGHT_MODELS: SqueezeNet 1.1 at 64 px), 10 classes, batch 8, Adam at lr 1e-3, on 4 synthetic batches (cycled).
The step has the generated step's shape (trainers.py's train_step with accumulation_steps 1, then engine.py's
training_engine): ``model.train()``, forward, cross-entropy, backward, ``xm.optimizer_step``, ``zero_grad``, the
losses stacked into one vector. The loops:

- device loader: each batch from torch_xla's ``MpDeviceLoader`` as is, the step, then the engine's
  ``torch_xla.sync()``. (A generated TPU project's training batches, machinery/tpu/device_loaders.py's
  ``_TrainingBatches``, leave out the loader's sync before each step: the "lazy" loop's, with a device loader.)
  MpDeviceLoader syncs each time it hands out a batch (torch_xla/distributed/parallel_loader.py,
  ``PerDeviceLoader.next``); nothing is pending then (the engine has just synced), and a sync with nothing to run
  waits for the device's last program (torch_xla's ``SyncTensorsGraphInternal``: "Ensure previous execution is
  complete").
- lazy: the batches already on the device, the step, then ``torch_xla.sync()``: no sync before the step.
- lazy, sync before: the same with a ``torch_xla.sync()`` before the step (the device loader's sync alone).
- compile: ``torch_xla.compile(step)`` called each iteration on the batches on the device. It syncs before the step
  (to run what is pending) and after it (to end the step's graph): no sync of our own.
- compile, full_graph: the same with ``full_graph=True`` (an execution inside the step, e.g. ``.item()``, raises).
- eager + compile: torch_xla 2.9's documented pattern, ``torch_xla.experimental.eager_mode(True)`` for the process
  and ``torch_xla.compile(step)`` for the step.

Each loop runs in its own process (so that no loop finds another's programs in the compilation cache), ``--rounds``
times, the loops alternating; each process: ``--warmup`` steps, then ``--repeats`` timed runs of ``--steps`` steps.
Per loop: host time per step (median over every timed run: the host's wall time for the steps, batches fetched
included, the device drained between runs), split into the step's own Python (lazy tracing included) and the rest
(the syncs: launching the program, and waiting for the device where a sync has nothing to run; torch_xla.compile's
own code); from torch_xla.debug.metrics: compilations (CompileTime), program executions (ExecuteTime),
device-to-host transfers (TransferFromDeviceTime) and host-to-device transfers (TransferToDeviceTime: the device
loader's batches, Adam's per-step scalars), in the warm-up and in the timed steps. Every process runs the same
number of steps from the same weights and batches; the last columns compare its final weights with the first
process's of the two references (SqueezeNet's dropout draws from the device's generator, whose seed moves on at
every sync, empty or not: one sync more a step, other dropout masks).

Environment of the loop processes: PJRT_DEVICE=CPU and the XLA flags of the projects' own tests on the XLA device
(scripts/projects.py's XLA_CPU_OWN_TESTS: optimised programs, not XLA_CPU's cheapest compile).
"""

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from projects import XLA_CPU_OWN_TESTS, XLA_LIGHT_MODELS  # noqa: E402

LOOPS = {
    "device-loader": "`MpDeviceLoader`, step, `torch_xla.sync()`",
    "lazy": "step, `torch_xla.sync()`",
    "lazy-loader-sync": "`torch_xla.sync()`, step, `torch_xla.sync()`",
    "compile": "`torch_xla.compile(step)`",
    "compile-full-graph": "`torch_xla.compile(step, full_graph=True)`",
    "eager-compile": "`eager_mode(True)` + `torch_xla.compile(step)`",
}
MODEL = XLA_LIGHT_MODELS["vision-classification"]
REFERENCES = ("device-loader", "lazy")  # the loops whose final weights the others' are compared with
NUM_CLASSES, BATCH, BATCHES, LR = 10, 8, 4, 1e-3


def counters() -> dict[str, float]:
    """torch_xla's running totals of the events counted."""
    import torch_xla.debug.metrics as met

    def count(name: str) -> int:
        data = met.metric_data(name)
        return 0 if data is None else data[0]

    return {
        "compilations": count("CompileTime"),
        "executions": count("ExecuteTime"),
        "from_device": count("TransferFromDeviceTime"),
        "to_device": count("TransferToDeviceTime"),
    }


def delta(after: dict, before: dict) -> dict:
    return {key: after[key] - before[key] for key in after}


def run_loop(loop: str, warmup: int, steps: int, repeats: int, weights_path: str) -> dict:
    """One loop in this process: warm-up, timed runs, counts; the final weights saved to ``weights_path``."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torchvision

    if loop == "eager-compile":
        import torch_xla.experimental

        torch_xla.experimental.eager_mode(True)
    device = torch_xla.device()
    torch.manual_seed(0)
    xm.set_rng_state(0, device)  # SqueezeNet's dropout draws on the device's generator
    model = torchvision.models.get_model(MODEL["model"], weights=None, num_classes=NUM_CLASSES).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss()
    rng = torch.Generator().manual_seed(1)
    size = MODEL["image_size"]
    on_cpu = [
        (torch.randn(BATCH, 3, size, size, generator=rng), torch.randint(NUM_CLASSES, (BATCH,), generator=rng))
        for _ in range(BATCHES)
    ]
    total = warmup + repeats * steps
    if loop == "device-loader":
        import torch_xla.distributed.parallel_loader as pl
        from torch.utils.data import DataLoader, Dataset

        class Cycled(Dataset):
            """The same batches, sample by sample, cycled for every step (one pass: no end-of-pass sync)."""

            def __len__(self) -> int:
                return total * BATCH

            def __getitem__(self, index: int) -> tuple:
                images, labels = on_cpu[index // BATCH % BATCHES]
                return images[index % BATCH], labels[index % BATCH]

        loader = pl.MpDeviceLoader(DataLoader(Cycled(), batch_size=BATCH), device)
        batches = iter(loader)
        next_batch = batches.__next__
    else:
        on_device = [(images.to(device), labels.to(device)) for images, labels in on_cpu]
        cycle = itertools.cycle(on_device)
        next_batch = cycle.__next__
    torch_xla.sync()
    xm.wait_device_ops()
    tracing = [0.0]  # seconds spent in the step's own Python (lazy tracing included)

    def train_step(batch: tuple) -> torch.Tensor:
        start = time.perf_counter()
        model.train()
        inputs, targets = batch
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        xm.optimizer_step(optimizer)
        optimizer.zero_grad()
        values = torch.stack([loss.detach().float()])
        tracing[0] += time.perf_counter() - start
        return values

    if loop in ("lazy", "lazy-loader-sync", "device-loader"):
        before_step = torch_xla.sync if loop == "lazy-loader-sync" else lambda: None

        def iteration(batch: tuple) -> torch.Tensor:
            before_step()
            values = train_step(batch)
            torch_xla.sync()
            return values

    else:
        iteration = torch_xla.compile(train_step, full_graph=loop == "compile-full-graph")

    before = counters()
    for _ in range(warmup):
        iteration(next_batch())
    xm.wait_device_ops()
    after_warmup = counters()
    host, traced = [], []
    for _ in range(repeats):
        tracing[0] = 0.0
        start = time.perf_counter()
        for _ in range(steps):
            values = iteration(next_batch())
        host.append((time.perf_counter() - start) / steps)
        traced.append(tracing[0] / steps)
        xm.wait_device_ops()
    measured = delta(counters(), after_warmup)
    loss = float(values[0].cpu())  # after the counts: this read is not the loop's
    torch.save({name: tensor.cpu() for name, tensor in model.state_dict().items()}, weights_path)
    return {
        "loop": loop,
        "host_s": host,
        "tracing_s": traced,
        "warmup": delta(after_warmup, before),
        "measured": measured,
        "steps": steps * repeats,
        "last_loss": loss,
    }


def same_weights(path: str, reference: str) -> str:
    import torch

    mine, ref = torch.load(path), torch.load(reference)
    diff = max((mine[name].float() - ref[name].float()).abs().max().item() for name in ref)
    return "yes (bitwise)" if all(torch.equal(mine[n], ref[n]) for n in ref) else f"no (max diff {diff:.2e})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per process")
    parser.add_argument("--rounds", type=int, default=2, help="processes per loop, the loops alternating")
    parser.add_argument("--warmup", type=int, default=3, help="steps before the timed runs")
    parser.add_argument("--loops", nargs="+", choices=list(LOOPS), default=list(LOOPS))
    parser.add_argument("--child", choices=list(LOOPS), help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_loop(args.child, args.warmup, args.steps, args.repeats, args.weights)))
        return

    env = {**os.environ, **XLA_CPU_OWN_TESTS}
    results: dict[str, list[dict]] = {loop: [] for loop in args.loops}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for loop in args.loops:
                weights = f"{tmp}/{loop}-{round_}.pt"
                cmd = [sys.executable, __file__, "--child", loop, "--weights", weights]
                cmd += ["--steps", str(args.steps), "--repeats", str(args.repeats), "--warmup", str(args.warmup)]
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
                if proc.returncode != 0:
                    raise RuntimeError(f"{loop} failed:\n{proc.stdout}\n{proc.stderr[-4000:]}")
                result = json.loads(proc.stdout.strip().splitlines()[-1])
                result["weights"] = weights
                results[loop].append(result)
                host_ms = statistics.median(result["host_s"]) * 1e3
                print(f"round {round_ + 1}, {loop}: {host_ms:.1f} ms a step", file=sys.stderr)
        references = {loop: results[loop][0]["weights"] for loop in REFERENCES if loop in results}
        for runs in results.values():
            for run in runs:
                run["same"] = {loop: same_weights(run["weights"], path) for loop, path in references.items()}
    print_table(results, args)


def print_table(results: dict[str, list[dict]], args: argparse.Namespace) -> None:
    import torch
    import torch_xla

    def per_round(runs: list[dict], part: str, key: str) -> str:
        values = {run[part][key] for run in runs}
        return str(values.pop()) if len(values) == 1 else " / ".join(str(run[part][key]) for run in runs)

    def per_step(runs: list[dict], key: str) -> str:
        values = {run["measured"][key] / run["steps"] for run in runs}
        return f"{values.pop():g}" if len(values) == 1 else " / ".join(f"{v:g}" for v in sorted(values))

    print(
        f"torch {torch.__version__}, torch_xla {torch_xla.__version__}, PJRT_DEVICE=CPU, {os.cpu_count()} CPUs "
        f"({platform.machine()}); {MODEL['model']} at {MODEL['image_size']} px, batch {BATCH}, Adam; "
        f"{args.rounds} processes per loop x {args.repeats} runs of {args.steps} steps after {args.warmup} warm-up "
        "steps (ms: medians over the runs)\n"
    )
    head = [
        "loop",
        "host time per step (ms)",
        "in the step's Python + tracing (ms)",
        "outside it: syncs, waits (ms)",
        "compilations, warm-up / timed",
        "executions per timed step",
        "device-to-host transfers, warm-up / timed",
        "host-to-device transfers per timed step",
    ]
    references = [loop for loop in REFERENCES if loop in results]
    head += [f"same weights as: {LOOPS[loop].split(': ')[0]}" for loop in references]
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join("---" for _ in head) + " |")
    for loop, runs in results.items():
        host = [t for run in runs for t in run["host_s"]]
        traced = [t for run in runs for t in run["tracing_s"]]
        outside = [t - s for run in runs for t, s in zip(run["host_s"], run["tracing_s"], strict=True)]
        row = [
            LOOPS[loop],
            f"{statistics.median(host) * 1e3:.1f} (min {min(host) * 1e3:.1f})",
            f"{statistics.median(traced) * 1e3:.1f}",
            f"{statistics.median(outside) * 1e3:.1f}",
            f"{per_round(runs, 'warmup', 'compilations')} / {per_round(runs, 'measured', 'compilations')}",
            per_step(runs, "executions"),
            f"{per_round(runs, 'warmup', 'from_device')} / {per_round(runs, 'measured', 'from_device')}",
            per_step(runs, "to_device"),
        ]
        for reference in references:
            same = [run["same"][reference] for run in runs]
            row.append(same[0] if len(set(same)) == 1 else " / ".join(same))
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
