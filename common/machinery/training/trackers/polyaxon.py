"""The experiment tracker: Polyaxon (a Polyaxon job, POLYAXON_HOST's server; POLYAXON_IS_OFFLINE=true keeps it here)."""

from pathlib import Path

from ignite.engine import Engine
from ignite.handlers.polyaxon_logger import PolyaxonLogger

from machinery.settings import RunSettings, as_dict


def open_tracker(engine: Engine, config: RunSettings, run_dir: Path) -> PolyaxonLogger:
    """The run's Polyaxon run, named after its directory, the config its inputs: a continued run logs on in it
    (offline)."""
    # Inside a Polyaxon job the run is Polyaxon's; elsewhere POLYAXON_HOST names the server, or
    # POLYAXON_IS_OFFLINE=true records the run under POLYAXON_OFFLINE_ROOT.
    # Polyaxon reads its settings on its first import (PolyaxonLogger makes it): imported here, they are the logger's.
    from polyaxon import settings as polyaxon_settings

    # Offline, a continued run (preemption.py) logs on in its run (uuid kept in its directory), reloaded from its
    # folder. On a server, outside a job, only the creating process sends a run's events: the continued part is new.
    uuid_file = run_dir / "polyaxon-run-uuid.txt"
    started = uuid_file.read_text() if uuid_file.is_file() else None
    tracker = PolyaxonLogger(
        project={{ cookiecutter.project_slug | tojson }},
        name=run_dir.name,
        run_uuid=started if polyaxon_settings.CLIENT_CONFIG.is_offline else None,
    )
    run_uuid = tracker.experiment.run_uuid
    if started and run_uuid != started:
        engine.logger.warning(
            "Polyaxon continues a run offline only: this part is run %s, not %s, also named %s",
            run_uuid,
            started,
            run_dir.name,
        )
    uuid_file.write_text(run_uuid)
    tracker.log_inputs(**as_dict(config))
    return tracker
