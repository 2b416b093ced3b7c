{% import "flags.j2" as flags with context %}
"""The one seam between your code and the backend: ``Backend``, whose methods' bodies the backend picks.

``main.py`` builds its models, optimizers and data loaders as on one CPU and hands them to ``Backend.prepare``; the
training steps use its four calls (autocast, backward, optimizer_step, update): the same code trains {{ "on TPUs" if flags.xla else "anywhere" }}.
"""

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
from machinery.tpu.xla import device_loader, start_alike
{% endif %}


class Backend:
    """{{ cookiecutter.backend }}: models, optimizers and loaders ready for the devices (``prepare``), and the training
    step's autocast, backward pass and optimizer step {{ flags.backprop }}.

    Every training step is written with the four calls after ``prepare``, so that it reads the same on every backend.
    """

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
        # float16's narrow range needs the loss scaled; bfloat16 has float32's range and needs no scaler. A float16 run
        # keeps its scaler in its training checkpoints (state_objects), even where it trains in full precision (its
        # scaler disabled, as on a CPU), so that every float16 run's checkpoints hold the same objects.
        self.scaler = (
            torch.amp.GradScaler("cuda", enabled=self.dtype is torch.float16)
            if config.mixed_precision == "float16"
            else None
        )
{% endif %}

    def prepare(self, *objects: Any) -> Any:
        """Models, optimizers and data loaders ready for {{ "the TPU replicas" if flags.xla else "this process's device" }}, in the order given (one: itself).

{% if flags.xla %}
        Models move to the TPU and every replica starts from replica 0's weights (each initialised its own).
        Optimizers step the moved parameters, with ``xm.optimizer_step`` (``optimizer_step``), which all-reduces
        the gradients (ignite 0.5.5's ``auto_optim`` fails on XLA). The training loader feeds the TPU while a
        step runs{{ "; an eval loader pads its last batch to the others' shape (``xla.device_loader``)" if flags.eval_metric }}.
{% else %}
        Models move to the device and, with several processes, are wrapped for them (``DistributedDataParallel``
        all-reduces the gradients); optimizers go through ignite's ``auto_optim``; data loaders are ready as built
        (``loaders.py`` shards them across the processes).
{% endif %}
        """
        prepared = list(objects)
        # A model moved to a TPU holds new parameters (moved to a GPU, the same ones): optimizers built on the CPU's
        # step those the moved model holds.
        on_cpu, moved = [], {}
        for index, model in enumerate(objects):
            if isinstance(model, nn.Module):
{% if flags.compiled %}
                if self.config.compile:
                    # Its forward, so that its state dict keeps the module's own names (torch.compile(model) would
                    # add "_orig_mod."; torch 2.9's model.compile() traces nothing where torch.nn's modules come
                    # first). Static shapes: a kernel per shape, whichever comes first (a continued run meets them
                    # in another order).
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
        # All-reduces the gradients across replicas, then steps. The engine ends the lazy graph after the
        # training step (engine.training_engine), so every iteration runs the same compiled program.
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
