"""The experiment tracker: Weights & Biases (wandb.ai after `wandb login`; WANDB_MODE=offline keeps it here)."""

from pathlib import Path

from ignite.engine import Engine
from ignite.handlers.wandb_logger import WandBLogger

from machinery.settings import RunSettings, as_dict


def open_tracker(engine: Engine, config: RunSettings, run_dir: Path) -> WandBLogger:
    """The run's W&B run, named after its directory, with the config: a continued run logs on in it."""
    # `wandb login` (or WANDB_API_KEY) once; WANDB_MODE=offline keeps the run here for `wandb sync`.
    # A continued run (preemption.py) logs on in the W&B run it started, whose id its directory keeps. Offline,
    # each command writes a folder under that id, which `wandb sync` uploads into the one run, in order.
    id_file = run_dir / "wandb-run-id.txt"
    tracker = WandBLogger(
        project={{ cookiecutter.project_slug | tojson }},
        name=run_dir.name,
        config=as_dict(config),
        dir=run_dir,
        id=id_file.read_text() if id_file.is_file() else None,
        resume="allow",
    )
    id_file.write_text(tracker.run.id)
    return tracker
