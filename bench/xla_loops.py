"""XLA compilations and device-to-host transfers: the generated TPU project against a naive port.

Usage (cwd = a baked xla-tpu project, PJRT_DEVICE=CPU, the TPU venv's Python):
python xla_loops.py TEMPLATE EPOCHS. Prints one JSON line.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path.cwd()))
BATCH, ITERATIONS, LOG_EVERY = 16, 8, 4


def generated(epochs: int) -> dict:
    """Run the project's own training command; read the xla_metrics.json it writes."""
    config = yaml.safe_load(Path("config.yaml").read_text())
    config.update(
        dataset="synthetic",
        num_workers=0,
        batch_size=BATCH,
        eval_batch_size=BATCH,
        max_epochs=epochs,
        train_epoch_length=ITERATIONS,
        eval_epoch_length=2,
        log_every_iters=LOG_EVERY,
        save_every_iters=10**9,
        output_dir="bench-runs",
    )
    Path("config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    subprocess.run([sys.executable, "main.py", "config.yaml"], check=True, capture_output=True, env=os.environ)
    (run_dir,) = Path("bench-runs").iterdir()
    metrics = json.loads((run_dir / "xla_metrics.json").read_text())
    return {
        "compilations_per_epoch": metrics["compilations_per_epoch"],
        "transfers_per_epoch": metrics["device_to_host_transfers_per_epoch"],
        "iterations_per_epoch": ITERATIONS,
        "log_every_iters": LOG_EVERY,
    }


def vision_naive(epochs: int) -> dict:
    """A GPU loop moved to XLA as is: .item() every step, a partial last batch, no device loader.

    It keeps one XLA idiom, a step marker after each step: without it the lazy graph grows with
    every iteration and a few epochs take many minutes (shared/TPU.md, item 7).
    """
    import data
    import models
    import torch
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    from torch.utils.data import DataLoader, Subset

    def count(name: str) -> int:
        d = met.metric_data(name)
        return 0 if d is None else d[0]

    device = xm.xla_device()
    torch.manual_seed(0)
    model = models.setup_model("resnet18").to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    train, _ = data.get_datasets("synthetic", "data")
    # 8 full batches and a partial one: the last batch has another shape.
    loader = DataLoader(Subset(train, range(BATCH * ITERATIONS - BATCH // 2)), batch_size=BATCH, shuffle=True)
    compilations, transfers = [], []
    for _ in range(epochs):
        c0, t0 = count("CompileTime"), count("TransferFromDeviceTime")
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            xm.mark_step()
            print(f"loss {loss.item():.4f}", file=sys.stderr)
        compilations.append(count("CompileTime") - c0)
        transfers.append(count("TransferFromDeviceTime") - t0)
    return {
        "compilations_per_epoch": compilations,
        "transfers_per_epoch": transfers,
        "iterations_per_epoch": len(loader),
        "log_every_iters": 1,
    }


NAIVE = {"vision-classification": vision_naive}


def main() -> None:
    template, epochs = sys.argv[1], int(sys.argv[2])
    result = {"generated": generated(epochs), "naive": NAIVE[template](epochs)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
