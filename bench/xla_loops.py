"""XLA compilations and device-to-host transfers: the generated TPU project against a naive port.

Usage (cwd = a baked xla-tpu project, PJRT_DEVICE=CPU, the TPU venv's Python):
python xla_loops.py TEMPLATE EPOCHS. Prints one JSON line.
"""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path.cwd()))
BATCH, ITERATIONS, LOG_EVERY = 16, 8, 4
# Segmentation on the XLA CPU device: a light model of the template's family and small crops, so that its
# programs compile in seconds (the default deeplabv3_resnet50 at 512 would take many minutes per epoch).
SEGMENTATION = {"model": "deeplabv3_mobilenet_v3_large", "crop_size": 64, "num_pictures": 1}


def generated(epochs: int) -> dict:
    """Run the project's own training command; read the xla_metrics.json it writes."""
    config = yaml.safe_load(Path("config.yaml").read_text())
    overrides = dict(
        dataset="synthetic",
        num_workers=0,
        batch_size=BATCH,
        eval_batch_size=BATCH,
        max_epochs=epochs,
        train_epoch_length=ITERATIONS,
        eval_epoch_length=2,
        num_samples=4,
        log_every_iters=LOG_EVERY,
        save_every_iters=10**9,
        output_dir="bench-runs",
    )
    # Only keys this template has (eval_epoch_length: classifiers; num_samples: gan).
    config.update({k: v for k, v in overrides.items() if k in config})
    if "crop_size" in config:
        config.update(SEGMENTATION)
    Path("config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    subprocess.run([sys.executable, "main.py", "config.yaml"], check=True, capture_output=True, env=os.environ)
    (run_dir,) = Path("bench-runs").iterdir()
    metrics = json.loads((run_dir / "xla_metrics.json").read_text())
    return {
        "compilations_per_epoch": metrics["compilations_per_epoch"],
        "transfers_per_epoch": metrics["device_to_host_transfers_per_epoch"],
        "fallbacks_per_epoch": [sum(epoch.values()) for epoch in metrics["cpu_fallbacks_per_epoch"]],
        "iterations_per_epoch": ITERATIONS,
        "log_every_iters": LOG_EVERY,
    }


class Counts:
    """New XLA compilations, device-to-host transfers and CPU fallbacks, per epoch.

    A fallback (an operation without an XLA lowering here, run on the CPU: segmentation's bilinear upsampling
    backward on the XLA CPU device, lowered on a TPU) reads its inputs from the device: each is a transfer too.
    """

    def __init__(self) -> None:
        self.compilations: list[int] = []
        self.transfers: list[int] = []
        self.fallbacks: list[int] = []

    @staticmethod
    def now() -> tuple[int, int, int]:
        import torch_xla.debug.metrics as met

        data = [met.metric_data(name) for name in ("CompileTime", "TransferFromDeviceTime")]
        # aten::_local_scalar_dense counts `.item()`: the loop's own read, not a fallback.
        names = [name for name in met.counter_names() if name.startswith("aten::")]
        fallbacks = sum(met.counter_value(name) for name in names if name != "aten::_local_scalar_dense")
        return (*(0 if d is None else d[0] for d in data), fallbacks)

    def start(self) -> None:
        self.mark = self.now()

    def stop(self) -> None:
        compilations, transfers, fallbacks = self.now()
        self.compilations.append(compilations - self.mark[0])
        self.transfers.append(transfers - self.mark[1])
        self.fallbacks.append(fallbacks - self.mark[2])

    def result(self, iterations_per_epoch: int) -> dict:
        return {
            "compilations_per_epoch": self.compilations,
            "transfers_per_epoch": self.transfers,
            "fallbacks_per_epoch": self.fallbacks,
            "iterations_per_epoch": iterations_per_epoch,
            "log_every_iters": 1,
        }


def naive_loader(dataset):
    """7 full batches and a partial one: the last batch has another shape."""
    from torch.utils.data import DataLoader, Subset

    return DataLoader(Subset(dataset, range(BATCH * ITERATIONS - BATCH // 2)), batch_size=BATCH, shuffle=True)


def naive_epochs(loader, epochs: int, step: Callable[[Any], dict]) -> dict:
    """Run ``step`` on each batch as a GPU loop moved to XLA as is would, counting per epoch.

    After each step: a step marker, then `.item()` on every loss the step returns. The marker is the
    one XLA idiom the naive port keeps: without it the lazy graph grows with every iteration and a
    few epochs take many minutes (shared/TPU.md, item 7).
    """
    import torch_xla.core.xla_model as xm

    counts = Counts()
    for _ in range(epochs):
        counts.start()
        for batch in loader:
            losses = step(batch)
            xm.mark_step()
            print(" ".join(f"{name} {loss.item():.4f}" for name, loss in losses.items()), file=sys.stderr)
        counts.stop()
    return counts.result(len(loader))


def plain_step(model, optimizer, loss_fn, inputs: tuple, targets) -> dict:
    """Forward, loss, backward, optimizer step: a classifier's training step."""
    loss = loss_fn(model(*inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return {"loss": loss}


def vision_naive(epochs: int) -> dict:
    """The vision loop moved to XLA as is: .item() every step, a partial last batch, no device loader."""
    import data
    import models
    import torch
    import torch_xla.core.xla_model as xm

    device = xm.xla_device()
    torch.manual_seed(0)
    model = models.setup_model("resnet18", num_classes=data.NUM_CLASSES).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    loader = naive_loader(data.get_datasets("synthetic", "data")[0])
    return naive_epochs(
        loader, epochs, lambda b: plain_step(model, optimizer, loss_fn, (b[0].to(device),), b[1].to(device))
    )


def gan_naive(epochs: int) -> dict:
    """The DCGAN step moved to XLA as is (see vision_naive), both losses read every step."""
    import data
    import models
    import torch
    import torch_xla.core.xla_model as xm
    from config import Config
    from machinery.config_files import load_config

    config = load_config(Path("config.yaml"), Config)
    device = xm.xla_device()
    torch.manual_seed(0)
    generator = models.Generator(config.z_dim, config.g_filters, config.channels, config.image_size)
    discriminator = models.Discriminator(config.channels, config.d_filters, config.image_size)
    generator, discriminator = generator.to(device), discriminator.to(device)
    optimizer_g = torch.optim.Adam(generator.parameters(), lr=config.lr, betas=(config.beta1, 0.999))
    optimizer_d = torch.optim.Adam(discriminator.parameters(), lr=config.lr, betas=(config.beta1, 0.999))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    loader = naive_loader(data.get_dataset("synthetic", "data", config.image_size, config.channels))

    def loss(images: torch.Tensor, target: float) -> torch.Tensor:
        logits = discriminator(images)
        return loss_fn(logits, torch.full_like(logits, target))

    def step(batch) -> dict:
        real = batch[0].to(device)
        fake = generator(torch.randn(real.shape[0], config.z_dim, 1, 1, device=device))
        optimizer_d.zero_grad()
        loss_d = loss(real, 1.0) + loss(fake.detach(), 0.0)
        loss_d.backward()
        optimizer_d.step()
        optimizer_g.zero_grad()
        loss_g = loss(fake, 1.0)
        loss_g.backward()
        optimizer_g.step()
        return {"loss_d": loss_d, "loss_g": loss_g}

    return naive_epochs(loader, epochs, step)


def text_naive(epochs: int) -> dict:
    """The text classifier's loop moved to XLA as is (see vision_naive)."""
    import data
    import models
    import torch
    import torch_xla.core.xla_model as xm
    from config import Config
    from machinery.config_files import load_config

    config = load_config(Path("config.yaml"), Config, dataset="synthetic", data_path="data")
    device = xm.xla_device()
    torch.manual_seed(0)
    tokenizer = data.setup_tokenizer(config)
    train, _, _ = data.get_datasets(config, tokenizer)
    model = models.setup_model(config, vocab_size=len(tokenizer), num_classes=data.NUM_CLASSES).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=models.learning_rate(config))  # lr null: the project's pick
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(batch) -> dict:
        input_ids, mask, label = (batch[k].to(device) for k in ("input_ids", "attention_mask", "label"))
        return plain_step(model, optimizer, loss_fn, (input_ids, mask), label)

    return naive_epochs(naive_loader(train), epochs, step)


def segmentation_naive(epochs: int) -> dict:
    """The segmentation loop moved to XLA as is (see vision_naive): the same model, SGD and main-plus-auxiliary
    loss as the generated run (SEGMENTATION), one optimizer step per batch."""
    import data
    import models
    import torch
    import torch_xla.core.xla_model as xm
    from config import Config
    from machinery.config_files import load_config

    config = load_config(Path("config.yaml"), Config, **SEGMENTATION)
    device = xm.xla_device()
    torch.manual_seed(0)
    model = models.setup_model(config.model, data.NUM_CLASSES, config.weights_backbone).to(device)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )
    loss_fn = models.SegmentationLoss(config.aux_loss_weight)
    loader = naive_loader(data.get_datasets("synthetic", "data", config.crop_size)[0])
    return naive_epochs(
        loader, epochs, lambda b: plain_step(model, optimizer, loss_fn, (b[0].to(device),), b[1].to(device))
    )


NAIVE = {
    "vision-classification": vision_naive,
    "text-classification": text_naive,
    "gan": gan_naive,
    "vision-segmentation": segmentation_naive,
}


def main() -> None:
    template, epochs = sys.argv[1], int(sys.argv[2])
    result = {"generated": generated(epochs), "naive": NAIVE[template](epochs)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
