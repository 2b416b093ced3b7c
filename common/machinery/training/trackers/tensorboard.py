"""The experiment tracker: TensorBoard (event files in the run directory's tensorboard/)."""

from pathlib import Path

import yaml
from ignite.engine import Engine
from ignite.handlers.tensorboard_logger import TensorboardLogger

from machinery.settings import RunSettings, as_dict


def open_tracker(engine: Engine, config: RunSettings, run_dir: Path) -> TensorboardLogger:
    """The run's TensorBoard log, the config as its text: a continued run writes on in it."""
    # A continued run (preemption.py) writes on in its run's log: its curves go on where they stopped.
    continued = (run_dir / "tensorboard").is_dir()
    tracker = TensorboardLogger(log_dir=run_dir / "tensorboard")
    if not continued:
        tracker.writer.add_text("config", f"```yaml\n{yaml.safe_dump(as_dict(config), sort_keys=False)}```")
    return tracker
