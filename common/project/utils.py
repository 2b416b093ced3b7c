{% import "flags.j2" as flags with context %}
{% from "commands.j2" import backend_arg with context %}
"""Configuration, launch, logging and checkpointing helpers shared by the training scripts."""

{% if cookiecutter.logger == "visdom" %}
import html
{% endif %}
{% if flags.xla %}
import json
{% endif %}
import logging
{% if cookiecutter.logger == "mlflow" %}
import os
{% endif %}
import sys
{% if cookiecutter.argparser == "argparse" %}
from argparse import ArgumentParser
{% endif %}
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

{% if cookiecutter.argparser == "fire" %}
import fire
{% elif cookiecutter.argparser == "hydra" %}
import hydra
{% endif %}
import ignite.distributed as idist
{% if cookiecutter.deterministic %}
import numpy as np
{% endif %}
import torch
{% if flags.xla %}
import torch_xla
import torch_xla.debug.metrics as met
import torch_xla.distributed.parallel_loader as pl
{% endif %}
import yaml
{% if cookiecutter.deterministic %}
from ignite.engine import DeterministicEngine, Engine, Events
{% else %}
from ignite.engine import Engine, Events
{% endif %}
from ignite.handlers import (
    Checkpoint,
{% if cookiecutter.save_training or flags.save_best %}
    DiskSaver,
{% endif %}
{% if flags.early_stopping %}
    EarlyStopping,
{% endif %}
    ProgressBar,
{% if cookiecutter.terminate_on_nan %}
    TerminateOnNan,
{% endif %}
{% if cookiecutter.limit_sec | int > 0 %}
    TimeLimit,
{% endif %}
{% if cookiecutter.timer %}
    Timer,
{% endif %}
{% if flags.save_best or (flags.eval_metric and cookiecutter.logger != "none") %}
    global_step_from_engine,
{% endif %}
)
{% if cookiecutter.logger != "none" %}
from ignite.handlers.{{ flags.tracker_module }} import {{ flags.tracker_class }}
{% endif %}
from ignite.utils import setup_logger
{% if cookiecutter.logger == "neptune" %}
from neptune.utils import stringify_unsupported
{% endif %}
{% if cookiecutter.argparser == "hydra" %}
from omegaconf import DictConfig, OmegaConf
{% endif %}
from torch.utils.data.distributed import DistributedSampler
from tqdm import tqdm
{% if flags.xla %}

import xla_compat

# Before ignite asks torch_xla anything (even its first get_rank): see xla_compat.py.
xla_compat.apply()
{% endif %}

{% if flags.xla %}
BACKENDS = ("xla-tpu",)
{% else %}
BACKENDS = ("nccl", "gloo")
{% endif %}
RunFn = Callable[[int, SimpleNamespace], None]

{% set generated_config %}{% include "config.yaml" %}{% endset %}
{% set lines = namespace(long=false) %}
# config.yaml as this project was generated, without its comments or Hydra's settings: every key the
# code reads, with its value. A config that lacks some is refused, with these values to add. If your
# code stops reading a key, remove it here too.
TEMPLATE_CONFIG: dict[str, Any] = yaml.safe_load(
    r"""
{% for line in generated_config.splitlines() if line and not line.startswith(("#", " ", "defaults:", "hydra:")) %}
{% set entry = line if line.endswith('"') else line.split(" # ")[0] %}
{% set lines.long = lines.long or entry | length > 120 %}
{{ entry }}
{% endfor %}
"""{{ "  # noqa: E501" if lines.long }}
)


{% if cookiecutter.argparser == "argparse" %}
def cli(run: RunFn) -> None:
    """Train from the command line: ``python main.py config.yaml [--backend BACKEND]``."""
    parser = ArgumentParser(description="Train with PyTorch-Ignite.")
    parser.add_argument("config", type=Path, help="path to the YAML config, e.g. config.yaml")
    parser.add_argument("--backend", choices=BACKENDS, help="distributed backend (default: the config's)")
    args = parser.parse_args()
    overrides = {} if args.backend is None else {"backend": args.backend}
    launch(run, load_config(args.config, **overrides))
{% elif cookiecutter.argparser == "fire" %}
def cli(run: RunFn) -> None:
    """Train from the command line with Python Fire."""

    def train(config: str = "config.yaml", **overrides: Any) -> None:
        """Train: ``python main.py config.yaml --key=value ...`` overrides any config key."""
        launch(run, load_config(config, **overrides))

    fire.Fire(train)
{% else %}
def cli(run: RunFn) -> None:
    """Train from the command line with Hydra: ``python main.py key=value ...``."""

    # An absolute config path: Hydra would resolve a relative one against this module's package.
    @hydra.main(version_base="1.3", config_path=str(Path(__file__).resolve().parent), config_name="config")
    def train(cfg: DictConfig) -> None:
        launch(run, checked_config(OmegaConf.to_container(cfg, resolve=True), "The config Hydra composed"))

    train()
{% endif %}
{% if cookiecutter.argparser != "hydra" %}


def load_config(path: str | Path, **overrides: Any) -> SimpleNamespace:
    """Read the YAML config and apply command-line overrides, refusing unknown and missing keys."""
    with open(path) as f:
        config = yaml.safe_load(f) or {}
    known = set(config) | set(TEMPLATE_CONFIG)
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise SystemExit(f"Unknown config keys {unknown}; the config keys are {sorted(known)}")
    config.update(overrides)
    return checked_config(config, str(path))
{% endif %}


def checked_config(config: dict[str, Any], source: str) -> SimpleNamespace:
    """The config as attributes, once it has every key the code reads: else stop, naming all it lacks."""
    missing = {key: value for key, value in TEMPLATE_CONFIG.items() if key not in config}
    if missing:
        raise SystemExit(
            f"{source} lacks keys that this project reads: {', '.join(missing)}. Add them, for example "
            f"with the values this project was generated with:\n{yaml.safe_dump(missing, sort_keys=False)}"
        )
    return SimpleNamespace(**config)


{% if not flags.xla %}
def check_backend(backend: str | None) -> None:
    """Fail early, with a fix, when the chosen backend cannot run on this machine."""
    if backend == "nccl" and not torch.cuda.is_available():
        # The fix in this script's own command-line syntax: the last backend given wins.
        raise SystemExit(
            "backend 'nccl' needs a CUDA GPU, and none is visible here. Train on the CPU "
            "with backend 'gloo' instead: add `{{ backend_arg("gloo") }}` at the end of the command."
        )


{% endif %}
{% if flags.xla %}
def launch(run: RunFn, config: SimpleNamespace) -> None:
    """Start one replica per TPU device and call ``run(local_rank, config)`` in each.

    Not ``idist.Parallel(backend="xla-tpu", nproc_per_node=8)``: ignite would call ``xmp.spawn(nprocs=8)``,
    which PJRT refuses (torch_xla >= 2.6 takes one replica per device or 1). ``torch_xla.launch`` starts
    one per device, and each replica compares the count with ``nproc_per_node``.
    """
    torch_xla.launch(_xla_replica, args=(run, config))


def _xla_replica(_index: int, run: RunFn, config: SimpleNamespace) -> None:
    # torch_xla.launch passes the replica's index first; ignite finds it itself. ignite joins the running
    # replica: no nproc_per_node here, which would spawn again.
    with idist.Parallel(backend="xla-tpu") as parallel:
        parallel.run(run, config)
{% else %}
def launch(run: RunFn, config: SimpleNamespace) -> None:
    """Call ``run(local_rank, config)`` in every training process."""
    check_backend(config.backend)
{% if cookiecutter.__launcher == "spawn" %}
    # This script starts the processes itself; with no backend it runs as one process.
    spawn_kwargs = {}
    if config.backend is not None:
        spawn_kwargs = {
            "nproc_per_node": config.nproc_per_node,
            "nnodes": config.nnodes,
            "node_rank": config.node_rank,
            "master_addr": config.master_addr,
            "master_port": config.master_port,
        }
    with idist.Parallel(backend=config.backend, **spawn_kwargs) as parallel:
        parallel.run(run, config)
{% else %}
    # torchrun (or no launcher at all) has already started the processes: ignite joins them.
    with idist.Parallel(backend=config.backend) as parallel:
        parallel.run(run, config)
{% endif %}
{% endif %}


{% if flags.xla %}
def device_loaders(*loaders: Any) -> list[Any]:
    """Wrap loaders in torch_xla's MpDeviceLoader where ignite has not (it does for several replicas only).

    The device loader copies the next batches to the TPU while a step runs (the step ends its own lazy
    graph: see training_engine).
    """
    if idist.get_world_size() > 1:
        return list(loaders)
    return [pl.MpDeviceLoader(loader, idist.device()) for loader in loaders]


{% endif %}
{% if flags.xla %}
def log_world(config: SimpleNamespace, logger: logging.Logger) -> None:
    """Log where training runs; say so when the TPU device count differs from nproc_per_node."""
{% else %}
def log_world(logger: logging.Logger) -> None:
    """Log where training runs."""
{% endif %}
    world_size = idist.get_world_size()
    logger.info("World size: %d, backend: %s, device: %s", world_size, idist.backend(), idist.device())
{% if flags.xla %}
    if world_size != config.nproc_per_node:
        # Colab's TPUs (v5e-1, v6e-1) have one chip: training goes on, on what is there.
        logger.warning(
            "Expected %d TPU replicas (nproc_per_node) but this runtime has %d device(s): training on %d "
            "replica(s). A TPU v5e-1 (Colab) has one chip; Kaggle's TPU v5e-8 and 8-chip TPU VMs have eight.",
            config.nproc_per_node,
            world_size,
            world_size,
        )
{% endif %}


def setup_run_dir(config: SimpleNamespace) -> Path:
    """Create a fresh run directory under ``output_dir`` and save the config there (rank 0)."""
    run_dir = ""
    if idist.get_rank() == 0:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        path = Path(config.output_dir) / f"{stamp}-{config.backend or 'single'}"
        suffix = 1
        while path.exists():  # two runs started in the same second
            suffix += 1
            path = Path(config.output_dir) / f"{stamp}-{config.backend or 'single'}-{suffix}"
        path.mkdir(parents=True)
        with open(path / "config-lock.yaml", "w") as f:
            yaml.safe_dump(vars(config), f, sort_keys=False)
        run_dir = path.as_posix()
    # Every process needs the same path, chosen once by rank 0.
    return Path(idist.broadcast(run_dir, src=0))


class _AboveProgressBar:
    """The log's console stream: each record goes above the live progress bar, on a line of its own.

    Written straight to stderr, a record would land in the middle of the bar's line and leave a stale
    copy of the bar above.
    """

    def write(self, text: str) -> None:
        # tqdm.write clears the bar, prints, then draws the bar again below.
        tqdm.write(text, file=sys.stderr, end="")

    def flush(self) -> None:
        sys.stderr.flush()


def setup_logging(run_dir: Path) -> logging.Logger:
    """Log to the console and to ``training.log`` in the run directory, on rank 0 only."""
    for handler in logging.getLogger("train").handlers:
        handler.close()  # a previous run's training.log, in this process (see reset below)
    return setup_logger(
        name="train",
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
        stream=_AboveProgressBar(),
        filepath=run_dir / "training.log",
        distributed_rank=idist.get_rank(),
        # A second run in the same process (a notebook, a test) logs to its own run directory: without
        # reset, ignite hands back the first run's logger, still writing to the first training.log.
        reset=True,
    )


def log_metrics(logger: logging.Logger, epoch: int, tag: str, metrics: dict[str, float]) -> None:
    """Log metrics on one line, e.g. ``Epoch 2 - eval: accuracy=0.5100 loss=1.2000``."""
    values = " ".join(f"{name}={value:.4f}" for name, value in metrics.items())
    logger.info("Epoch %d - %s: %s", epoch, tag, values)


class StepLosses(NamedTuple):
    """The trainer's output: the names of the training step's losses, and their values in one float32 vector."""

    names: tuple[str, ...]
    values: torch.Tensor


def training_engine(train_step: Callable[[Engine, Any], dict[str, torch.Tensor]], train_loader: Any) -> Engine:
    """The engine that runs ``train_step`` on each batch, with a new shuffle of the data each epoch.

    ``train_step`` returns its losses as a dict of tensors; the engine's output stacks them into one
    vector, on the device, so that ``setup_handlers`` reads them all in one transfer.
    """

    def step(engine: Engine, batch: Any) -> StepLosses:
        losses = train_step(engine, batch)
        values = torch.stack([value.detach().float() for value in losses.values()])
{% if flags.xla %}
        # The step's graph ends here, the stacked losses in it: every step runs the same compiled program,
        # and reading the losses or the weights (logging, checkpoints) at any iteration is a transfer,
        # never a program of its own.
        torch_xla.sync()
{% endif %}
        return StepLosses(tuple(losses), values)

{% if cookiecutter.deterministic %}
    # DeterministicEngine reseeds the random generators per epoch (data order, dropout, noise), so a
    # resumed run sees the same batches.
    trainer = DeterministicEngine(step)
{% else %}
    trainer = Engine(step)
{% endif %}
    # A device loader wraps the DataLoader; the sampler is on the DataLoader.
    sampler = getattr(getattr(train_loader, "_loader", train_loader), "sampler", None)
    if isinstance(sampler, DistributedSampler):
        # Each epoch gets its own shuffle, the same on every process.
        trainer.add_event_handler(Events.EPOCH_STARTED, lambda engine: sampler.set_epoch(engine.state.epoch - 1))
    return trainer


def setup_handlers(
    trainer: Engine,
{% if flags.watch_evaluator %}
    evaluator: Engine,
{% endif %}
    config: SimpleNamespace,
{% if flags.save_checkpoints %}
    run_dir: Path,
{% endif %}
{% if cookiecutter.save_training %}
    to_save: dict[str, Any],
{% endif %}
{% if flags.save_best %}
    model: torch.nn.Module,
{% endif %}
) -> None:
    """Attach loss logging, progress bar, checkpoints and the optional stopping rules.

    Stands in for ignite's ``common.setup_common_training_handlers``, whose ``TerminateOnNan`` and
    ``RunningAverage`` read the step's output every iteration: on a TPU each read waits for the device.
    Here the losses are read every ``log_every_iters`` iterations and the NaN check uses those values.
    """
    # The training step returns its losses as one vector that stays on the device (training_engine). It
    # is read here, once every `log_every_iters` iterations and in one transfer (each read waits for
    # the device), into `trainer.state.metrics` for everything that shows them.
    every = Events.ITERATION_COMPLETED(every=config.log_every_iters)
{% if flags.loss_history %}
    # Every value read, as (iteration, {name: value}), for the loss plot. It is part of the trainer's
    # state, so a run resumed from a training checkpoint plots what came before the resume too.
    trainer.state.loss_history = []
    trainer.state_dict_user_keys.append("loss_history")

    @trainer.on(Events.STARTED)
    def drop_history_ahead(engine: Engine) -> None:
        # A finished run started again restarts at iteration 0: its old points would be plotted twice.
        engine.state.loss_history = [point for point in engine.state.loss_history if point[0] <= engine.state.iteration]
{% endif %}

    @trainer.on(every)
    def read_losses(engine: Engine) -> None:
        output = engine.state.output
        values = dict(zip(output.names, output.values.tolist(), strict=True))
        engine.state.metrics.update(values)
{% if flags.loss_history %}
        engine.state.loss_history.append((engine.state.iteration, values))
{% endif %}
        losses = " ".join(f"{name}={value:.4f}" for name, value in values.items())
        engine.logger.info("Epoch %d - iteration %d: %s", engine.state.epoch, engine.state.iteration, losses)

    if idist.get_rank() == 0:
        # The bar moves every iteration and shows the losses last read: it reads nothing from the device.
        ProgressBar(persist=True).attach(trainer, metric_names="all")
{% if cookiecutter.terminate_on_nan %}
    # Checks the values just read: no extra device read.
    terminate_on_nan = TerminateOnNan(lambda output: [trainer.state.metrics[name] for name in output.names])
    terminate_on_nan.logger = trainer.logger  # why training stopped goes to training.log too
    trainer.add_event_handler(every, terminate_on_nan)
{% endif %}
{% if cookiecutter.save_training %}
    # Training state at a fixed interval and at every epoch end, so a run can resume.
    save_training = Checkpoint(
        to_save,
        DiskSaver(run_dir, require_empty=False),
        filename_prefix=config.filename_prefix,
        n_saved=config.n_saved,
    )
    trainer.add_event_handler(
        Events.ITERATION_COMPLETED(
            event_filter=lambda engine, it: it % config.save_every_iters == 0 or it % engine.state.epoch_length == 0
        ),
        save_training,
    )
{% endif %}
{% if flags.save_best %}
    save_best = Checkpoint(
        {"model": model},
        DiskSaver(run_dir, require_empty=False),
        filename_prefix="best",
        score_function=Checkpoint.get_default_score_fn("{{ flags.eval_metric }}"),
        score_name="{{ flags.eval_metric }}",
        n_saved=config.n_saved,
        global_step_transform=global_step_from_engine(trainer),
    )
    evaluator.add_event_handler(Events.COMPLETED, save_best)
{% endif %}
{% if flags.early_stopping %}
    stopper = EarlyStopping(
        config.patience, score_function=lambda engine: engine.state.metrics["{{ flags.eval_metric }}"], trainer=trainer
    )
    stopper.logger = trainer.logger
    evaluator.add_event_handler(Events.COMPLETED, stopper)
{% endif %}
{% if cookiecutter.limit_sec | int > 0 %}
    time_limit = TimeLimit(config.limit_sec)
    time_limit.logger = trainer.logger
    trainer.add_event_handler(Events.ITERATION_COMPLETED, time_limit)
{% endif %}
{% if cookiecutter.timer %}
    timer = Timer(average=True)
    timer.attach(trainer, step=Events.ITERATION_COMPLETED)

    @trainer.on(Events.EPOCH_COMPLETED)
    def log_iteration_time(engine: Engine) -> None:
        engine.logger.info("Epoch %d - %.4f s per iteration", engine.state.epoch, timer.value())
{% endif %}
{% if cookiecutter.save_training %}

    @trainer.on(Events.COMPLETED)
    def log_last_checkpoint(engine: Engine) -> None:
        engine.logger.info("Last training checkpoint: %s", save_training.last_checkpoint)
{% endif %}


def resume_from(to_load: dict[str, Any], checkpoint_path: str | Path, logger: logging.Logger) -> None:
    """Restore objects (model, optimizer, trainer state, ...) from a checkpoint file."""
    path = Path(checkpoint_path)
    if not path.is_file():
        raise FileNotFoundError(f"resume_from: no checkpoint file at {path}")
{% if cookiecutter.deterministic %}
    # DeterministicEngine saves NumPy's random state with the trainer: allow exactly the types of its
    # array (the function NumPy unpickles an array with, the array, its dtype and dtype class).
    numpy_key = np.random.get_state()[1]
    torch.serialization.add_safe_globals([numpy_key.__reduce__()[0], np.ndarray, np.dtype, type(numpy_key.dtype)])
{% endif %}
    # weights_only: tensors and plain Python values only. A checkpoint from someone else can then hold
    # no code that loading it would run.
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
{% if flags.loss_history %}
    if isinstance(checkpoint.get("trainer"), dict):
        # A checkpoint written before the trainer kept its loss history: resume with an empty one.
        checkpoint["trainer"].setdefault("loss_history", [])
{% endif %}
    Checkpoint.load_objects(to_load=to_load, checkpoint=checkpoint)
    logger.info("Resumed from %s", path)
{% if cookiecutter.logger == "visdom" %}


class PersistentVisdomLogger(VisdomLogger):
    """A VisdomLogger whose ``close()`` leaves the plots on the server, saved with their last points.

    ignite 0.5.5's ``close()`` calls ``Visdom.close()``, which closes every window of the environment,
    and the environment was last saved while the final plot updates could still be on their way.
    """

    def close(self) -> None:
        self.executor.shutdown()  # waits for the plot updates still being sent
        self.vis.save([self.vis.env])
{% endif %}
{% if cookiecutter.logger != "none" %}


def setup_tracking(
    trainer: Engine,
{% if flags.eval_metric %}
    evaluator: Engine,
{% endif %}
    optimizers: dict[str, torch.optim.Optimizer],
    config: SimpleNamespace,
    run_dir: Path,
) -> {{ flags.tracker_class }}:
    """Send the config, training losses, learning rates{{ " and eval metrics" if flags.eval_metric }} to {{ flags.tracker_name }} (call on rank 0).

    Every curve is plotted against the training iteration: the trainer's metrics (the losses that
    ``setup_handlers`` reads) and each optimizer's learning rate every ``log_every_iters``
    iterations, the eval metrics at the end of each epoch. The run is named after the run directory.
    Not ignite's ``setup_*_logging`` helpers: they plot eval metrics against the epoch (except for W&B)
    beside losses against the iteration, and record neither the run's name nor its config.
    """
{% if cookiecutter.logger == "clearml" %}
    # Credentials come from `clearml-init` (~/clearml.conf) or the CLEARML_API_* variables;
    # CLEARML_OFFLINE_MODE=1 records the run on this machine instead.
    tracker = ClearMLLogger(
        project_name={{ cookiecutter.project_slug | tojson }},
        task_name=run_dir.name,
    )
    tracker.get_task().connect(vars(config), name="config")
{% elif cookiecutter.logger == "mlflow" %}
    # MLFLOW_TRACKING_URI names a tracking server; without it, runs go to an SQLite file in output_dir.
    local_store = f"sqlite:///{(Path(config.output_dir) / 'mlflow.db').resolve().as_posix()}"
    tracker = MLflowLogger(tracking_uri=os.environ.get("MLFLOW_TRACKING_URI", local_store))
    tracker.set_tag("mlflow.runName", run_dir.name)
    tracker.log_params(vars(config))
{% elif cookiecutter.logger == "neptune" %}
    # NEPTUNE_API_TOKEN and NEPTUNE_PROJECT say where the run goes; NEPTUNE_MODE=offline keeps it on this machine.
    tracker = NeptuneLogger(name=run_dir.name)
    tracker["config"] = stringify_unsupported(vars(config))
{% elif cookiecutter.logger == "polyaxon" %}
    # Inside a Polyaxon job the run is Polyaxon's; elsewhere POLYAXON_HOST names the server, or
    # POLYAXON_IS_OFFLINE=true records the run under POLYAXON_OFFLINE_ROOT.
    tracker = PolyaxonLogger(
        project={{ cookiecutter.project_slug | tojson }},
        name=run_dir.name,
    )
    tracker.log_inputs(**vars(config))
{% elif cookiecutter.logger == "tensorboard" %}
    tracker = TensorboardLogger(log_dir=run_dir / "tensorboard")
    tracker.writer.add_text("config", f"```yaml\n{yaml.safe_dump(vars(config), sort_keys=False)}```")
{% elif cookiecutter.logger == "visdom" %}
    # Needs a running server: `python -m visdom.server`, or VISDOM_SERVER_URL and VISDOM_PORT.
    tracker = PersistentVisdomLogger(env=run_dir.name)
    config_text = html.escape(yaml.safe_dump(vars(config), sort_keys=False))
    tracker.vis.text(f"<pre>{config_text}</pre>", win="config", opts={"title": "config"})
{% elif cookiecutter.logger == "wandb" %}
    # `wandb login` (or WANDB_API_KEY) once; WANDB_MODE=offline keeps the run here for `wandb sync`.
    tracker = WandBLogger(
        project={{ cookiecutter.project_slug | tojson }},
        name=run_dir.name,
        config=vars(config),
        dir=run_dir,
    )
{% endif %}
    every = config.log_every_iters
    tracker.attach_output_handler(
        trainer, event_name=Events.ITERATION_COMPLETED(every=every), tag="train", metric_names="all"
    )
    for name, optimizer in optimizers.items():
        # At the iteration's start: the learning rate that iteration trains with.
        tracker.attach_opt_params_handler(
            trainer, event_name=Events.ITERATION_STARTED(every=every), optimizer=optimizer, tag=name
        )
{% if flags.eval_metric %}
    # At the trainer's iteration too, not its epoch: W&B refuses a step below one already logged.
    tracker.attach_output_handler(
        evaluator,
        event_name=Events.COMPLETED,
        tag="eval",
        metric_names="all",
        global_step_transform=global_step_from_engine(trainer, Events.ITERATION_COMPLETED),
    )
{% endif %}
    return tracker
{% endif %}
{% if flags.xla %}


def _xla_count(name: str) -> int:
    data = met.metric_data(name)
    return 0 if data is None else data[0]


def setup_xla_metrics(trainer: Engine, run_dir: Path, logger: logging.Logger) -> None:
    """Count XLA compilations and device-to-host transfers per epoch; write ``xla_metrics.json``.

    A healthy XLA loop stops compiling after the first epoch or two and reads from the device only
    at the logging interval. Training and the work at each epoch end (evaluation, samples) are
    counted apart: attach this before the epoch-end handlers, so that its epoch-end count runs first.
    """
    counts: dict[str, list[int]] = {
        "compilations_per_epoch": [],
        "device_to_host_transfers_per_epoch": [],
        "eval_compilations_per_epoch": [],
        "eval_device_to_host_transfers_per_epoch": [],
    }
    mark = {}

    def now() -> tuple[int, int]:
        return _xla_count("CompileTime"), _xla_count("TransferFromDeviceTime")

    def record(prefix: str, since: tuple[int, int]) -> None:
        compiles, transfers = now()
        counts[f"{prefix}compilations_per_epoch"].append(compiles - since[0])
        counts[f"{prefix}device_to_host_transfers_per_epoch"].append(transfers - since[1])

    @trainer.on(Events.EPOCH_STARTED)
    def start_epoch() -> None:
        if "eval" in mark:  # the previous epoch's evaluation has ended
            record("eval_", mark.pop("eval"))
        mark["train"] = now()

    @trainer.on(Events.EPOCH_COMPLETED)
    def end_epoch() -> None:
        record("", mark.pop("train"))
        mark["eval"] = now()

    @trainer.on(Events.COMPLETED)
    def write() -> None:
        if "eval" in mark:
            record("eval_", mark.pop("eval"))
        if idist.get_rank() == 0:
            (run_dir / "xla_metrics.json").write_text(json.dumps(counts, indent=2) + "\n")
            logger.info(
                "XLA training: compilations per epoch %s, device-to-host transfers per epoch %s",
                counts["compilations_per_epoch"],
                counts["device_to_host_transfers_per_epoch"],
            )
{% endif %}
