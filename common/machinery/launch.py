{% import "flags.j2" as flags with context %}
{% from "commands.j2" import backend_arg with context %}
"""The command line and the training processes: the config read, then ``run`` called in every process."""

{% if flags.spawn_here %}
import multiprocessing
{% endif %}
{% if cookiecutter.argparser == "hydra" %}
import sys
{% elif cookiecutter.argparser == "argparse" %}
from argparse import ArgumentParser
{% endif %}
from collections.abc import Callable
{% if flags.spawn_here %}
from multiprocessing.sharedctypes import Synchronized
{% endif %}
{% if cookiecutter.argparser != "fire" %}
from pathlib import Path
{% endif %}
from typing import Any

{% if cookiecutter.argparser == "fire" %}
import fire
{% elif cookiecutter.argparser == "hydra" %}
import hydra
{% endif %}
{% if not flags.xla or cookiecutter.argparser == "hydra" %}
import ignite.distributed as idist
{% endif %}
{% if not flags.xla %}
import torch
{% endif %}
{% if cookiecutter.argparser == "hydra" %}
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
{% endif %}
{% if not flags.xla or cookiecutter.argparser != "argparse" %}

{% endif %}
{% if flags.xla and cookiecutter.argparser == "hydra" %}
from machinery.runs.preemption import asked_to_stop, exit_status
{% elif not flags.xla %}
from machinery.runs.directory import run_recorded
from machinery.runs.preemption import {{ "STOP, " if flags.spawn_here }}{{ "asked_to_stop, " if cookiecutter.argparser == "hydra" }}catch_stop_signals, end_process, exit_status
{% endif %}
from machinery.settings import RunSettings, {{ "checked_config" if cookiecutter.argparser == "hydra" else "load_config" }}
{% if flags.xla %}

# Importing xla also adds back the torch_xla names ignite 0.5.5 calls (see xla.py).
from machinery.tpu.xla import launch
{% endif %}

{% if cookiecutter.argparser == "argparse" %}
BACKENDS = ({{ '"xla-tpu",' if flags.xla else '"nccl", "gloo"' }})
{% endif %}
# The function each training process runs: main.py's ``run(local_rank, config)``, config a ``config.Config``.
RunFn = Callable[[int, Any], None]
ConfigClass = type[RunSettings]  # config.py's Config


{% if cookiecutter.argparser == "argparse" %}
def cli(run: RunFn, config_class: ConfigClass) -> None:
    """Train from the command line: ``python main.py config.yaml [--backend BACKEND]``."""
    parser = ArgumentParser(description="Train with PyTorch-Ignite.")
    parser.add_argument("config", type=Path, help="path to the YAML config, e.g. config.yaml")
    parser.add_argument("--backend", choices=BACKENDS, help="distributed backend (default: the config's)")
    args = parser.parse_args()
    overrides = {} if args.backend is None else {"backend": args.backend}
    launch(run, load_config(args.config, config_class, **overrides))
{% elif cookiecutter.argparser == "fire" %}
def cli(run: RunFn, config_class: ConfigClass) -> None:
    """Train from the command line with Python Fire."""

    def train(config: str = "config.yaml", **overrides: Any) -> None:
        """Train: ``python main.py config.yaml --key=value ...`` overrides any config key."""
        launch(run, load_config(config, config_class, **overrides))

    fire.Fire(train)
{% else %}
def cli(run: RunFn, config_class: ConfigClass) -> None:
    """Train with Hydra: ``python main.py key=value ...``; with ``-m lr=0.001,0.01``, one run per job, in turn."""
    failed: list[str] = []  # the jobs of a multirun that failed, and why

    # An absolute config path: Hydra would resolve a relative one against this module's package.
    @hydra.main(version_base="1.3", config_path=str(Path(__file__).resolve().parents[1]), config_name="config")
    def train(cfg: DictConfig) -> None:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            train_job(run, config_class, cfg, failed)
        else:
            launch(run, composed(cfg, config_class))

    try:
        train()  # with -m, Hydra's loop over the jobs: one that fails is named, and the next one starts
        status = exit_status()
    except SystemExit as end:  # a stop, a failed job (Hydra has named it), a config refused
        if end.code is not None and not isinstance(end.code, int):
            print(end.code, file=sys.stderr)  # a message: Python's exit would print it, with status 1
        status = end.code if isinstance(end.code, int) else int(end.code is not None)
    idist.finalize()  # the process group the jobs shared, if any
    if failed:  # Hydra names the first only
        print(f"{len(failed)} of the multirun's jobs failed:", *failed, sep="\n  ", file=sys.stderr)
    # The process ends once Hydra's loop over the jobs has returned{{ "" if flags.xla else " (end_process: gloo's threads)" }}.
    {{ "raise SystemExit(status)" if flags.xla else "end_process(status)" }}


def composed(cfg: DictConfig, config_class: ConfigClass) -> RunSettings:
    """The config Hydra composed (config.yaml and the command's overrides), checked as a config file is."""
    return checked_config(OmegaConf.to_container(cfg, resolve=True), "The config Hydra composed", config_class)


def train_job(run: RunFn, config_class: ConfigClass, cfg: DictConfig, failed: list[str]) -> None:
    """Train one job of a multirun (``-m``). A failed job fails alone (with several processes in torchrun's group, it
    ends the multirun). A stop ends the multirun after the job's checkpoint; the same command then continues it."""
    job = f"#{HydraConfig.get().job.num} ({' '.join(HydraConfig.get().overrides.task)})"
    try:
        config = composed(cfg, config_class)
        {{ "launch" if flags.xla else "train_processes" }}(run, config)
    except SystemExit as end:  # it would end Hydra's loop over the jobs
        if end.code and not asked_to_stop():  # a config or a run directory this job cannot use: its failure
            failed.append(f"{job}: {end.code}")
            raise RuntimeError(end.code) from None
        # else a stop (below), or its run had finished: nothing to train
    except Exception as error:
        failed.append(f"{job}: {type(error).__name__}: {error}")
        if idist.get_world_size() > 1:  # the other processes may be waiting for this one: no job can follow
            raise SystemExit(1) from error
        raise  # Hydra records the job as failed and starts the next one
    if asked_to_stop():  # stopped with a checkpoint: the jobs after it wait for the same command
        raise SystemExit(exit_status())
{% endif %}
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
{% if not flags.xla %}


def launch(run: RunFn, config: RunSettings) -> None:
    """Call ``run(local_rank, config)`` in every training process, then end this one (end_process)."""
    try:
        train_processes(run, config)
    finally:
        idist.finalize()  # the process group, if any: what ignite does once ``run`` returns
    end_process(exit_status())  # 128 + the signal's number after a stop
{% endif %}
{% if flags.spawn_here %}


def train_processes(run: RunFn, config: RunSettings) -> None:
    """Call ``run(local_rank, config)`` in every training process, started here."""
    check_backend(config.backend)
    spawn_kwargs = {}
    if config.backend is not None:
        spawn_kwargs = {
            "nproc_per_node": config.nproc_per_node,
            "nnodes": config.nnodes,
            "node_rank": config.node_rank,
            "master_addr": config.master_addr,
            "master_port": config.master_port,
        }
    catch_stop_signals()  # a stop signal is forwarded to the processes started here (preemption.py)
    # The signal that stopped a training process but maybe not this one: the command exits with it too (spawn context).
    stopped_by = multiprocessing.get_context("spawn").Value("i", 0)
    with idist.Parallel(backend=config.backend, **spawn_kwargs) as parallel:
        parallel.run(train_process, run, config, stopped_by)
    if STOP.signum is None and stopped_by.value:
        STOP.signum = stopped_by.value


def train_process(local_rank: int, run: RunFn, config: RunSettings, stopped_by: Synchronized) -> None:
    """``run`` in one training process; a process started by ``train_processes`` then ends (end_process)."""
    run_recorded(local_rank, run, config)
    if STOP.signum is not None:
        stopped_by.value = STOP.signum
    if config.backend is not None:  # else this is the command's own process, which goes on
        idist.finalize()  # what ignite does once ``run`` returns
        end_process(0)  # the command's process, which started this one, reports a stop with its own status
{% elif not flags.xla %}


def train_processes(run: RunFn, config: RunSettings) -> None:
    """Call ``run(local_rank, config)`` in every training process: this one (and torchrun's others). The group outlives
    the run (``launch`` ends it) for a multirun's jobs: a new one would meet the last's keys in torchrun's store
    and could connect to addresses no longer listened on."""
    check_backend(config.backend)
    catch_stop_signals()  # torchrun forwards a stop signal to each process (preemption.py)
    if idist.backend() != config.backend:  # the command's first run (or a multirun's grid changed the backend)
        idist.finalize()
        # torchrun (or no launcher at all) has already started the processes: ignite joins them.
        if config.backend is not None:
            idist.initialize(config.backend)
    with idist.Parallel() as parallel:  # the group as it is
        parallel.run(run_recorded, run, config)
{% endif %}
