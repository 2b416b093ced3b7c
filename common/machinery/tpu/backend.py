"""The TPU's backend: ``machinery/backend.py``'s ``Backend`` with the replicas' model, optimizer and loader set-up, and
a training step that all-reduces the gradients and ends its graph (one compiled program per step)."""

from typing import Any

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from torch import nn
from torch.utils.data import DataLoader

from machinery.backend import Backend
from machinery.tpu.device_loaders import device_loader
from machinery.tpu.xla import start_alike


class TpuBackend(Backend):
    """XLA on TPUs: bfloat16 autocast with no gradient scaler (config.mixed_precision), or full precision.

    Models move to the TPU, every replica starting from replica 0's weights (each initialised its own); optimizers step
    the moved parameters with ``xm.optimizer_step``, which all-reduces the gradients (ignite 0.5.5's ``auto_optim``
    fails on XLA). A training loader feeds the TPU while a step runs; an eval loader pads its last batch to the
    others' shape (``device_loaders.device_loader``)."""

    def optimizer_on_device(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        return optimizer  # its parameters are the moved model's: xm.optimizer_step reduces their gradients

    def loader_on_device(self, obj: Any) -> Any:
        if isinstance(obj, DataLoader) or hasattr(obj, "_loader"):  # ignite wraps one for several replicas
            return device_loader(obj)
        return obj

    def models_prepared(self, models: list[nn.Module]) -> None:
        start_alike(*models)

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        # All-reduces the gradients, then steps (step_done ends the graph: one compiled program per step).
        xm.optimizer_step(optimizer)

    def step_done(self) -> None:
        # The step's graph ends here, the stacked losses in it: every step runs the same compiled program, and
        # reading the losses or the weights (logging, checkpoints) is a transfer, never a program of its own.
        torch_xla.sync()
