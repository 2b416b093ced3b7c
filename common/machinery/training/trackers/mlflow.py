"""The experiment tracker: MLflow (MLFLOW_TRACKING_URI's server, else an SQLite file in output_dir)."""

import os
from pathlib import Path

import mlflow
from ignite.engine import Engine
from ignite.handlers.mlflow_logger import MLflowLogger

from machinery.settings import RunSettings, as_dict


def open_tracker(engine: Engine, config: RunSettings, run_dir: Path) -> MLflowLogger:
    """The run's MLflow run, named after its directory, the config its parameters: a continued run logs on in it."""
    # MLFLOW_TRACKING_URI names a tracking server; without it, runs go to an SQLite file in output_dir.
    local_store = f"sqlite:///{(Path(config.output_dir) / 'mlflow.db').resolve().as_posix()}"
    tracking_uri = os.environ.get("MLFLOW_TRACKING_URI", local_store)
    # A continued run (preemption.py) logs on in the MLflow run it started, whose id its directory keeps.
    run_id = run_dir / "mlflow-run-id.txt"
    continued = run_id.is_file()
    if continued:
        mlflow.set_tracking_uri(tracking_uri)
        mlflow.start_run(run_id=run_id.read_text())
    tracker = MLflowLogger(tracking_uri=tracking_uri)
    if not continued:
        tracker.set_tag("mlflow.runName", run_dir.name)
        tracker.log_params(as_dict(config))
        run_id.write_text(tracker.active_run.info.run_id)
    return tracker
