"""The engines' steps: a training step per batch (an optimizer step every ``accumulation_steps``), and the
evaluation step whose logits and targets the metrics score."""

import ignite.distributed as idist
import torch
from ignite.engine import Engine
from ignite.metrics import Metric
from torch import nn

from data import Batch, prepare_batch
from machinery.backend import Backend
from machinery.training.engine import training_engine
from machinery.training.evaluation import evaluation_engine
from models import logits_of


def setup_trainer(
    model: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: nn.Module, backend: Backend, accumulation_steps: int
) -> Engine:
    """Build the engine that runs a training step per batch and an optimizer step every ``accumulation_steps``."""
    device = idist.device()

    def train_step(engine: Engine, batch: Batch) -> dict[str, torch.Tensor]:
        model.train()
        inputs, targets = prepare_batch(batch, device)
        with backend.autocast():
            loss = loss_fn(model(*inputs), targets)
        # The batches' gradients add up until the optimizer steps: as one batch accumulation_steps times
        # larger, each loss scaled to their mean. A Python test of the iteration, not of a tensor: on a
        # TPU, the steps with and without the optimizer step are two compiled programs, each reused.
        backend.backward(loss / accumulation_steps)
        if engine.state.iteration % accumulation_steps == 0:
            backend.optimizer_step(optimizer)
            backend.update()
            # After the step: a checkpoint saved here holds no gradients (see AccumulatedGradients).
            optimizer.zero_grad()
        # Return the losses as tensors: reading one (`.item()`) would wait for the device every step.
        return {"train_loss": loss.detach()}

    return training_engine(train_step, backend)


class AccumulatedGradients:
    """The gradients added up towards the next optimizer step, as part of the training state.

    A run stopped between two optimizer steps (``accumulation_steps`` > 1) continues with the gradients it
    had. None are left after an optimizer step, so a checkpoint saved there holds nothing more. On several
    TPU replicas each holds its own until the step sums them: a checkpoint keeps replica 0's.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {name: p.grad for name, p in self.model.named_parameters() if p.grad is not None}

    def load_state_dict(self, gradients: dict[str, torch.Tensor]) -> None:
        for name, parameter in self.model.named_parameters():
            grad = gradients.get(name)
            parameter.grad = None if grad is None else grad.to(parameter.device)


def setup_evaluator(model: nn.Module, backend: Backend, metrics: dict[str, Metric]) -> Engine:
    """Build the engine that computes the logits and targets of each eval batch and scores them with ``metrics``."""
    device = idist.device()

    def eval_step(engine: Engine, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, targets = prepare_batch(batch, device)
        with backend.autocast():
            output = model(*inputs)
        # In float32 (mixed precision computes in float16 or bfloat16): the metrics sum many values.
        return logits_of(output).float(), targets

    return evaluation_engine(eval_step, model, metrics)
