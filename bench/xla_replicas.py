"""XLA compilations and device-to-host transfers of the generated TPU project as 8 replicas on the CPU.

Usage (cwd = a baked xla-tpu project, the TPU venv's Python): python xla_replicas.py TEMPLATE EPOCHS.
The replicas run under the tests' harness (tests/probes/xla_cpu_replicas.py: 8 XLA CPU devices, their
replicas threads of one process), a stand-in for a TPU v5e-8. Prints one JSON line: the counters of
xla_metrics.json, which are the process's, all 8 replicas together.
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


def main() -> None:
    epochs = int(sys.argv[2])
    config = yaml.safe_load(Path("config.yaml").read_text())
    # The same global batch as on one device (16: 2 per replica), 2 eval batches per replica.
    overrides = dict(
        dataset="synthetic",
        num_workers=0,
        batch_size=BATCH,
        eval_batch_size=BATCH,
        max_epochs=epochs,
        train_epoch_length=ITERATIONS,
        eval_epoch_length=2,
        num_samples=4,
        log_every_iters=LOG_EVERY,
        save_every_iters=10**9,
        output_dir="bench-runs",
    )
    config.update({k: v for k, v in overrides.items() if k in config})
    if "crop_size" in config:
        config.update(SEGMENTATION, model="lraspp_mobilenet_v3_large")  # 8 compilations of DeepLabV3: minutes
    Path("config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, "XLA_CPU_REPLICAS": str(REPLICAS), "PYTHONPATH": str(PROBES), "PJRT_DEVICE": "TPU"}
    subprocess.run([sys.executable, "main.py", "config.yaml"], check=True, capture_output=True, env=env)
    (run_dir,) = Path("bench-runs").iterdir()
    metrics = json.loads((run_dir / "xla_metrics.json").read_text())
    fallbacks = [sum(epoch.values()) for epoch in metrics["cpu_fallbacks_per_epoch"]]
    print(
        json.dumps(
            {
                "replicas": REPLICAS,
                "compilations_per_epoch": metrics["compilations_per_epoch"],
                "transfers_per_epoch": metrics["device_to_host_transfers_per_epoch"],
                "fallbacks_per_epoch": fallbacks,
                "eval_transfers_per_epoch": metrics["eval_device_to_host_transfers_per_epoch"],
                "iterations_per_epoch": ITERATIONS,
                "log_every_iters": LOG_EVERY,
            }
        )
    )


if __name__ == "__main__":
    main()
