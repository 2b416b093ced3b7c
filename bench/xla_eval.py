"""Evaluation on XLA: device-to-host transfers and wall time per evaluation, generated against a naive port.

Usage (cwd = a baked xla-tpu classifier or segmentation project, PJRT_DEVICE=CPU, the TPU venv's Python):
python xla_eval.py TEMPLATE EVAL_BATCHES... Prints one JSON line.

Classifiers: the generated project trains 3 short epochs with an evaluation of EVAL_BATCHES batches after
each; the figures are the last evaluation's (the first compiles), and the compilations of every evaluation
after the first. The naive port evaluates the same trained-from-scratch model as a GPU loop moved to XLA as
is would: each batch's correct count and loss read with `.item()`, the last batch shorter.

Segmentation (a light model, small crops: SEGMENTATION): three ways to count the confusion matrix, run in
turn REPEATS times, each run evaluating EPOCHS times; the seconds are the median over the evaluations after
each run's first. "generated": the project as made, the matrix counted on the device and read once per
evaluation (metrics.PixelConfusionMatrix, read by machinery/tpu/metrics.py). "argmax to CPU": the same project
with one change, its metric: per batch the predicted masks go to the CPU, into ignite's ConfusionMatrix there.
"naive": a GPU loop moved as is.
"""

import importlib
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from config import Config  # the baked project's, importable once sys.path has its directory (below)

sys.path.insert(0, str(Path.cwd()))
RUN_NUMBERS = itertools.count()
BATCH = 24  # 256 synthetic eval items: 10 full batches and a short one, for a full pass
# Segmentation on the XLA CPU device: a light model of the template's family and small crops, so that its
# programs compile in seconds (the default deeplabv3_resnet50 at 512 would take many minutes per run).
# 64 eval scenes at 12 a batch: 5 full batches and a short one (4 scenes), for a full pass.
SEGMENTATION = {"model": "deeplabv3_mobilenet_v3_large", "crop_size": 64, "eval_batch_size": 12, "num_pictures": 1}
SEGMENTATION_BATCH_SIZE = 4  # training batches: the training is not what is measured
EPOCHS, REPEATS = 4, 3  # segmentation: evaluations per run (the first compiles), runs of each variant


def counts() -> tuple[int, int]:
    import torch_xla.debug.metrics as met

    data = [met.metric_data(name) for name in ("CompileTime", "TransferFromDeviceTime")]
    return tuple(0 if d is None else d[0] for d in data)


def config_for(eval_batches: int) -> "Config":
    """The run's configuration: synthetic data, short epochs, no checkpoints (segmentation: see SEGMENTATION).

    The project's config.yaml, read and checked by the project itself, with these overrides.
    """
    from config import Config
    from machinery.config_files import load_config

    overrides = dict(
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
    )
    keys = set(Config.model_fields)
    if "crop_size" in keys:  # segmentation
        overrides.update(SEGMENTATION, batch_size=SEGMENTATION_BATCH_SIZE, max_epochs=EPOCHS, train_epoch_length=1)
    # Only keys this project has (save_every_iters: with training checkpoints, which these projects are made without).
    return load_config(Path("config.yaml"), Config, **{k: v for k, v in overrides.items() if k in keys})


def evaluations_of_run(eval_batches: int) -> list[tuple[float, int, int]]:
    """main.run in this process, on one XLA device: (seconds, compilations, transfers) of each evaluation
    (the trainer's nested run)."""
    import main
    from ignite.engine import Engine
    from machinery.tpu.xla import _xla_replica

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
    config = config_for(eval_batches)
    # A run directory of its own: with the same config a finished run's directory would end this one at once.
    config = config.model_copy(update={"output_dir": f"{config.output_dir}-{next(RUN_NUMBERS)}"})
    try:
        # Each replica's start-up as the project's launch does it (machinery/tpu/xla.py's launch, in this process).
        _xla_replica(0, main.run, config)
    finally:
        Engine.run = original_run
    return evaluations


def generated(eval_batches: int) -> dict:
    """The last of the generated project's evaluations (the first compiles)."""
    evaluations = evaluations_of_run(eval_batches)
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
        _, evaluation, _ = data.get_datasets(config, tokenizer)
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


def argmax_to_cpu_metrics(loss_fn, classes=None) -> dict:
    """metrics.eval_metrics with the other design: each batch's predicted masks sent to ignite's metrics on the
    CPU (ConfusionMatrix, mIoU, cmAccuracy, IoU, as the GPU projects had them).

    The masks and the true labels travel together, one transfer per batch (their stack): the fewest this
    design can have. Ignored pixels become -1 on the device, which ConfusionMatrix skips. The matrix keeps its
    state on the CPU (the machinery leaves such a metric to ignite).
    """
    import metrics
    import torch
    from data import NUM_CLASSES
    from ignite.metrics import ConfusionMatrix, IoU, MetricsLambda, mIoU
    from ignite.metrics.confusion_matrix import cmAccuracy

    class MaskConfusionMatrix(ConfusionMatrix):
        """ignite's ConfusionMatrix fed predicted masks (its update takes logits and argmaxes them itself)."""

        def reset(self) -> None:
            self._device = torch.device("cpu")  # the machinery moves a metric's state to the device: not this one
            super().reset()

        def _check_shape(self, output) -> None:
            pass

        def update(self, output) -> None:
            predicted, targets = (tensor.flatten() for tensor in output)
            self._num_examples += output[0].shape[0]
            scored = targets >= 0
            cells = NUM_CLASSES * targets[scored] + predicted[scored]
            self.confusion_matrix += torch.bincount(cells, minlength=NUM_CLASSES**2).view(NUM_CLASSES, NUM_CLASSES)

    def masks_on_cpu(output):
        logits, targets = output
        scored = targets != loss_fn.ignore_index
        masks = torch.stack((logits.argmax(dim=1), torch.where(scored, targets, -1))).cpu()
        return masks[0], masks[1]

    matrix = MaskConfusionMatrix(NUM_CLASSES, output_transform=masks_on_cpu, device="cpu")
    return {
        "mIoU": mIoU(matrix),
        "pixel_accuracy": cmAccuracy(matrix),
        "IoU": MetricsLambda(metrics.per_class, IoU(matrix), metrics_result_mode="flatten"),
    }


def argmax_to_cpu(eval_batches: int) -> list[tuple[float, int, int]]:
    """The generated project's run with argmax_to_cpu_metrics in place of its device-side confusion matrix."""
    import main

    # main.run makes the evaluator's metrics (metrics.eval_metrics, imported into main: replaced there).
    make = main.eval_metrics
    main.eval_metrics = argmax_to_cpu_metrics
    try:
        return evaluations_of_run(eval_batches)
    finally:
        main.eval_metrics = make


def segmentation_naive(eval_batches: int) -> list[tuple[float, int, int]]:
    """The GPU project's evaluation moved to XLA as is: the same model (trained from scratch), a plain
    DataLoader (the last batch shorter) and ignite's ConfusionMatrix fed each batch's logits.

    On a GPU that matrix counts on the device; ignite refuses an XLA device, so the port keeps the metric on
    the CPU and moves the whole logits there, one transfer per batch (21 channels a pixel: 21 times the masks'
    values). The true masks stay on the CPU, where the loader made them: they cost no transfer.
    """
    import data
    import models
    import torch
    import torch_xla.core.xla_model as xm
    from ignite.metrics import ConfusionMatrix, mIoU
    from torch.utils.data import DataLoader

    # ignite 0.5.5's metrics ask torch_xla for names 2.7 removed: the project's machinery/tpu/xla.py puts them back.
    importlib.import_module("machinery.tpu.xla")
    config = config_for(eval_batches)
    device = xm.xla_device()
    torch.manual_seed(0)
    _, evaluation, _ = data.get_datasets("synthetic", "data", config.crop_size)
    model = models.setup_model(config.model, data.NUM_CLASSES).to(device).eval()
    loader = DataLoader(evaluation, batch_size=config.eval_batch_size)
    matrix = ConfusionMatrix(data.NUM_CLASSES, device="cpu")
    score = mIoU(matrix)  # before any update: building it resets the matrix
    timings = []
    for _ in range(EPOCHS):
        start, (compiled, transferred) = time.perf_counter(), counts()
        score.reset()
        with torch.no_grad():
            for index, (images, masks) in enumerate(loader):
                if index == eval_batches:
                    break
                logits = model(images.to(device))["out"]
                matrix.update((logits.cpu(), masks.masked_fill(masks == data.IGNORE_INDEX, -1)))
        score.compute()
        after = counts()
        timings.append((time.perf_counter() - start, after[0] - compiled, after[1] - transferred))
    return timings


SEGMENTATION_VARIANTS = {"generated": evaluations_of_run, "argmax_to_cpu": argmax_to_cpu, "naive": segmentation_naive}


def segmentation(eval_batches: int) -> dict:
    """Each variant REPEATS times, in turn (the order reversed every other round, so that the machine's noise
    hits all alike): median seconds of the evaluations after each run's first, transfers per evaluation."""
    runs = {name: [] for name in SEGMENTATION_VARIANTS}
    for repeat in range(REPEATS):
        for name in sorted(SEGMENTATION_VARIANTS, reverse=repeat % 2 == 1):
            runs[name].append(SEGMENTATION_VARIANTS[name](eval_batches))
    result = {}
    for name, evaluations in runs.items():
        later = [evaluation for run in evaluations for evaluation in run[1:]]
        result[name] = {
            "seconds": statistics.median(seconds for seconds, _, _ in later),
            "seconds_per_run": [statistics.median(seconds for seconds, _, _ in run[1:]) for run in evaluations],
            "transfers": sorted({transfers for _, _, transfers in later}),
            "first_transfers": [run[0][2] for run in evaluations],
            "later_compilations": [compilations for _, compilations, _ in later],
            "evaluations": len(later),
        }
    return result


def main() -> None:
    template, lengths = sys.argv[1], [int(n) for n in sys.argv[2:]]
    if template == "vision-segmentation":
        print(json.dumps({str(n): segmentation(n) for n in lengths}))
    else:
        print(json.dumps({str(n): {"generated": generated(n), "naive": naive(n)} for n in lengths}))


if __name__ == "__main__":
    main()
