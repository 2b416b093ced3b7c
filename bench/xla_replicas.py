"""XLA compilations and device-to-host transfers of the generated TPU project as 8 replicas on the CPU.

Usage (cwd = a baked xla-tpu project, the TPU venv's Python): python xla_replicas.py TEMPLATE EPOCHS.
The replicas run under the tests' harness (tests/probes/xla_cpu_replicas.py: 8 XLA CPU devices, their
replicas threads of one process), a stand-in for a TPU v5e-8. Prints one JSON line: the compilations per
epoch of xla_metrics.json, and the reads one steady epoch of all 8 replicas makes (runs of EPOCHS and EPOCHS - 1
epochs, the difference of the counters once every replica has trained: bench/probes/sitecustomize.py).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from xla_loops import BATCH, ITERATIONS, LOG_EVERY, SEGMENTATION

REPLICAS = 8
PROBES = Path(__file__).resolve().parents[1] / "tests" / "probes"
BENCH_PROBES = Path(__file__).resolve().parent / "probes"


def run(epochs: int) -> tuple[dict, dict]:
    """Train for ``epochs`` as 8 replicas; return xla_metrics.json (per epoch, as replica 0 marks epochs) and the
    process's totals at its end (every replica's, the whole run)."""
    config = yaml.safe_load(Path("config.yaml").read_text())
    config.update(max_epochs=epochs, output_dir=f"bench-runs-{epochs}")
    Path("config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    totals = Path(f"totals-{epochs}").resolve()
    totals.mkdir()
    probes = os.pathsep.join([str(BENCH_PROBES), str(PROBES)])  # bench/probes/sitecustomize.py runs the tests'
    harness = {"XLA_CPU_REPLICAS": str(REPLICAS), "PJRT_DEVICE": "TPU", "BENCH_TOTALS": str(totals)}
    env = {**os.environ, **harness, "PYTHONPATH": probes}
    subprocess.run([sys.executable, "main.py", "config.yaml"], check=True, capture_output=True, env=env)
    (run_dir,) = Path(f"bench-runs-{epochs}").iterdir()
    counts = [json.loads(path.read_text()) for path in totals.iterdir()]
    whole_run = {key: max(count[key] for count in counts) for key in counts[0]}
    return json.loads((run_dir / "xla_metrics.json").read_text()), whole_run


def main() -> None:
    epochs = int(sys.argv[2])
    config = yaml.safe_load(Path("config.yaml").read_text())
    # The same global batch as on one device (16: 2 per replica), 2 eval batches per replica.
    overrides = dict(
        dataset="synthetic",
        num_workers=0,
        batch_size=BATCH,
        eval_batch_size=BATCH,
        train_epoch_length=ITERATIONS,
        eval_epoch_length=2,
        num_samples=4,
        log_every_iters=LOG_EVERY,
        save_every_iters=10**9,
    )
    config.update({k: v for k, v in overrides.items() if k in config})
    if "crop_size" in config:
        config.update(SEGMENTATION, model="lraspp_mobilenet_v3_large")  # 8 compilations of DeepLabV3: minutes
    Path("config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    # The counters are the process's: the replicas cross epoch boundaries at slightly different times, so what
    # xla_metrics.json gives each epoch is blurred at its edges. The difference between a run of one epoch more
    # and one of one less is exactly one epoch of every replica (start-up and warm-up cancel out).
    metrics, longer = run(epochs)
    _, shorter = run(epochs - 1)
    one_epoch = {key: longer[key] - shorter[key] for key in ("transfers", "fallbacks")}
    print(
        json.dumps(
            {
                "replicas": REPLICAS,
                "compilations_per_epoch": metrics["compilations_per_epoch"],
                "one_epoch": one_epoch,
                "iterations_per_epoch": ITERATIONS,
                "log_every_iters": LOG_EVERY,
            }
        )
    )


if __name__ == "__main__":
    main()
