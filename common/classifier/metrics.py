"""The classifier's eval metrics: accuracy and mean loss."""

from ignite.metrics import Accuracy, Loss, Metric
from torch import nn


def eval_metrics(loss_fn: nn.Module) -> dict[str, Metric]:
    """The evaluator's metrics by name, ``accuracy`` and ``loss``: the log, the trackers and ``score`` use the names.

    Any ignite metric goes here, on every backend: the machinery keeps its state on the run's device (and on a TPU
    sums it there, read once per evaluation).
    """
    return {"accuracy": Accuracy(), "loss": Loss(loss_fn)}
