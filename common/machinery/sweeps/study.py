"""A sweep's study, in a database (an SQLite file in output_dir, or any SQLAlchemy URL: PostgreSQL for several
machines), opened with a heartbeat: ``sweep_cli``, sweep.py's command line. Its URL is read from the environment or a
file, never written anywhere (it may hold a password)."""

import json
import os
import sys
import warnings
from argparse import ArgumentParser
from pathlib import Path

import optuna
from optuna.storages import RDBStorage
from sqlalchemy.engine import make_url

from machinery.settings import HYDRA_KEYS, RunSettings, checked_config
from machinery.sweeps.pruning import STORAGE_ENV, make_pruner
from machinery.sweeps.report import write_report
from machinery.sweeps.space import SweepSettings, load_sweep
from machinery.sweeps.worker import retry_callback, work

# The heartbeat, its retry and fail_stale_trials are "experimental" since Optuna 2.8-2.9, unchanged since: not news.
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def sweep_cli(config_class: type[RunSettings]) -> None:
    """Run a sweep from the command line: ``python sweep.py sweep.yaml [--storage-file FILE]``."""
    parser = ArgumentParser(description="Tune the training config: a study of trials, each a training run.")
    parser.add_argument("sweep", type=Path, help="the sweep's settings, e.g. sweep.yaml")
    parser.add_argument(
        "--storage-file", type=Path, help=f"a file whose first line is the study's database URL (else ${STORAGE_ENV})"
    )
    args = parser.parse_args()
    settings, config = load_sweep(args.sweep, config_class)
    checked_config({k: v for k, v in config.items() if k not in HYDRA_KEYS}, settings.config, config_class)
    study_dir = Path(config["output_dir"]) / "sweeps" / settings.study
    url = storage_url(args.storage_file, study_dir)
    study = open_study(settings, url, config["score"], args.sweep)
    text = (args.sweep.parent / settings.config).read_text()
    status = work(study, settings, text, study_dir, url)
    if status == 0:
        write_report(study, study_dir, text, config["output_dir"], settings.command)
    sys.exit(status)


def storage_url(storage_file: Path | None, study_dir: Path) -> str:
    """The study's database: the URL in ``storage_file``, else in $OPTUNA_STORAGE, else an SQLite file in study_dir."""
    if storage_file is not None:
        try:
            return storage_file.read_text().strip().splitlines()[0]
        except (OSError, IndexError) as error:
            raise SystemExit(f"--storage-file {storage_file}: no database URL there ({error})") from None
    if os.environ.get(STORAGE_ENV):
        return os.environ[STORAGE_ENV]
    study_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(study_dir / 'study.db').resolve()}"


def shown(url: str) -> str:
    """``url`` as a log or an error may show it: its password, if any, masked."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "the database URL given (it does not parse)"


def open_study(settings: SweepSettings, url: str, score: str, path: Path) -> optuna.Study:
    """The study (made if new), with a heartbeat; stop, naming the database or the file, if it cannot serve."""
    direction = "minimize" if score.startswith("-") else "maximize"
    pruner = make_pruner(settings.pruning, settings.startup_trials, settings.warmup_epochs)
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # the worker logs each trial itself
    try:
        storage = RDBStorage(
            url, heartbeat_interval=settings.heartbeat_interval, heartbeat_stale_trial_callback=retry_callback()
        )
        study = optuna.create_study(
            study_name=settings.study, storage=storage, direction=direction, pruner=pruner, load_if_exists=True
        )
    except Exception as error:  # an unreachable server, a refused login, a missing driver, a malformed URL
        password = make_url(url).password if "://" in url else None
        reason = str(error).splitlines()[0].replace(str(password), "***") if password else str(error).splitlines()[0]
        raise SystemExit(f"The study's database {shown(url)} cannot be used: {reason}") from None
    space = json.loads(json.dumps(settings.space))  # as the database keeps it
    kept = study.user_attrs.get("space")
    if kept is None:
        study.set_user_attr("space", space)
        study.set_user_attr("score", score.removeprefix("-"))  # the pictures' axis
    elif kept != space or study.direction.name.lower() != direction:
        raise SystemExit(
            f"The study {settings.study!r} in {shown(url)} has another search space or direction ({kept}, "
            f"{study.direction.name.lower()}) than {path} ({space}, {direction}, from score). Nothing was changed: "
            f"give {path} another study name, or the study's space."
        )
    return study
