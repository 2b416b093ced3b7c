"""Evaluation on XLA: device-to-host transfers and wall time per evaluation, generated against a naive port.

Usage (cwd = a baked xla-tpu classifier project, PJRT_DEVICE=CPU, the TPU venv's Python):
python xla_eval.py TEMPLATE EVAL_BATCHES... Prints one JSON line.

The generated project trains 3 short epochs with an evaluation of EVAL_BATCHES batches after each; the
figures are the last evaluation's (the first compiles), and the compilations of every evaluation after
the first. The naive port evaluates the same trained-from-scratch model as a GPU loop moved to XLA as is
would: each batch's correct count and loss read with `.item()`, the last batch shorter.
"""

import importlib
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import yaml

sys.path.insert(0, str(Path.cwd()))
BATCH = 24  # 256 synthetic eval items: 10 full batches and a short one, for a full pass


def counts() -> tuple[int, int]:
    import torch_xla.debug.metrics as met

    data = [met.metric_data(name) for name in ("CompileTime", "TransferFromDeviceTime")]
    return tuple(0 if d is None else d[0] for d in data)


def config_for(eval_batches: int) -> SimpleNamespace:
    values = yaml.safe_load(Path("config.yaml").read_text())
    for key in ("defaults", "hydra"):
        values.pop(key, None)
    values.update(
        dataset="synthetic",
        data_path="data",
        num_workers=0,
        batch_size=16,
        eval_batch_size=BATCH,
        max_epochs=3,
        train_epoch_length=2,
        eval_epoch_length=eval_batches,
        log_every_iters=2,
        save_every_iters=10**9,
        output_dir=f"bench-eval-{eval_batches}",
        backend=None,
    )
    return SimpleNamespace(**values)


def generated(eval_batches: int) -> dict:
    """main.run in this process, on one XLA device; each evaluation (the trainer's nested run) measured."""
    import main
    from ignite.engine import Engine

    evaluations = []
    outer = []
    original_run = Engine.run

    def run(engine: Engine, *args, **kwargs):
        if not outer:  # the trainer's run
            outer.append(engine)
            return original_run(engine, *args, **kwargs)
        start, (compiled, transferred) = time.perf_counter(), counts()
        state = original_run(engine, *args, **kwargs)
        after = counts()
        evaluations.append((time.perf_counter() - start, after[0] - compiled, after[1] - transferred))
        return state

    Engine.run = run
    # Each replica's start-up as the project's launch does it (xla.py; utils.py in projects made before it).
    launcher = importlib.import_module("xla" if Path("xla.py").is_file() else "utils")
    launcher._xla_replica(0, main.run, config_for(eval_batches))
    Engine.run = original_run
    seconds, _, transfers = evaluations[-1]
    return {"seconds": seconds, "transfers": transfers, "later_compilations": [c for _, c, _ in evaluations[1:]]}


def naive(eval_batches: int) -> dict:
    """The eval loop moved to XLA as is: per batch, `.item()` on the correct count and on the loss."""
    import data
    import models
    import torch
    import torch_xla.core.xla_model as xm
    from torch.utils.data import DataLoader

    config = config_for(eval_batches)
    device = xm.xla_device()
    torch.manual_seed(0)
    if hasattr(data, "setup_tokenizer"):
        tokenizer = data.setup_tokenizer(config)
        _, evaluation = data.get_datasets(config, tokenizer)
        model = models.setup_model(config, vocab_size=len(tokenizer), num_classes=data.NUM_CLASSES)
    else:
        _, evaluation = data.get_datasets("synthetic", "data")
        model = models.setup_model(config.model, num_classes=data.NUM_CLASSES)
    model = model.to(device).eval()
    loss_fn = torch.nn.CrossEntropyLoss()
    loader = DataLoader(evaluation, batch_size=BATCH)
    timings = []
    for _ in range(3):
        start, (compiled, transferred) = time.perf_counter(), counts()
        correct = total = 0
        loss = 0.0
        with torch.no_grad():
            for index, batch in enumerate(loader):
                if index == eval_batches:
                    break
                inputs, targets = data.prepare_batch(batch, device)
                logits = model(*inputs)
                correct += (logits.argmax(dim=1) == targets).sum().item()
                loss += loss_fn(logits, targets).item() * len(targets)
                total += len(targets)
        after = counts()
        timings.append((time.perf_counter() - start, after[0] - compiled, after[1] - transferred))
    seconds, _, transfers = timings[-1]
    return {"seconds": seconds, "transfers": transfers, "later_compilations": [c for _, c, _ in timings[1:]]}


def main() -> None:
    lengths = [int(n) for n in sys.argv[2:]]
    print(json.dumps({str(n): {"generated": generated(n), "naive": naive(n)} for n in lengths}))


if __name__ == "__main__":
    main()
