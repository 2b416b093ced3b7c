"""A sweep's study, in a database (an SQLite file in output_dir, or any SQLAlchemy URL: PostgreSQL for several
machines), opened with a heartbeat: ``sweep_cli``, sweep.py's command line. Its URL is read from the environment or a
file, never written anywhere (it may hold a password)."""

import json
import os
import sys
import time
import warnings
from argparse import ArgumentParser
from pathlib import Path

import optuna
from optuna.storages import RDBStorage
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from machinery.config_files import HYDRA_KEYS, checked_config
from machinery.settings import RunSettings
from machinery.sweeps.report import write_report
from machinery.sweeps.space import STORAGE_ENV, SweepSettings, load_sweep, make_pruner
from machinery.sweeps.worker import continue_later, work

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
    study, storage = open_study(settings, url, config["score"], args.sweep)
    text = (args.sweep.parent / settings.config).read_text()
    status = work(study, storage, settings, text, study_dir, url)
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


def open_study(settings: SweepSettings, url: str, score: str, path: Path) -> tuple[optuna.Study, RDBStorage]:
    """The study (made if new) and its storage, with the study's heartbeat; stop, naming the database or the file, if
    it cannot serve. Every worker beats at the interval the study was made with: one checks another's by its own."""
    direction = "minimize" if score.startswith("-") else "maximize"
    pruner = make_pruner(settings.pruning, settings.startup_trials, settings.warmup_epochs)
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # the worker logs each trial itself
    study, storage = _connect(settings, url, settings.heartbeat_interval, direction, pruner)
    space = json.loads(json.dumps(settings.space))  # as the database keeps it
    kept = study.user_attrs.get("space")
    if kept is None:
        study.set_user_attr("space", space)
        study.set_user_attr("score", score.removeprefix("-"))  # the pictures' axis
        study.set_user_attr("heartbeat_interval", settings.heartbeat_interval)
    elif kept != space or study.direction.name.lower() != direction:
        raise SystemExit(
            f"The study {settings.study!r} in {shown(url)} has another search space or direction ({kept}, "
            f"{study.direction.name.lower()}) than {path} ({space}, {direction}, from score). Nothing was changed: "
            f"give {path} another study name, or the study's space."
        )
    interval = study.user_attrs.get("heartbeat_interval", settings.heartbeat_interval)
    if interval != settings.heartbeat_interval:
        print(f"The study's heartbeat_interval is {interval} s (its first worker's): {path}'s is not used.", flush=True)
        study, storage = _connect(settings, url, interval, direction, pruner)
    return study, storage


def _connect(
    settings: SweepSettings, url: str, heartbeat: int, direction: str, pruner: optuna.pruners.BasePruner
) -> tuple[optuna.Study, RDBStorage]:
    """The study in the database at ``url``, made if new; or stop, naming the database (its password masked)."""
    try:
        password = make_url(url).password
    except Exception:  # its message would show the URL, password and all
        raise SystemExit(
            f"The study's database URL (${STORAGE_ENV} or --storage-file) is not an SQLAlchemy URL, such as "
            "sqlite:///path/study.db or postgresql+psycopg://user:password@host/database"
        ) from None
    try:
        for attempt in range(3):
            try:
                storage = RDBStorage(url, heartbeat_interval=heartbeat, heartbeat_stale_trial_callback=continue_later)
                study = optuna.create_study(
                    study_name=settings.study, storage=storage, direction=direction, pruner=pruner, load_if_exists=True
                )
                break
            except (IntegrityError, OperationalError, ProgrammingError) as error:
                if attempt == 2 or not _made_at_once(error):
                    raise
                time.sleep(1)
    except Exception as error:  # an unreachable server, a refused login, a missing driver
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        reason = reason.replace(str(password), "***") if password else reason
        raise SystemExit(f"The study's database {shown(url)} cannot be used: {reason}") from None
    return study, storage


def _made_at_once(error: Exception) -> bool:
    """Whether ``error`` is another worker's making of the study's tables, which a second try finds made: workers
    started at once on a new database (a Slurm array's tasks) each make them; PostgreSQL refuses the late ones with an
    IntegrityError or ProgrammingError, SQLite with an OperationalError "table ... already exists"."""
    return not isinstance(error, OperationalError) or "already exists" in str(error)
