"""An exponential moving average (EMA) of the model's weights: ignite's ``EMAHandler``, evaluated and kept as the
best models in place of the trained weights, and saved in every training checkpoint (``ema_model``)."""

from collections.abc import Callable

import ignite.distributed as idist
from ignite.engine import Engine, Events
from ignite.handlers import EMAHandler
from torch import nn


def setup_ema(
    trainer: Engine, evaluator: Engine, model: nn.Module, momentum: float
) -> tuple[nn.Module, Callable[[Engine], None]]:
    """Average ``model``'s weights after each iteration (each adds ``momentum`` of them) and evaluate the average: the
    evaluation's start swaps it into the model; the returned handler swaps back (attach it at the evaluation's end,
    after the best models' saving). Returns the averaged model (for the training checkpoints) and that handler."""
    ema = EMAHandler(model, momentum=momentum)
    vars(ema.ema_model).pop("forward", None)  # a compiled forward (Backend.prepare) runs the model, not the copy
    # Constant momentum: nothing but the average itself to restore when a stopped run continues.
    ema.attach(trainer, name="ema_momentum", warn_if_exists=False)
    if idist.device().type == "xla":
        from machinery.tpu.xla import sync  # torch_xla: a TPU project's

        # The update, synced as its own program: left pending, it would join whatever runs next (the step, a
        # checkpoint's read, the evaluation), a program for each.
        trainer.add_event_handler(Events.ITERATION_COMPLETED, sync)

    def swap(_engine: Engine) -> None:
        # The tensors themselves change places: nothing is copied, and the trained weights come back as they were.
        for weight, average in zip(ema.model.parameters(), ema.ema_model.parameters(), strict=True):
            weight.data, average.data = average.data, weight.data

    evaluator.add_event_handler(Events.STARTED, swap)
    return ema.ema_model, swap
