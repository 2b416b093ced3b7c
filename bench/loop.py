"""Steps per second of a generated project's trainer against a hand-written loop (run in the project).

Usage (cwd = a baked project): python loop.py TEMPLATE ITERATIONS REPEATS. Prints one JSON line.
Both loops train the same model on the same synthetic data, one process on the CPU; the generated
trainer runs with the handlers main.py attaches (progress bar, logging, checkpoints, LR schedule).
"""

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import yaml

sys.path.insert(0, str(Path.cwd()))
WARMUP = 3


def load_config(iterations: int, output_dir: str) -> SimpleNamespace:
    values = yaml.safe_load(Path("config.yaml").read_text())
    for key in ("defaults", "hydra"):
        values.pop(key, None)
    overrides = dict(
        dataset="synthetic",
        num_workers=0,
        max_epochs=1,
        train_epoch_length=WARMUP + iterations,
        eval_epoch_length=1,
        num_samples=4,
        log_every_iters=WARMUP + iterations,  # one loss read, at the end, as a user's long interval
        save_every_iters=10**9,
        output_dir=output_dir,
        backend=None,
    )
    # Only keys this template has (eval_epoch_length: classifiers; num_samples: gan).
    values.update({k: v for k, v in overrides.items() if k in values})
    return SimpleNamespace(**values)


def generated(config: SimpleNamespace, iterations: int) -> float:
    """Run main.run and time the training iterations after the warm-up."""
    import main
    from ignite.engine import Events

    marks = {}
    build = getattr(main.setup_trainer, "original", main.setup_trainer)

    def timed_setup_trainer(*args, **kwargs):
        trainer = build(*args, **kwargs)
        trainer.add_event_handler(
            Events.ITERATION_COMPLETED(once=WARMUP), lambda _: marks.setdefault("start", time.perf_counter())
        )
        trainer.add_event_handler(
            Events.ITERATION_COMPLETED(once=WARMUP + iterations), lambda _: marks.setdefault("end", time.perf_counter())
        )
        return trainer

    timed_setup_trainer.original = build
    main.setup_trainer = timed_setup_trainer
    main.run(0, config)
    return iterations / (marks["end"] - marks["start"])


def endless(loader):
    """Batches from the loader, epoch after epoch (as ignite restarts it when an epoch is longer)."""
    while True:
        yield from loader


def vision_hand_written(config: SimpleNamespace, iterations: int) -> float:
    """The same model, data, loss, optimizer: a plain PyTorch loop."""
    import data
    import models

    torch.manual_seed(config.seed)
    model = models.setup_model(config.model)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    loader, _ = data.setup_data(config)
    batches = endless(loader)
    model.train()
    for i in range(WARMUP + iterations):
        if i == WARMUP:
            start = time.perf_counter()
        x, y = next(batches)
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    loss.item()
    return iterations / (time.perf_counter() - start)


def gan_hand_written(config: SimpleNamespace, iterations: int) -> float:
    """The same DCGAN step (discriminator on real then generated images, then generator), plainly."""
    import data
    import models

    torch.manual_seed(config.seed)
    generator = models.Generator(config.z_dim, config.g_filters, config.channels, config.image_size)
    discriminator = models.Discriminator(config.channels, config.d_filters, config.image_size)
    betas = (config.beta1, 0.999)
    optimizer_g = torch.optim.Adam(generator.parameters(), lr=config.lr, betas=betas)
    optimizer_d = torch.optim.Adam(discriminator.parameters(), lr=config.lr, betas=betas)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    batches = endless(data.setup_data(config))

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
    return iterations / (time.perf_counter() - start)


def text_hand_written(config: SimpleNamespace, iterations: int) -> float:
    """The same encoder, batches, AdamW groups and loss: a plain PyTorch loop."""
    import data
    import main
    import models

    torch.manual_seed(config.seed)
    tokenizer = data.setup_tokenizer(config)
    loader, _ = data.setup_data(config, tokenizer)
    model = models.setup_model(config, vocab_size=len(tokenizer), num_classes=data.NUM_CLASSES)
    optimizer = torch.optim.AdamW(main.parameter_groups(model, config.weight_decay), lr=config.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    batches = endless(loader)
    model.train()
    for i in range(WARMUP + iterations):
        if i == WARMUP:
            start = time.perf_counter()
        batch = next(batches)
        loss = loss_fn(model(batch["input_ids"], batch["attention_mask"]), batch["label"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    loss.item()
    return iterations / (time.perf_counter() - start)


HAND_WRITTEN = {
    "vision-classification": vision_hand_written,
    "text-classification": text_hand_written,
    "gan": gan_hand_written,
}


def main() -> None:
    template, iterations, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    results = {"generated": [], "hand_written": []}
    loops = {"generated": generated, "hand_written": HAND_WRITTEN[template]}
    with tempfile.TemporaryDirectory() as tmp:
        # One untimed round first: the process's first model and first steps pay one-off costs
        # (allocator, kernel selection) that would otherwise land on whichever loop runs first.
        for loop in loops.values():
            loop(load_config(2, tmp), 2)
        for i in range(repeats):  # alternate the order, so that machine noise hits both alike
            for name in sorted(loops, reverse=i % 2 == 1):
                results[name].append(loops[name](load_config(iterations, tmp), iterations))
    print(json.dumps({k: statistics.median(v) for k, v in results.items()}))


if __name__ == "__main__":
    main()
