"""The eval metrics, from the confusion matrix of the pixels' classes: mean IoU, IoU per class, pixel accuracy."""

from collections.abc import Sequence

import torch
from ignite.metrics import ConfusionMatrix, IoU, Metric, MetricsLambda, mIoU
from ignite.metrics.confusion_matrix import cmAccuracy
from ignite.metrics.metric import reinit__is_reduced

from data import CLASSES
from models import SegmentationLoss


def eval_metrics(loss_fn: SegmentationLoss, classes: Sequence[str] = CLASSES) -> dict[str, Metric]:
    """The evaluator's metrics by name: ``mIoU``, ``pixel_accuracy`` and ``IoU_<class>``, for the run's ``classes``
    (the model's outputs, in order: VOC's by default); the pixels the loss ignores (``ignore_index``) are not scored."""
    matrix = PixelConfusionMatrix(len(classes), loss_fn.ignore_index)
    return {
        "mIoU": mIoU(matrix),
        "pixel_accuracy": cmAccuracy(matrix),
        "IoU": MetricsLambda(per_class, IoU(matrix), classes, metrics_result_mode="flatten"),
    }


def per_class(iou: torch.Tensor, classes: Sequence[str] = CLASSES) -> dict[str, float]:
    """Each class's IoU, named after the class: ``IoU_background``, ``IoU_aeroplane``, ..."""
    return {f"IoU_{name}": value for name, value in zip(classes, iou.tolist(), strict=True)}


class PixelConfusionMatrix(ConfusionMatrix):
    """ignite's ``ConfusionMatrix`` of the pixels, the ignored label left out, counted in tensors of fixed shapes.
    ignite's picks the scored pixels out (a shape that depends on the labels: on a TPU, a wait for the device at
    each batch); here every pixel adds 0 or 1 to its cell."""

    def __init__(self, num_classes: int, ignore_index: int) -> None:
        self.ignore_index = ignore_index
        super().__init__(num_classes)

    @reinit__is_reduced
    def update(self, output: Sequence[torch.Tensor]) -> None:
        self._check_shape(output)
        logits, targets = output[0].detach(), output[1].detach()
        self._num_examples += logits.shape[0]
        scored = (targets >= 0) & (targets < self.num_classes) & (targets != self.ignore_index)
        # Cell (true class, predicted class) of each pixel, flattened; an unscored pixel adds 0 to cell 0.
        cells = torch.where(scored, targets * self.num_classes + logits.argmax(dim=1), 0)
        counts = torch.zeros(self.num_classes**2, dtype=torch.int64, device=cells.device)
        counts.scatter_add_(0, cells.flatten(), scored.flatten().long())
        self.confusion_matrix += counts.view(self.num_classes, self.num_classes).to(self.confusion_matrix)
