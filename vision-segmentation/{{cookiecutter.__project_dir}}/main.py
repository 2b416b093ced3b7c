"""Train a semantic segmentation model with PyTorch-Ignite: read this file top to bottom."""

from ignite.handlers import PiecewiseLinear
from torch import optim

from config import Config
from data import setup_data
from machinery.backend import setup_backend
from machinery.cli import cli
from machinery.runs.directory import write_classes
from machinery.runs.start import start_run
from machinery.training.fit import fit
from metrics import eval_metrics
from models import SegmentationLoss, backbone_weights, setup_model, statistics
from pictures import PredictionPictures
from trainers import AccumulatedGradients, setup_evaluator, setup_trainer


def run(local_rank: int, config: Config) -> None:
    """Train and evaluate in one process (one of several in distributed training)."""
    this_run = start_run(config)
    # This run's devices and how a training step runs on them: the same code on every backend (machinery/backend.py).
    backend = setup_backend(config)

    # Images normalised as the backbone's pretrained weights were trained (else with ImageNet's statistics).
    normalisation = statistics(backbone_weights(config.model, config.weights_backbone))
    train_loader, eval_loader, classes = setup_data(config, normalisation)
    write_classes(this_run.run_dir, classes)  # beside the models: what each output of the model means
    # The same few eval images are drawn with their predicted masks after each epoch.
    samples = [eval_loader.dataset[index] for index in range(min(config.num_pictures, len(eval_loader.dataset)))]
    network = setup_model(config.model, len(classes), config.weights_backbone)
    optimizer = optim.SGD(network.parameters(), config.lr, momentum=config.momentum, weight_decay=config.weight_decay)
    # Models, optimizers and loaders on the devices (wrapped for several processes, or TPU replicas).
    model, optimizer, train_loader, eval_loader = backend.prepare(network, optimizer, train_loader, eval_loader)
    loss_fn = SegmentationLoss(config.aux_loss_weight)
    # Linear warm-up during the first epoch, then linear decay to zero.
    epoch_length = config.train_epoch_length or len(train_loader)
    lr_scheduler = PiecewiseLinear(
        optimizer,
        "lr",
        milestones_values=[(0, 0.0), (epoch_length, config.lr), (config.max_epochs * epoch_length, 0.0)],
    )

    trainer = setup_trainer(model, optimizer, loss_fn, backend, config.accumulation_steps)
    evaluator = setup_evaluator(model, backend, eval_metrics(loss_fn, classes))
    pictures = PredictionPictures(network, samples, this_run.run_dir / "predictions", normalisation)
    # What a training checkpoint keeps (with the trainer's state): a stopped run continues from it.
    to_save = {
        "model": model,
        "optimizer": optimizer,
        "lr_scheduler": lr_scheduler,
        "gradients": AccumulatedGradients(model),
        **backend.state_objects(),
    }
    fit(config, this_run, trainer, train_loader, to_save, evaluator, eval_loader, handlers=[pictures.attach])


if __name__ == "__main__":
    cli(run, Config)
