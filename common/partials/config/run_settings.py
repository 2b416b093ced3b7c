{#- RunSettings' keys (machinery/settings.py's class body): config.yaml lists them right after the project's own,
    max_epochs first (where it was before it was a run setting: a project made before updates with cruft without a
    conflict where its user changed the keys around it). -#}
{% import "flags.j2" as flags with context %}
    max_epochs: int = {{ cookiecutter._max_epochs | int }}
    train_epoch_length: int | None = None  # iterations per epoch; null means the whole training set
{% if flags.eval_metric %}
    eval_epoch_length: int | None = None
{% endif %}
    seed: int = 666
{% if flags.gpu_amp %}
    # Mixed precision: float16 autocast with a gradient scaler on CUDA GPUs (a CPU trains in full precision, and logs
    # so), bfloat16 autocast with none (GPUs and CPUs), or null: full precision (float32)
    mixed_precision: Literal["float16", "bfloat16"] | None = "{{ cookiecutter.mixed_precision }}"
{% elif flags.xla_amp %}
    mixed_precision: Literal["bfloat16"] | None = "bfloat16"  # bfloat16 autocast on the TPU; null: full precision
{% endif %}
{% if flags.compiled %}
    compile: bool = True  # torch.compile each model (the first iterations compile: the log says how long); false: eager
{% endif %}
{% if flags.ema %}
    # An average of the weights, evaluated and saved as the best models: each iteration adds this share of them
    # (0.001: about the last 1000 iterations count; raise it for shorter runs)
    ema_momentum: float = 0.001
{% endif %}

    # Distributed training
{% if flags.xla %}
    backend: str | None = "xla-tpu"
    nproc_per_node: int = 8  # expected TPU replicas; the devices found decide, and a mismatch is logged
{% elif cookiecutter.__launcher == "none" %}
    backend: str | None = None  # one process; set nccl or gloo to join a process group
{% else %}
    backend: str | None = "{{ cookiecutter.backend }}"
{% endif %}
{% if cookiecutter.__launcher == "spawn" and not flags.xla %}
    nproc_per_node: int = {{ cookiecutter.nproc_per_node | int }}
    nnodes: int = {{ cookiecutter.nnodes | int }}
    node_rank: int = 0  # set on each node: 0 to nnodes - 1
    master_addr: str = {{ cookiecutter.master_addr | tojson }}
    master_port: int = {{ cookiecutter.master_port | int }}
{% endif %}

    # Outputs: each run writes a directory under output_dir
    output_dir: str = {{ cookiecutter.output_dir | tojson }}
    log_every_iters: int = {{ cookiecutter.log_every_iters | int }}
    resume_from: str | None = None  # path of a checkpoint (*.pt) to resume from
{% if cookiecutter.save_training %}
    filename_prefix: str = {{ cookiecutter.filename_prefix | tojson }}
    save_every_iters: int = {{ cookiecutter.save_every_iters | int }}
{% endif %}
{% if cookiecutter.save_training or flags.save_best %}
    n_saved: int = {{ cookiecutter.n_saved | int }}
{% endif %}
{% if flags.ranked %}
    score: str = "{{ flags.eval_metric }}"  # the eval metric that ranks evaluations; "-" before it when lower is better
{% endif %}
{% if flags.early_stopping %}
    patience: int = {{ cookiecutter.patience | int }}  # evaluations without a better score before stopping
{% endif %}
{% if cookiecutter.limit_sec | int > 0 %}
    limit_sec: int = {{ cookiecutter.limit_sec | int }}  # stop training after this many seconds
{% endif %}
