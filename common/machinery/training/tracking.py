{% import "flags.j2" as flags with context %}
"""Experiment tracking with {{ flags.tracker_name }}: config, training losses, learning rates{{ " and eval metrics" if flags.eval_metric }}."""

{% if cookiecutter.logger == "visdom" %}
import html
{% endif %}
{% if cookiecutter.logger in ["mlflow", "neptune"] %}
import os
{% endif %}
{% if cookiecutter.logger == "neptune" %}
import uuid
{% endif %}
from pathlib import Path
{% if cookiecutter.logger == "visdom" %}
from typing import Any
{% endif %}

{% if cookiecutter.logger == "mlflow" %}
import mlflow
{% endif %}
import torch
{% if cookiecutter.logger in ["tensorboard", "visdom"] %}
import yaml
{% endif %}
from ignite.engine import Engine, Events
{% if flags.eval_metric %}
from ignite.handlers import global_step_from_engine
{% endif %}
from ignite.handlers.{{ flags.tracker_module }} import {{ flags.tracker_class }}
{% if cookiecutter.logger == "neptune" %}
from neptune.utils import stringify_unsupported
{% endif %}

from machinery.settings import RunSettings, as_dict
{% if cookiecutter.logger == "visdom" %}


class PersistentVisdomLogger(VisdomLogger):
    """A VisdomLogger whose plots outlast it: ``close()`` leaves them on the server, saved with their last points, and a
    continued run (preemption.py) plots on in the windows its stopped part drew.

    ignite 0.5.5's ``close()`` closes every window of the environment, last saved while the final updates could still be
    on their way; its handlers open each plot in a new window with a random id: here it is named after the plot's title.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._draw_line = self.vis.line
        self.vis.line = self._line_in_named_window

    def _line_in_named_window(self, win: str | None = None, update: str | None = None, **kwargs: Any) -> str:
        if win is None:  # a plot's first point: Visdom's "append" creates the window if it does not exist
            win, update = kwargs["opts"]["title"], "append"
        return self._draw_line(win=win, update=update, **kwargs)

    def close(self) -> None:
        self.executor.shutdown()  # waits for the plot updates still being sent
        self.vis.save([self.vis.env])
{% endif %}


def setup_tracking(
    trainer: Engine,
{% if flags.eval_metric %}
    evaluator: Engine,
{% endif %}
    optimizers: dict[str, torch.optim.Optimizer],
    config: RunSettings,
    run_dir: Path,
) -> {{ flags.tracker_class }}:
    """Send the config, training losses, learning rates{{ " and eval metrics" if flags.eval_metric }} to {{ flags.tracker_name }} (call on rank 0).

    Every curve is plotted against the training iteration (losses and learning rates every ``log_every_iters``, eval
    metrics after each epoch), the run named after its directory. Not ignite's ``setup_*_logging``: they plot eval
    metrics against the epoch (except for W&B), and record neither the run's name nor its config.
    """
{% if cookiecutter.logger == "clearml" %}
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
        trainer.logger.warning("ClearML could not continue task %s: this part is task %s", started, task.id)
    elif started:  # ClearML's own message says "overwriting (reusing)", yet the task keeps what it holds
        trainer.logger.info("ClearML continues task %s", task.id)
    task_file.write_text(task.id)
    task.connect(as_dict(config), name="config")
{% elif cookiecutter.logger == "mlflow" %}
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
{% elif cookiecutter.logger == "neptune" %}
    # NEPTUNE_API_TOKEN and NEPTUNE_PROJECT say where the run goes; NEPTUNE_MODE=offline keeps it on this machine.
    # A continued run (preemption.py) logs on in the run it started: the custom run id its directory keeps.
    # Offline runs have no custom id: there, each command records a run of its own.
    id_file = run_dir / "neptune-run-id.txt"
    started = id_file.read_text() if id_file.is_file() else None
    custom_run_id = started or uuid.uuid4().hex
    tracker = NeptuneLogger(name=run_dir.name, custom_run_id=custom_run_id)
    if started and os.environ.get("NEPTUNE_MODE") == "offline":
        trainer.logger.warning(
            "Neptune cannot continue a run offline: this part is a new offline run, also named %s", run_dir.name
        )
    id_file.write_text(custom_run_id)
    tracker["config"] = stringify_unsupported(as_dict(config))
{% elif cookiecutter.logger == "polyaxon" %}
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
        trainer.logger.warning(
            "Polyaxon continues a run offline only: this part is run %s, not %s, also named %s",
            run_uuid,
            started,
            run_dir.name,
        )
    uuid_file.write_text(run_uuid)
    tracker.log_inputs(**as_dict(config))
{% elif cookiecutter.logger == "tensorboard" %}
    # A continued run (preemption.py) writes on in its run's log: its curves go on where they stopped.
    continued = (run_dir / "tensorboard").is_dir()
    tracker = TensorboardLogger(log_dir=run_dir / "tensorboard")
    if not continued:
        tracker.writer.add_text("config", f"```yaml\n{yaml.safe_dump(as_dict(config), sort_keys=False)}```")
{% elif cookiecutter.logger == "visdom" %}
    # Needs a running server: `python -m visdom.server`, or VISDOM_SERVER_URL and VISDOM_PORT. A continued
    # run (preemption.py) plots on in the same environment's windows.
    tracker = PersistentVisdomLogger(env=run_dir.name)
    config_text = html.escape(yaml.safe_dump(as_dict(config), sort_keys=False))
    tracker.vis.text(f"<pre>{config_text}</pre>", win="config", opts={"title": "config"})
{% elif cookiecutter.logger == "wandb" %}
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
{% endif %}
    every = config.log_every_iters
    tracker.attach_output_handler(
        trainer, event_name=Events.ITERATION_COMPLETED(every=every), tag="train", metric_names="all"
    )
    for name, optimizer in optimizers.items():
        # At the iteration's start: the learning rate that iteration trains with.
        tracker.attach_opt_params_handler(
            trainer, event_name=Events.ITERATION_STARTED(every=every), optimizer=optimizer, tag=name
        )
{% if flags.eval_metric %}
    # At the trainer's iteration too, not its epoch: W&B refuses a step below one already logged.
    tracker.attach_output_handler(
        evaluator,
        event_name=Events.COMPLETED,
        tag="eval",
        metric_names="all",
        global_step_transform=global_step_from_engine(trainer, Events.ITERATION_COMPLETED),
    )
{% endif %}
    return tracker
