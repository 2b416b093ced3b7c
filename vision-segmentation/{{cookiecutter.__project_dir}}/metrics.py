{% import "flags.j2" as flags with context %}
"""The eval metrics, from the confusion matrix of the pixels' classes: mean IoU, IoU per class, pixel accuracy.{{ "\n\nOn the TPU the matrix is counted on the device and read once per evaluation.\n" if flags.xla }}"""

from collections.abc import Sequence

import ignite.distributed as idist
import torch
{% if flags.xla %}
import torch_xla
{% endif %}
from ignite.engine import Engine
{% if flags.xla %}
from ignite.metrics import Metric
{% else %}
from ignite.metrics import ConfusionMatrix, IoU, MetricsLambda, mIoU
from ignite.metrics.confusion_matrix import cmAccuracy
{% endif %}

from data import CLASSES
from models import SegmentationLoss


def attach_metrics(evaluator: Engine, loss_fn: SegmentationLoss, classes: Sequence[str] = CLASSES) -> None:
    """Score the predicted masks: ``mIoU``, ``pixel_accuracy`` and ``IoU_<class>`` in the evaluator's metrics, for
    the run's ``classes`` (the model's outputs, in order: VOC's by default).

    The pixels the loss ignores (``ignore_index``: VOC's object borders, the padding) are not scored.
    """
{% if flags.xla %}
    # Counted on the TPU, read once per evaluation: the predicted masks never leave the device.
    SegmentationMetrics(classes, loss_fn.ignore_index).attach(evaluator, "metrics")
{% else %}
    ignore_index = loss_fn.ignore_index

    def scored(output: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        # ConfusionMatrix counts the labels 0 to len(classes) - 1 only: the ignored one becomes -1.
        logits, targets = output
        return logits, targets.masked_fill(targets == ignore_index, -1)

    matrix = ConfusionMatrix(len(classes), output_transform=scored, device=idist.device())
    mIoU(matrix).attach(evaluator, "mIoU")
    cmAccuracy(matrix).attach(evaluator, "pixel_accuracy")
    MetricsLambda(per_class, IoU(matrix), classes, metrics_result_mode="flatten").attach(evaluator, "IoU")
{% endif %}


def per_class(iou: torch.Tensor, classes: Sequence[str] = CLASSES) -> dict[str, float]:
    """Each class's IoU, named after the class: ``IoU_background``, ``IoU_aeroplane``, ..."""
    return {f"IoU_{name}": value for name, value in zip(classes, iou.tolist(), strict=True)}
{% if flags.xla %}


class SegmentationMetrics(Metric):
    """The values of ignite's ``mIoU``, ``cmAccuracy`` and ``IoU`` on a ``ConfusionMatrix``, counted on the TPU.

    ignite's metrics refuse an XLA device: fed from the CPU, they would copy every predicted mask off the
    TPU, one wait per eval batch. Here each batch adds its pixels to a confusion matrix on the device
    (padding rows and ignored pixels left out); ``compute`` sums it over the replicas and reads it once.
    """

    def __init__(self, classes: Sequence[str], ignore_index: int) -> None:
        self.classes, self.num_classes, self.ignore_index = classes, len(classes), ignore_index
        # The counts live on the TPU (see reset): ignite's own state stays on the CPU, as it requires.
        super().__init__(device="cpu", metrics_result_mode="flatten")

    def reset(self) -> None:
        # int32: exact to 2**31 pixels per cell (VOC's whole val set has 0.4e9), and native on a TPU.
        self.counts = torch.zeros(self.num_classes**2, dtype=torch.int32, device=idist.device())

    def update(self, output: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> None:
        logits, targets, real = output
        scored = (targets != self.ignore_index) & real.view(-1, 1, 1)
        # Cell (true class, predicted class) of each pixel, flattened; unscored pixels add 0 to cell 0. Every
        # tensor keeps its shape: no boolean indexing, whose result's shape would depend on the values.
        cells = torch.where(scored, targets * self.num_classes + logits.argmax(dim=1), 0)
        self.counts.scatter_add_(0, cells.flatten(), scored.flatten().to(torch.int32))

    def compute(self) -> dict[str, float]:
        counts = idist.all_reduce(self.counts)
        # Ends the evaluation's last graph, the last batch's outputs in it: left pending, they would join the
        # next training step's graph and make it a program of its own. Reading the counts is then a transfer.
        torch_xla.sync()
        matrix = counts.cpu().double().view(self.num_classes, self.num_classes)
        correct = matrix.diag()
        # As ignite's IoU: a class neither present nor predicted scores 0.
        iou = correct / (matrix.sum(dim=0) + matrix.sum(dim=1) - correct + 1e-15)
        accuracy = correct.sum() / (matrix.sum() + 1e-15)
        return {"mIoU": iou.mean().item(), "pixel_accuracy": accuracy.item(), **per_class(iou, self.classes)}
{% endif %}
