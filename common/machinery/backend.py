"""The one seam between your code and the devices: ``Backend``, made by ``setup_backend`` for the run's backend. The
training steps use its four calls (autocast, backward, optimizer_step, update): the same code trains on any device,
in the precision ``config.mixed_precision`` asks for, each model compiled where ``config.compile`` asks for it."""

import logging
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import ignite.distributed as idist
import torch
from torch import nn

from machinery.settings import RunSettings

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, None: None}


def setup_backend(config: RunSettings) -> "Backend":
    """This process's backend: a TPU's (machinery/tpu/, in a project generated for TPUs), else GPUs' and CPUs'."""
    if config.backend == "xla-tpu":
        from machinery.tpu.backend import TpuBackend  # torch_xla: a TPU project's

        return TpuBackend(config)
    return Backend(config)


class Backend:
    """GPUs and CPUs (one process, or several: nccl, gloo): models, optimizers and loaders built as on one CPU, ready
    for the devices (``prepare``); the training step's autocast (float16 with a gradient scaler, or bfloat16), backward
    pass and optimizer step."""

    def __init__(self, config: RunSettings) -> None:
        self.config = config
        self.device_type = idist.device().type
        self.dtype = DTYPES[config.mixed_precision]  # the autocast's (None: full precision)
        if self.dtype is torch.float16 and self.device_type != "cuda":
            # float16 autocast trains on accelerators (on a CPU it is slow, where it runs at all): full precision here.
            logging.getLogger("train").warning(
                "mixed_precision: float16 autocasts on CUDA GPUs only; this run trains on the %s in full precision "
                "(bfloat16 autocasts on CPUs too)",
                self.device_type,
            )
            self.dtype = None
        # float16's narrow range needs the loss scaled (bfloat16's does not). Every float16 run checkpoints a scaler
        # (state_objects), disabled where it trains in full precision (a CPU), so its checkpoints hold the same objects.
        self.scaler = (
            torch.amp.GradScaler("cuda", enabled=self.dtype is torch.float16)
            if config.mixed_precision == "float16"
            else None
        )

    def prepare(self, *objects: Any) -> Any:
        """Models, optimizers and data loaders ready for this process's device, in the order given (one: itself).

        Models move to the device (with several processes, in ``DistributedDataParallel``), compiled first where
        ``config.compile``; optimizers go through ignite's ``auto_optim``; data loaders stay as built (``loaders.py``
        shards them across the processes)."""
        prepared = list(objects)
        # Optimizers built on the CPU step the moved model's parameters (new ones on a TPU; on a GPU, the same).
        on_cpu, moved = [], {}
        for index, model in enumerate(objects):
            if isinstance(model, nn.Module):
                if self.config.compile:
                    # Its forward: the state dict keeps its names (torch.compile(model) adds "_orig_mod."; torch 2.9's
                    # model.compile() traces nothing where torch.nn's modules come first). Static shapes: a kernel
                    # per shape, whichever comes first (a continued run meets them in another order).
                    model.forward = torch.compile(model.forward, dynamic=False)
                on_cpu.append(list(model.parameters()))  # kept until the optimizers are mapped: their ids stay theirs
                prepared[index] = self.model_on_device(model)
                moved.update(zip(map(id, on_cpu[-1]), model.parameters(), strict=True))
        for index, obj in enumerate(prepared):
            if isinstance(obj, torch.optim.Optimizer):
                for group in obj.param_groups:
                    group["params"] = [moved.get(id(param), param) for param in group["params"]]
                prepared[index] = self.optimizer_on_device(obj)
            elif not isinstance(obj, nn.Module):
                prepared[index] = self.loader_on_device(obj)
        self.models_prepared([obj for obj in prepared if isinstance(obj, nn.Module)])
        return prepared[0] if len(prepared) == 1 else tuple(prepared)

    def model_on_device(self, model: nn.Module) -> nn.Module:
        return idist.auto_model(model)

    def optimizer_on_device(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        return idist.auto_optim(optimizer)

    def loader_on_device(self, obj: Any) -> Any:
        return obj

    def models_prepared(self, models: list[nn.Module]) -> None:
        """Once every model is on its device: nothing more to do (a TPU's replicas start alike here)."""

    def autocast(self) -> AbstractContextManager:
        return nullcontext() if self.dtype is None else torch.autocast(self.device_type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is None:
            optimizer.step()
        else:
            self.scaler.step(optimizer)  # skipped where the scaled gradients overflowed

    def update(self) -> None:
        """Once per iteration, after the optimizers step: adjust the loss scale (float16; bfloat16 has no scaler)."""
        if self.scaler is not None:
            self.scaler.update()

    def step_done(self) -> None:
        """After a training step's last tensor (its stacked losses): nothing to do (a TPU ends its graph there)."""

    def state_objects(self) -> dict[str, Any]:
        """What a training checkpoint keeps of the step: float16's gradient scaler (bfloat16 has none)."""
        return {} if self.scaler is None else {"scaler": self.scaler}
