"""The eval metrics on the TPU: state kept on the device, summed across replicas and read in one transfer at the end."""

import functools
import inspect
from collections.abc import Callable
from numbers import Number
from typing import Any

import ignite.distributed as idist
import torch
import torch_xla
import torch_xla.core.xla_model as xm
from ignite.engine import Engine, Events
from ignite.metrics import Metric


def step_on_real_rows(
    eval_step: Callable[[Engine, Any], tuple[torch.Tensor, ...]],
) -> Callable[[Engine, tuple[Any, int]], tuple[torch.Tensor, ...]]:
    """``eval_step`` on a padded batch, ``(batch, real rows)``, its outputs cut to the real rows for the metrics."""

    def step(engine: Engine, padded: tuple[Any, int]) -> tuple[torch.Tensor, ...]:
        batch, real_rows = padded
        outputs = eval_step(engine, batch)
        # Padding rows cut by a host-known slice: a short last batch's metrics are one more program (compiled at the
        # first evaluation); the model ran on the padded batch, in the one program.
        return outputs if real_rows == len(outputs[0]) else tuple(output[:real_rows] for output in outputs)

    return step


def read_once(evaluator: Engine, metrics: list[Metric]) -> None:
    """At each evaluation's end, sum the device state of ``metrics`` over the replicas and read it in one transfer, not
    a TPU wait per tensor as in ignite's ``compute``; metrics whose state ignite does not sum (gathered, a maximum) or
    keeps on the CPU are left to ignite. Attach this before the metrics: it runs before their ``compute``."""
    replicas = idist.get_world_size() > 1
    summed = [(metric, names) for metric in metrics if (names := _summed_state(metric)) and _on_tpu(metric, names)]
    for metric, _ in summed if replicas else ():
        # Summed here: ignite's compute runs without its own all-reduce (the function sync_all_reduce wraps).
        metric.compute = functools.partial(type(metric).compute.__wrapped__, metric)

    @evaluator.on(Events.EPOCH_COMPLETED)
    def sum_and_read() -> None:
        state = [(metric, name, getattr(metric, name)) for metric, names in summed for name in names]
        # On one device the numbers the host counted (a metric's examples) are final: the tensors alone are read.
        state = [entry for entry in state if isinstance(entry[2], torch.Tensor) or replicas]
        # Counts stay exact in int64; sums are added in float32, as the metrics add them. Tensors first, then numbers.
        groups = [[entry for entry in state if _kind(entry[2]) == kind] for kind in (torch.float32, torch.int64)]
        groups = [sorted(group, key=lambda entry: not isinstance(entry[2], torch.Tensor)) for group in groups if group]
        if not groups:
            return
        # Ends the last batch's graph (its real rows differ between replicas): a collective needs a program every
        # replica runs alike, and left pending it would join the next training step's graph, a program of its own.
        torch_xla.sync()
        packed = [_packed(group) for group in groups]
        if replicas:
            xm.all_reduce(xm.REDUCE_SUM, packed)  # in place: one collective for all of them
            torch_xla.sync()
        # Every tensor in one transfer (as torch_xla's own xm.mesh_reduce reads its tensors).
        for group, on_host in zip(groups, torch_xla._XLAC._xla_get_cpu_tensors(packed), strict=True):
            start = 0
            for metric, name, value in group:
                size = value.numel() if isinstance(value, torch.Tensor) else 1
                part = on_host[start : start + size]
                start += size
                if isinstance(value, torch.Tensor):
                    setattr(metric, name, part.to(value.dtype).view(value.shape))
                else:
                    setattr(metric, name, type(value)(part.item()))


def _summed_state(metric: Metric) -> tuple[str, ...] | None:
    """State ignite's ``compute`` sums (its ``sync_all_reduce`` names); None if it reduces otherwise or not at all."""
    compute = type(metric).compute
    if not hasattr(compute, "__wrapped__"):
        return None
    names = inspect.getclosurevars(compute).nonlocals.get("attrs")
    if names is None or any(":" in name and not name.endswith(":SUM") for name in names):
        return None
    return tuple(name.split(":")[0] for name in names)


def _on_tpu(metric: Metric, names: tuple[str, ...]) -> bool:
    """Whether each tensor of the metric's state is on the device (a metric may keep its own on the CPU)."""
    values = [getattr(metric, name) for name in names]
    return all(value.device.type == "xla" for value in values if isinstance(value, torch.Tensor))


def _kind(value: torch.Tensor | Number) -> torch.dtype:
    floating = value.is_floating_point() if isinstance(value, torch.Tensor) else isinstance(value, float)
    return torch.float32 if floating else torch.int64


def _packed(group: list[tuple[Metric, str, torch.Tensor | Number]]) -> torch.Tensor:
    """The tensors of ``group`` flattened into one, the numbers after them (one copy to the device)."""
    kind = _kind(group[0][2])
    tensors = [value.detach().reshape(-1).to(kind) for _, _, value in group if isinstance(value, torch.Tensor)]
    numbers = [value for _, _, value in group if not isinstance(value, torch.Tensor)]
    if numbers:
        tensors.append(torch.tensor(numbers, dtype=kind, device=idist.device()))
    return torch.cat(tensors)
