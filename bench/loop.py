"""Steps per second of a generated project's trainer against a hand-written loop (run in the project).

Usage (cwd = a baked project): python loop.py TEMPLATE ITERATIONS REPEATS. Prints one JSON line.
Both loops train the same model on the same synthetic data with the same LR schedule, one process on
the CPU, and must end with the same weights. The generated trainer runs with everything main.py
attaches; inside the timed window that is the LR scheduler and the progress bar at every iteration
and, in the last one, the loss read and NaN check (and the GAN's loss history); its checkpoint and
evaluation come at the epoch's end, which the run stops one iteration short of.
"""

import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from config import Config  # the baked project's, importable once sys.path has its directory (below)

sys.path.insert(0, str(Path.cwd()))
WARMUP = 3
RUN_NUMBERS = itertools.count()
# Segmentation: small scenes and batches (512 and 16 by default): its default model, a DeepLabV3 on a dilated
# ResNet-50, then takes seconds a step on 2 CPU cores, not minutes.
SEGMENTATION = {"crop_size": 32, "batch_size": 4}


def load_config(iterations: int, output_dir: str) -> "Config":
    """The project's config.yaml, read and checked by the project itself, with this benchmark's overrides."""
    from config import Config
    from machinery.config_files import load_config as project_config

    overrides = dict(
        dataset="synthetic",
        num_workers=0,
        max_epochs=1,
        # One iteration more than either loop runs: the generated run stops (see generated()) before
        # its epoch-end checkpoint and evaluation, which the hand-written loops do not do either.
        train_epoch_length=WARMUP + iterations + 1,
        eval_epoch_length=1,
        num_samples=4,
        log_every_iters=WARMUP + iterations,  # one loss read, in the last timed iteration, as in the hand-written loops
        save_every_iters=10**9,
        # A directory per run: a run of the same config finds the last one's (ended by its terminate) and,
        # with the project's resumable runs, would end at once with nothing to train.
        output_dir=f"{output_dir}/run-{next(RUN_NUMBERS)}",
        backend=None,
    )
    keys = set(Config.model_fields)
    if "crop_size" in keys:
        overrides.update(SEGMENTATION)
    # Only keys this template has (eval_epoch_length: classifiers; num_samples: gan).
    return project_config(Path("config.yaml"), Config, **{k: v for k, v in overrides.items() if k in keys})


def fingerprint(*modules: torch.nn.Module) -> float:
    """A number that differs when the trained weights differ: shows both loops did the same work."""
    return sum(p.detach().double().abs().sum().item() for m in modules for p in m.parameters())


def generated(config: "Config", iterations: int) -> tuple[float, float]:
    """Run main.run and time the training iterations after the warm-up, handlers included."""
    import main
    from ignite.engine import Engine, Events

    # main.py builds the trainer (trainers.setup_trainer, imported into main: patched there) and hands it to
    # machinery.training.fit.fit, which attaches the handlers and runs it. The clock's handlers go on as that run
    # starts, after all of fit's, so that the last timed iteration includes what they do then: the loss read, the
    # progress bar, the NaN check, and the GAN's loss history (images.py's, which fit attaches after
    # setup_handlers: right after setup_handlers, as before the machinery package, the clock would miss it).
    marks = {}
    build_trainer = getattr(main.setup_trainer, "original", main.setup_trainer)

    def stop(engine: Engine) -> None:
        marks["end"] = time.perf_counter()
        engine.terminate()

    def setup_trainer(*args, **kwargs) -> Engine:
        marks["modules"] = [a for a in args if isinstance(a, torch.nn.Module) and list(a.parameters())]
        trainer = build_trainer(*args, **kwargs)

        def run(*run_args, **run_kwargs):
            start = Events.ITERATION_COMPLETED(once=WARMUP)
            trainer.add_event_handler(start, lambda _: marks.update(start=time.perf_counter()))
            trainer.add_event_handler(Events.ITERATION_COMPLETED(once=WARMUP + iterations), stop)
            return Engine.run(trainer, *run_args, **run_kwargs)

        trainer.run = run
        return trainer

    setup_trainer.original = build_trainer
    main.setup_trainer = setup_trainer
    main.run(0, config)
    return iterations / (marks["end"] - marks["start"]), fingerprint(*marks["modules"])


def same_schedule(optimizer: torch.optim.Optimizer, milestones: list[tuple[int, float]]):
    """The generated run's piecewise-linear LR schedule, as a hand-written loop would write it.

    Part of "the same step": with it both loops end with the same weights, which main() checks.
    """
    steps, values = zip(*milestones, strict=True)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: float(np.interp(i, steps, values)))


def seed_everything(seed: int) -> None:
    """What main.py's ignite.utils.manual_seed does, so both loops draw the same random numbers."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def endless(loader):
    """Batches from the loader, epoch after epoch (as ignite restarts it when an epoch is longer)."""
    while True:
        yield from loader


def supervised_loop(
    config: "Config",
    iterations: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: Iterable,
    warmup_steps: int,
    unpack: Callable[[Any], tuple[tuple[torch.Tensor, ...], torch.Tensor]],
    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor],
) -> tuple[float, float]:
    """A plain PyTorch loop: forward, loss, backward, an optimizer step every ``accumulation_steps``, and
    main.py's LR schedule (trainers.setup_trainer's step, written out)."""
    total = config.max_epochs * config.train_epoch_length
    scheduler = same_schedule(optimizer, [(0, 0.0), (warmup_steps, 1.0), (total, 0.0)])
    accumulation_steps = config.accumulation_steps
    batches = endless(loader)
    model.train()
    for i in range(WARMUP + iterations):
        if i == WARMUP:
            start = time.perf_counter()
        inputs, targets = unpack(next(batches))
        loss = loss_fn(model(*inputs), targets)
        # Gradients add up over accumulation_steps batches, each loss scaled to their mean, as the generated step.
        (loss / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
        scheduler.step()
    loss.item()
    return iterations / (time.perf_counter() - start), fingerprint(model)


def vision_hand_written(config: "Config", iterations: int) -> tuple[float, float]:
    """The same ResNet, images, Adam and loss; main.py warms the learning rate up for one epoch."""
    import data
    import models

    seed_everything(config.seed)
    loader, _, classes = data.setup_data(config)
    model = models.setup_model(config.model, num_classes=len(classes))
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    return supervised_loop(
        config,
        iterations,
        model,
        optimizer,
        loader,
        config.train_epoch_length,
        lambda b: ((b[0],), b[1]),
        torch.nn.CrossEntropyLoss(),
    )


def gan_hand_written(config: "Config", iterations: int) -> tuple[float, float]:
    """The same DCGAN step (discriminator on real then generated images, then generator), plainly."""
    import data
    import models

    seed_everything(config.seed)
    batches = endless(data.setup_data(config))
    generator = models.Generator(config.z_dim, config.g_filters, config.channels, config.image_size)
    discriminator = models.Discriminator(config.channels, config.d_filters, config.image_size)
    betas = (config.beta1, 0.999)
    optimizer_g = torch.optim.Adam(generator.parameters(), lr=config.lr, betas=betas)
    optimizer_d = torch.optim.Adam(discriminator.parameters(), lr=config.lr, betas=betas)
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def loss(images: torch.Tensor, target: float) -> torch.Tensor:
        logits = discriminator(images)
        return loss_fn(logits, torch.full_like(logits, target))

    for i in range(WARMUP + iterations):
        if i == WARMUP:
            start = time.perf_counter()
        real = next(batches)[0]
        fake = generator(torch.randn(real.shape[0], config.z_dim, 1, 1))
        optimizer_d.zero_grad()
        loss(real, 1.0).backward()
        loss(fake.detach(), 0.0).backward()
        optimizer_d.step()
        optimizer_g.zero_grad()
        loss(fake, 1.0).backward()
        optimizer_g.step()
    return iterations / (time.perf_counter() - start), fingerprint(generator, discriminator)


def text_parts(config: "Config") -> tuple:
    """The text template's train loader, encoder, AdamW groups and warm-up steps (warmup_ratio of the run), built as
    main.py builds them: what this loop and bench/gpu_loop.py's hand-written one train."""
    import data
    import main
    import models

    seed_everything(config.seed)
    tokenizer = data.setup_tokenizer(config)
    loader, _, classes = data.setup_data(config, tokenizer)
    model = models.setup_model(config, vocab_size=len(tokenizer), num_classes=len(classes))
    # lr null in config.yaml: models.learning_rate picks it (fine-tuning or synthetic's tiny model), as main.py does.
    lr = models.learning_rate(config) if hasattr(models, "learning_rate") else config.lr
    optimizer = torch.optim.AdamW(main.parameter_groups(model, config.weight_decay), lr=lr)
    warmup_steps = round(config.warmup_ratio * config.max_epochs * config.train_epoch_length)
    return loader, model, optimizer, warmup_steps


def text_inputs(batch: dict) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """A text batch as the encoder's inputs and the labels."""
    return (batch["input_ids"], batch["attention_mask"]), batch["label"]


def text_hand_written(config: "Config", iterations: int) -> tuple[float, float]:
    """The same encoder, token batches, AdamW groups and loss; warm-up for warmup_ratio of the run."""
    loader, model, optimizer, warmup_steps = text_parts(config)
    loss_fn = torch.nn.CrossEntropyLoss()
    return supervised_loop(config, iterations, model, optimizer, loader, warmup_steps, text_inputs, loss_fn)


def segmentation_hand_written(config: "Config", iterations: int) -> tuple[float, float]:
    """The same segmentation network, scenes, SGD and main-plus-auxiliary loss; warm-up for one epoch."""
    import data
    import models

    seed_everything(config.seed)
    loader, _, classes = data.setup_data(config)
    model = models.setup_model(config.model, len(classes), config.weights_backbone)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )
    return supervised_loop(
        config,
        iterations,
        model,
        optimizer,
        loader,
        config.train_epoch_length,
        lambda b: ((b[0],), b[1]),
        models.SegmentationLoss(config.aux_loss_weight),
    )


HAND_WRITTEN = {
    "vision-classification": vision_hand_written,
    "text-classification": text_hand_written,
    "gan": gan_hand_written,
    "vision-segmentation": segmentation_hand_written,
}


def main() -> None:
    template, iterations, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rates = {"generated": [], "hand_written": []}
    weights = set()
    loops = {"generated": generated, "hand_written": HAND_WRITTEN[template]}
    with tempfile.TemporaryDirectory() as tmp:
        # One untimed round first: the process's first model and first steps pay one-off costs
        # (allocator, kernel selection) that would otherwise land on whichever loop runs first.
        for loop in loops.values():
            loop(load_config(2, tmp), 2)
        for i in range(repeats):  # alternate the order, so that machine noise hits both alike
            for name in sorted(loops, reverse=i % 2 == 1):
                rate, trained = loops[name](load_config(iterations, tmp), iterations)
                rates[name].append(rate)
                weights.add(trained)
    result = {name: statistics.median(values) for name, values in rates.items()}
    # Same seed, data order, schedule and steps: every run must end with the same weights, or the
    # two loops did not do the same work and their speeds cannot be compared.
    result["same_weights"] = len(weights) == 1
    print(json.dumps(result))


if __name__ == "__main__":
    main()
