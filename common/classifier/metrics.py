{% import "flags.j2" as flags with context %}
"""The classifier's eval metrics: accuracy and mean loss{{ ", summed on the TPU and read once per evaluation" if flags.xla }}."""

import ignite.distributed as idist
{% if flags.xla %}
import torch
import torch_xla
{% endif %}
from ignite.engine import Engine
{% if flags.xla %}
from ignite.metrics import Metric
{% else %}
from ignite.metrics import Accuracy, Loss
{% endif %}
from torch import nn


def attach_metrics(evaluator: Engine, loss_fn: nn.Module) -> None:
    """Score the evaluator's predictions: ``accuracy`` and ``loss`` in its metrics."""
{% if flags.xla %}
    # Summed on the TPU and read once per evaluation (ignite's metrics would read twice a batch).
    ClassifierMetrics(loss_fn).attach(evaluator, "metrics")
{% else %}
    Accuracy(device=idist.device()).attach(evaluator, "accuracy")
    Loss(loss_fn, device=idist.device()).attach(evaluator, "loss")
{% endif %}
{% if flags.xla %}


class ClassifierMetrics(Metric):
    """Accuracy and mean loss, summed on the TPU as the evaluation runs and read once, at its end.

    Stands in for ignite's ``Accuracy`` and ``Loss``, which refuse an XLA device: fed from the CPU, they
    cost two device reads per eval batch, each waiting for the TPU. Here each batch adds its correct
    predictions, summed loss and examples (padding rows left out) to one vector on the device;
    ``compute`` sums it over the replicas and reads it in one transfer. It sets ``accuracy`` and
    ``loss`` in the evaluator's metrics, as ignite's two metrics would, with the same values: each eval
    sample is in one replica's share only (loaders.EvalShard), so the sums count it once.
    """

    def __init__(self, loss_fn: nn.Module) -> None:
        # Padding rows get the loss's ignore_index as their label: a mean over the real rows only.
        if getattr(loss_fn, "reduction", None) != "mean" or not hasattr(loss_fn, "ignore_index"):
            raise ValueError("ClassifierMetrics needs a loss with ignore_index and reduction='mean' (CrossEntropyLoss)")
        self.loss_fn = loss_fn
        # The sums live on the TPU (see reset): ignite's own state stays on the CPU, as it requires.
        super().__init__(device="cpu", metrics_result_mode="flatten")

    def reset(self) -> None:
        self.sums = torch.zeros(3, device=idist.device())

    def update(self, output: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> None:
        logits, targets, real = output
        correct = ((logits.argmax(dim=1) == targets) & real).sum()
        examples = real.sum()
        # The loss function's mean over the real rows, times their number: their summed loss.
        loss = self.loss_fn(logits, torch.where(real, targets, self.loss_fn.ignore_index)) * examples
        self.sums += torch.stack([correct.float(), loss.float(), examples.float()])

    def compute(self) -> dict[str, float]:
        sums = idist.all_reduce(self.sums)
        # Ends the evaluation's last graph, the last batch's outputs in it: left pending, they would join the
        # next training step's graph and make it a program of its own. Reading the sums is then a transfer.
        torch_xla.sync()
        correct, loss, examples = sums.tolist()
        return {"accuracy": correct / examples, "loss": loss / examples}
{% endif %}
