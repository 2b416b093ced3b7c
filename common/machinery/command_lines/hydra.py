"""The command line (Hydra): ``python main.py key=value ...``, any config key set for this command; with ``-m``, a
grid of runs (a multirun), one after another."""

import sys
from pathlib import Path

import hydra
import ignite.distributed as idist
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from machinery.config_files import checked_config
from machinery.launch import ConfigClass, RunFn, end_command, launch, train_processes
from machinery.runs.preemption import asked_to_stop, exit_status
from machinery.settings import RunSettings

OVERRIDE = "++{key}={value}"  # how this command line sets a key, in the advice a check gives


def cli(run: RunFn, config_class: ConfigClass) -> None:
    """Train with Hydra: ``python main.py key=value ...``; with ``-m lr=0.001,0.01``, one run per job, in turn."""
    failed: list[str] = []  # the jobs of a multirun that failed, and why

    # An absolute config path: Hydra would resolve a relative one against this module's package.
    @hydra.main(version_base="1.3", config_path=str(Path(__file__).resolve().parents[1]), config_name="config")
    def train(cfg: DictConfig) -> None:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            train_job(run, config_class, cfg, failed)
        else:
            launch(run, composed(cfg, config_class), OVERRIDE)

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
    # The process ends once Hydra's loop over the jobs has returned.
    end_command(status, config_class.model_fields["backend"].default)


def composed(cfg: DictConfig, config_class: ConfigClass) -> RunSettings:
    """The config Hydra composed (config.yaml and the command's overrides), checked as a config file is."""
    return checked_config(OmegaConf.to_container(cfg, resolve=True), "The config Hydra composed", config_class)


def train_job(run: RunFn, config_class: ConfigClass, cfg: DictConfig, failed: list[str]) -> None:
    """Train one job of a multirun (``-m``). A failed job fails alone (with several processes in torchrun's group, it
    ends the multirun). A stop ends the multirun after the job's checkpoint; the same command then continues it."""
    job = f"#{HydraConfig.get().job.num} ({' '.join(HydraConfig.get().overrides.task)})"
    try:
        train_processes(run, composed(cfg, config_class), OVERRIDE)
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
