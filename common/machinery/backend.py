{% import "flags.j2" as flags with context %}
"""The one seam between your code and the backend: ``Backend``, whose methods' bodies the backend picks.

``main.py`` builds its models, optimizers and data loaders as on one CPU and hands them to ``Backend.prepare``;
the training steps use its four calls (autocast, backward, step, update): the same code {{ "trains on TPUs" if flags.xla else "trains on one device or several" }}.
"""

{% if cookiecutter.mixed_precision %}
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

from config import Config
{% if flags.xla %}
from machinery.xla import device_loader, start_alike
{% endif %}


class Backend:
    """{{ cookiecutter.backend }}: models, optimizers and loaders ready for the devices (``prepare``), and the training
    step's autocast, backward pass and optimizer step {{ flags.backprop }}.

    Every training step is written with the four calls after ``prepare``, so that it reads the same on every backend.
    """

    def __init__(self, config: Config) -> None:
        self.config = config
{% if flags.cuda_amp %}
        # Mixed precision runs on CUDA only. The scaler is part of the training state (checkpoints).
        self.scaler = torch.amp.GradScaler("cuda", enabled=config.use_amp and idist.device().type == "cuda")
{% elif flags.xla_amp %}
        self.use_amp = config.use_amp
{% endif %}

    def prepare(self, *objects: Any) -> Any:
        """Models, optimizers and data loaders ready for {{ "the TPU replicas" if flags.xla else "this process's device" }}, in the order given (one: itself).

{% if flags.xla %}
        Models move to the TPU and every replica starts from replica 0's weights (each initialised its own).
        Optimizers step the moved parameters, with ``xm.optimizer_step`` (``step``), which all-reduces
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
{% if flags.cuda_amp %}
        return torch.autocast("cuda", enabled=self.scaler.is_enabled())
{% elif flags.xla_amp %}
        # TPUs compute in bfloat16 natively: no gradient scaler is needed.
        return torch.autocast("xla", dtype=torch.bfloat16, enabled=self.use_amp)
{% else %}
        return nullcontext()
{% endif %}

    def backward(self, loss: torch.Tensor) -> None:
{% if flags.cuda_amp %}
        self.scaler.scale(loss).backward()
{% else %}
        loss.backward()
{% endif %}

    def step(self, optimizer: torch.optim.Optimizer) -> None:
{% if flags.cuda_amp %}
        self.scaler.step(optimizer)
{% elif flags.xla %}
        # All-reduces the gradients across replicas, then steps. The engine ends the lazy graph after the
        # training step (engine.training_engine), so every iteration runs the same compiled program.
        xm.optimizer_step(optimizer)
{% else %}
        optimizer.step()
{% endif %}

    def update(self) -> None:
{% if flags.cuda_amp %}
        """Once per iteration, after the optimizers step: adjust the loss scale."""
        self.scaler.update()
{% else %}
        """Nothing to do once the optimizers have stepped: there is no gradient scaler."""
{% endif %}

    def state_objects(self) -> dict[str, Any]:
        """What a training checkpoint keeps of the step: {{ "the gradient scaler" if flags.cuda_amp else "nothing (no gradient scaler)" }}."""
{% if flags.cuda_amp %}
        return {"scaler": self.scaler}
{% else %}
        return {}
{% endif %}
