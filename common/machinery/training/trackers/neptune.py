"""The experiment tracker: Neptune (NEPTUNE_PROJECT with NEPTUNE_API_TOKEN; NEPTUNE_MODE=offline keeps it here)."""

import os
import uuid
from pathlib import Path

from ignite.engine import Engine
from ignite.handlers.neptune_logger import NeptuneLogger
from neptune.utils import stringify_unsupported

from machinery.settings import RunSettings, as_dict


def open_tracker(engine: Engine, config: RunSettings, run_dir: Path) -> NeptuneLogger:
    """The run's Neptune run, named after its directory, the config in it: a continued run logs on in it (online)."""
    # NEPTUNE_API_TOKEN and NEPTUNE_PROJECT say where the run goes; NEPTUNE_MODE=offline keeps it on this machine.
    # A continued run (preemption.py) logs on in the run it started: the custom run id its directory keeps.
    # Offline runs have no custom id: there, each command records a run of its own.
    id_file = run_dir / "neptune-run-id.txt"
    started = id_file.read_text() if id_file.is_file() else None
    custom_run_id = started or uuid.uuid4().hex
    tracker = NeptuneLogger(name=run_dir.name, custom_run_id=custom_run_id)
    if started and os.environ.get("NEPTUNE_MODE") == "offline":
        engine.logger.warning(
            "Neptune cannot continue a run offline: this part is a new offline run, also named %s", run_dir.name
        )
    id_file.write_text(custom_run_id)
    tracker["config"] = stringify_unsupported(as_dict(config))
    return tracker
