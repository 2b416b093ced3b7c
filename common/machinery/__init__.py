{% import "flags.j2" as flags with context %}
"""The machinery of training, the same for any model and data: change it to change how training runs, not what
is trained (the README's "Make it yours" says where that is). It imports none of your files: they use it. Every
training behaviour (mixed precision, compile, the average of the weights, early stopping, checkpoints, ...) is a key
of config.yaml, read by the module of its concern.

The map, one concern a module or a folder, with the names your files import:

- ``settings.py``: ``RunSettings``, the run's keys of config.yaml (config.py's ``Config`` adds yours), their kinds
  and the rules between them.
- ``config_files.py``: the config read and checked (``load_config``, ``load_run_settings``).
- ``upgrade.py``: a config carried across a template update (``python -m machinery.upgrade``).
- ``cli.py``: the command line, {{ cookiecutter.argparser }}'s (``cli``): config.yaml, any key set for a command.
- ``launch.py``: the training processes (one, several spawned or torchrun's, a TPU's replicas).
- ``backend.py``: ``setup_backend``, the one seam between your code and the devices (``prepare``, then the training
  step's ``autocast``, ``backward``, ``optimizer_step``, ``update``).
- ``runs/``, the run directory and continuing: ``start.py`` (``start_run``: seed, run directory, log);
  ``directory.py`` (a new run or the stopped one's, how it ended, ``write_classes``); ``files.py`` (the command's
  hold, files written whole); ``checkpoints.py`` (checkpoints found intact, read safely); ``preemption.py`` (the
  clean stop on SIGTERM or Ctrl-C, the time limit).
- ``training/``, the engines and their handlers: ``fit.py`` (``fit``: the run around your engines);
  ``engine.py`` (``training_engine``: the engine around your training step); ``handlers.py`` (loss logging, the NaN
  check, the timer, checkpoints, resuming){{ ";" if flags.eval_metric or cookiecutter.logger != "none" else "." }}
{% if flags.eval_metric %}
  ``evaluation.py`` (``evaluation_engine``, your metrics on the device; the score that ranks evaluations, the best
  models, early stopping); ``ema.py`` (the average of the weights, evaluated and kept){{ ";" if cookiecutter.logger != "none" else "." }}
{% endif %}
{% if cookiecutter.logger != "none" %}
  ``tracking.py`` (what the experiment tracker receives); ``tracker.py`` ({{ flags.tracker_name }}'s run, continued).
{% endif %}
- ``data/``: ``loaders.py`` (``train_loader``, ``eval_loader``: sharded across processes){{ ";" if flags.image_files else "." }}
{% if flags.image_files %}
  ``files.py`` (image folders and files, their faults named).
{% endif %}
- ``inference/``: ``trained.py`` (a trained model for predict.py); ``onnx_export.py`` (export.py's ONNX file).
{% if flags.sweep %}
- ``sweeps/``, sweep.py's study of trials: ``study.py`` (``sweep_cli``: the study's database); ``worker.py`` (the
  trials trained, exactly ``n_trials``, each continued after any stop); ``trial.py`` (a trial's command run, and how
  it ended); ``space.py`` (sweep.yaml read and checked, a trial's config); ``pruning.py`` (in a trial's run: its scores
  reported, its run pruned); ``report.py`` (the best config, the table, the pictures); ``orphans.py`` (a trial's
  command stopped when its worker dies).
{% endif %}
{% if flags.xla %}
- ``tpu/``, torch_xla: ``xla.py`` (the replicas' launch, the names ignite 0.5.5 calls); ``backend.py`` (the TPU's
  ``Backend``); ``device_loaders.py`` (the batches sent to the device, a loader's errors raised); ``replicas.py`` (the
  replicas' stop and failure); ``counters.py`` (the XLA counters of each epoch){{ "; ``metrics.py`` (the eval metrics'
  state summed on the device, read once)." if flags.eval_metric else "." }}
{% endif %}
"""
