{% import "flags.j2" as flags with context %}
"""The machinery of training, the same for any model and data: change it to change how training runs, not what
is trained (the README's "Make it yours" says where that is).

- ``backend.py``: ``Backend``, the one seam between your code and the backend (``prepare``, then the training
  step's ``autocast``, ``backward``, ``step``, ``update``).
- ``launch.py``: the command line, the training processes and the run's start; ``settings.py``: config.yaml
  and the command line's overrides read into ``config.Config``.
- ``fit.py``: the run around your engines; ``engine.py``: the engine around your training step.
{% if flags.eval_metric %}
- ``evaluation.py``: the engine around your evaluation step{{ ", and the score that ranks evaluations (``score``)" if flags.ranked }}.
{% endif %}
- ``loaders.py``: the data loaders, sharded across processes.
{% if flags.image_files %}
- ``files.py``: image folders and dataset files, their faults named (a missing folder, an unreadable image).
{% endif %}
- ``handlers.py``: loss logging, checkpoints, stopping rules, resuming.
- ``trained.py``: a trained model for ``predict.py``: the newest, its run's settings{{ " and class names" if flags.eval_metric }};
  ``onnx_export.py``: ``export.py``'s ONNX file, checked in onnxruntime against PyTorch.
- ``preemption.py``: the clean stop on SIGTERM or Ctrl-C; ``runs.py``: the run directory a stopped run continues in.
{% if cookiecutter.logger != "none" %}
- ``tracking.py``: the experiment tracker ({{ flags.tracker_name }}).
{% endif %}
{% if flags.xla %}
- ``xla.py``: torch_xla: the TPU replicas' launch, device loaders, the names ignite 0.5.5 calls;
  ``xla_metrics.py``: the XLA counters of each epoch (``xla_metrics.json``).
{% endif %}
"""
