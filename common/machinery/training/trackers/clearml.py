"""The experiment tracker: ClearML (a ClearML server or app.clear.ml; CLEARML_OFFLINE_MODE=1 records here)."""

from pathlib import Path

from ignite.engine import Engine
from ignite.handlers.clearml_logger import ClearMLLogger

from machinery.settings import RunSettings, as_dict


def open_tracker(engine: Engine, config: RunSettings, run_dir: Path) -> ClearMLLogger:
    """The run's ClearML task, the config connected to it: a continued run reports on in its task."""
    # Credentials: `clearml-init` (~/clearml.conf) or CLEARML_API_*; CLEARML_OFFLINE_MODE=1 records the run here.
    # A continued run (preemption.py) reports on in its task, whose id its directory keeps (offline too: same session
    # folder). continue_last_task=0: iterations are reported as they are (ClearML would add the task's last one).
    task_file = run_dir / "clearml-task-id.txt"
    started = task_file.read_text() if task_file.is_file() else None
    tracker = ClearMLLogger(
        project_name={{ cookiecutter.project_slug | tojson }},
        task_name=run_dir.name,
        reuse_last_task_id=started or False,
        continue_last_task=0,
    )
    task = tracker.get_task()
    if started and task.id != started:  # the task is gone, or it was offline and this command is not
        engine.logger.warning("ClearML could not continue task %s: this part is task %s", started, task.id)
    elif started:  # ClearML's own message says "overwriting (reusing)", yet the task keeps what it holds
        engine.logger.info("ClearML continues task %s", task.id)
    task_file.write_text(task.id)
    task.connect(as_dict(config), name="config")
    return tracker
