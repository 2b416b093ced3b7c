{% import "flags.j2" as flags with context %}
"""The one seam between your code and the backend: ``Backend``, whose methods' bodies the backend picks. The training
steps use its four calls (autocast, backward, optimizer_step, update): the same code trains {{ "on TPUs" if flags.xla else "anywhere" }}."""

{% if flags.gpu_amp %}
import logging
{% endif %}
{% if flags.xla_amp %}
from contextlib import AbstractContextManager
{% else %}
from contextlib import AbstractContextManager, nullcontext
{% endif %}
from typing import Any

import ignite.distributed as idist
import torch
{% if flags.xla %}
import torch_xla.core.xla_model as xm
{% endif %}
from torch import nn
{% if flags.xla %}
from torch.utils.data import DataLoader
{% endif %}

from machinery.settings import RunSettings
{% if flags.xla %}
from machinery.tpu.device_loaders import device_loader
from machinery.tpu.xla import start_alike
{% endif %}


class Backend:
    """{{ cookiecutter.backend }}: models, optimizers and loaders built as on one CPU, ready for the devices (``prepare``); the training
    step's autocast, backward pass and optimizer step {{ flags.backprop }}."""

    def __init__(self, config: RunSettings) -> None:
        self.config = config
{% if flags.gpu_amp %}
        # config.mixed_precision: the autocast's dtype, on this process's device (None: full precision).
        self.device_type = idist.device().type
        self.dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16, None: None}[config.mixed_precision]
        if self.dtype is torch.float16 and self.device_type != "cuda":
            # float16 autocast trains on CUDA GPUs (on a CPU it is slow, where it runs at all): full precision here.
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
{% endif %}

    def prepare(self, *objects: Any) -> Any:
        """Models, optimizers and data loaders ready for {{ "the TPU replicas" if flags.xla else "this process's device" }}, in the order given (one: itself).

{% if flags.xla %}
        Models move to the TPU, every replica starting from replica 0's weights (each initialised its own); optimizers
        step the moved parameters with ``xm.optimizer_step``, which all-reduces the gradients (ignite 0.5.5's
        ``auto_optim`` fails on XLA). The training loader feeds the TPU while a step runs{{ "; an eval loader pads its
        last batch to the others' shape (``device_loaders.device_loader``)" if flags.eval_metric }}."""
{% else %}
        Models move to the device (with several processes, in ``DistributedDataParallel``); optimizers go through
        ignite's ``auto_optim``; data loaders stay as built (``loaders.py`` shards them across the processes)."""
{% endif %}
        prepared = list(objects)
        # Optimizers built on the CPU step the moved model's parameters (new ones on a TPU; on a GPU, the same).
        on_cpu, moved = [], {}
        for index, model in enumerate(objects):
            if isinstance(model, nn.Module):
{% if flags.compiled %}
                if self.config.compile:
                    # Its forward: the state dict keeps its names (torch.compile(model) adds "_orig_mod."; torch 2.9's
                    # model.compile() traces nothing where torch.nn's modules come first). Static shapes: a kernel
                    # per shape, whichever comes first (a continued run meets them in another order).
                    model.forward = torch.compile(model.forward, dynamic=False)
{% endif %}
                on_cpu.append(list(model.parameters()))  # kept until the optimizers are mapped: their ids stay theirs
                prepared[index] = idist.auto_model(model)
                moved.update(zip(map(id, on_cpu[-1]), model.parameters(), strict=True))
{% if flags.xla %}
        start_alike(*(obj for obj in prepared if isinstance(obj, nn.Module)))
{% endif %}
        for index, obj in enumerate(prepared):
            if isinstance(obj, torch.optim.Optimizer):
                for group in obj.param_groups:
                    group["params"] = [moved.get(id(param), param) for param in group["params"]]
{% if flags.xla %}
            elif isinstance(obj, DataLoader) or hasattr(obj, "_loader"):  # ignite wraps one for several replicas
                prepared[index] = device_loader(obj)
{% else %}
                prepared[index] = idist.auto_optim(obj)
{% endif %}
        return prepared[0] if len(prepared) == 1 else tuple(prepared)

    def autocast(self) -> AbstractContextManager:
{% if flags.gpu_amp %}
        return nullcontext() if self.dtype is None else torch.autocast(self.device_type, dtype=self.dtype)
{% elif flags.xla_amp %}
        # TPUs compute in bfloat16 natively: no gradient scaler is needed.
        return torch.autocast("xla", dtype=torch.bfloat16, enabled=self.config.mixed_precision == "bfloat16")
{% else %}
        return nullcontext()
{% endif %}

    def backward(self, loss: torch.Tensor) -> None:
{% if flags.gpu_amp %}
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()
{% else %}
        loss.backward()
{% endif %}

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
{% if flags.gpu_amp %}
        if self.scaler is None:
            optimizer.step()
        else:
            self.scaler.step(optimizer)  # skipped where the scaled gradients overflowed
{% elif flags.xla %}
        # All-reduces the gradients, then steps (engine.training_engine ends the graph: one compiled program per step).
        xm.optimizer_step(optimizer)
{% else %}
        optimizer.step()
{% endif %}

    def update(self) -> None:
{% if flags.gpu_amp %}
        """Once per iteration, after the optimizers step: adjust the loss scale (float16; bfloat16 has no scaler)."""
        if self.scaler is not None:
            self.scaler.update()
{% else %}
        """Nothing to do once the optimizers have stepped: there is no gradient scaler."""
{% endif %}

    def state_objects(self) -> dict[str, Any]:
        """What a training checkpoint keeps of the step: {{ "float16's gradient scaler (bfloat16 has none)" if flags.gpu_amp else "nothing (no gradient scaler)" }}."""
{% if flags.gpu_amp %}
        return {} if self.scaler is None else {"scaler": self.scaler}
{% else %}
        return {}
{% endif %}
