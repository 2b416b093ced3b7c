"""The eval metrics users read (accuracy, loss, mIoU, pixel accuracy, IoU per class) equal values worked out by
hand on a small case, through the project's own metrics.py, on every backend's code path: ignite's metrics on
GPU and CPU projects, the sums counted on the device in TPU projects (here the XLA CPU device). The rows and
pixels that must not count are among the inputs: padded rows (TPU), pixels of the ignored label (segmentation).
The same metrics.py on every backend: the machinery keeps their state on the device (and on the TPU reads it once).
"""

import json
import math
from pathlib import Path

import pytest
from answers import SUPERVISED
from environments import PYTHON, XLA_CPU, XLA_PYTHON
from projects import run_cmd

# Runs in the project's folder: scores the given batches with metrics.eval_metrics on the machinery's evaluator,
# whose step returns them, as the project's evaluator returns its batches' outputs; prints the metrics as JSON.
# A TPU project's evaluator gets each batch padded, with its number of real rows, on the XLA device, in ignite's
# XLA context.
SCORE = """
import json, sys
import ignite.distributed as idist
import torch
from torch import nn

import metrics
from machinery.training.evaluation import evaluation_engine

case = json.loads(sys.argv[1])
if case["template"] == "vision-segmentation":
    from models import SegmentationLoss
    loss_fn = SegmentationLoss(0.5)
else:
    loss_fn = torch.nn.CrossEntropyLoss()


def score(local_rank):
    device = idist.device()
    batches = []
    for batch in case["batches"]:
        logits = torch.tensor(batch["logits"], dtype=torch.float32, device=device)
        targets = torch.tensor(batch["targets"], device=device)
        batches.append(((logits, targets), sum(batch["real"])) if case["xla"] else (logits, targets))
    evaluator = evaluation_engine(lambda engine, batch: batch, nn.Identity(), metrics.eval_metrics(loss_fn.to(device)))
    evaluator.run(batches)
    print(json.dumps({name: float(value) for name, value in evaluator.state.metrics.items()}))


if case["xla"]:
    from machinery.tpu import xla  # noqa: F401  (the torch_xla names ignite 0.5.5 needs)

    with idist.Parallel(backend="xla-tpu") as parallel:
        parallel.run(score)
else:
    score(0)
"""

# A classifier's rows: "right" puts 3/4 of the probability on the target (loss ln(4/3), predicted right),
# "wrong" puts 3/4 on another class (the target gets 1/(4(C-1)): loss ln(4(C-1)), predicted wrong).
CLASSES = {"vision-classification": 10, "text-classification": 2}


def row(kind: str, target: int, classes: int) -> list[float]:
    logits = [0.0] * classes
    logits[target if kind == "right" else (target + 1) % classes] = math.log(3 * (classes - 1))
    return logits


def classifier_case(template: str, xla: bool) -> tuple[dict, dict]:
    """6 real rows (4 right, 2 wrong) in batches of 4, the last one 2 short; a TPU batch is padded with 2 rows
    that would score as right: counted, they would show in both metrics."""
    classes = CLASSES[template]
    kinds = [("right", 0), ("right", 1), ("wrong", 1), ("right", 0), ("wrong", 0), ("right", 1)]
    rows = [(row(kind, target, classes), target) for kind, target in kinds]
    padding = [(row("right", 0, classes), 0)] * 2 if xla else []
    chunks = [(rows[:4], [True] * 4), (rows[4:] + padding, [True] * 2 + [False] * len(padding))]
    batches = [
        {"logits": [logits for logits, _ in chunk], "targets": [target for _, target in chunk], "real": real}
        for chunk, real in chunks
    ]
    expected = {"accuracy": 4 / 6, "loss": (4 * math.log(4 / 3) + 2 * math.log(4 * (classes - 1))) / 6}
    return {"batches": batches}, expected


def one_hot(predicted: list[list[int]], classes: int = 21) -> list[list[list[float]]]:
    """Logits (classes x H x W) that predict these classes."""
    return [[[5.0 if cell == c else 0.0 for cell in line] for line in predicted] for c in range(classes)]


def segmentation_case(xla: bool) -> tuple[dict, dict]:
    """One 2x3 mask, 255 (ignored) at one pixel that is predicted 1: scored pixels (true, predicted) are
    (0,0), (1,1), (1,0), (1,1), (0,1). IoU of class 0: 1 / (1 + 1 + 1) = 1/3; of class 1: 2 / (2 + 1 + 1) = 1/2;
    the 19 classes neither present nor predicted score 0, as ignite's IoU scores them, and count in the mean:
    mIoU = (1/3 + 1/2) / 21. Pixel accuracy 3/5. A TPU batch is padded with a second mask, all of class 2 and
    predicted so: counted, it would give class 2 an IoU of 1."""
    targets, predicted = [[0, 1, 255], [1, 1, 0]], [[0, 1, 1], [0, 1, 1]]
    batch = {"logits": [one_hot(predicted)], "targets": [targets], "real": [True]}
    if xla:
        padding = [[2, 2, 2], [2, 2, 2]]
        batch = {"logits": [*batch["logits"], one_hot(padding)], "targets": [targets, padding], "real": [True, False]}
    iou = {"IoU_background": 1 / 3, "IoU_aeroplane": 1 / 2, "IoU_bicycle": 0.0, "IoU_tvmonitor": 0.0}
    return {"batches": [batch]}, {"mIoU": (1 / 3 + 1 / 2) / 21, "pixel_accuracy": 3 / 5, **iou}


CASES = [(template, backend) for template in SUPERVISED for backend in ["gloo", "xla-tpu"]]


@pytest.mark.parametrize(("template", "backend"), CASES)
def test_eval_metrics_equal_values_worked_out_by_hand(baked, template: str, backend: str) -> None:
    xla = backend == "xla-tpu"
    project: Path = baked(template, backend=backend)
    case, expected = segmentation_case(xla) if template == "vision-segmentation" else classifier_case(template, xla)
    python, env = (XLA_PYTHON, XLA_CPU) if xla else (PYTHON, None)
    argument = json.dumps({"template": template, "xla": xla, **case})
    proc = run_cmd([python, "-c", SCORE, argument], cwd=project, env={**(env or {}), "PYTHONDONTWRITEBYTECODE": "1"})
    scores = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, value in expected.items():
        assert scores[name] == pytest.approx(value, rel=1e-6), f"{backend} {name}: {scores[name]}, by hand {value}"
