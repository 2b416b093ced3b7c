{#- RunSettings' keys (machinery/settings.py's class body), the same whatever the answers but the backend's family:
    config.yaml lists them right after the project's own, max_epochs first. Each line is `name: type = default  # note`
    (config/yaml.j2 writes config.yaml from these lines); a template without an evaluator has no evaluation keys. -#}
{% import "flags.j2" as flags with context %}
    max_epochs: PositiveInt = {{ cookiecutter._max_epochs | int }}
    train_epoch_length: PositiveInt | None = None  # iterations per epoch; null means the whole training set
{% if flags.eval_metric %}
    eval_epoch_length: PositiveInt | None = None  # batches per evaluation; null means the whole eval set
{% endif %}
    seed: int = 666

    # How training runs (README: "Configuration"): each is off where it costs something.
    # Autocast: float16 (CUDA GPUs, with a gradient scaler) or bfloat16 (GPUs, CPUs, TPUs); null: float32
    mixed_precision: Literal["float16", "bfloat16"] | None = None
    compile: bool = False  # torch.compile each model's forward (GPUs and CPUs)
    # Reproducible runs: each pass's order and batch seeds from seed and the pass, cuDNN's deterministic kernels
    deterministic: bool = False
{% if flags.eval_metric %}
    # An average of the weights, evaluated and kept as the best models: each iteration adds this share of the weights
    # (0.001: about the last 1000 iterations count); null: none
    ema_momentum: Share | None = None
{% endif %}
    terminate_on_nan: bool = True  # stop training when a loss is NaN or infinite
    timer: bool = False  # log the average time per iteration at each epoch end
    limit_sec: PositiveInt | None = None  # stop training after this many seconds (the same command continues)
{% if flags.eval_metric %}
    score: str = "{{ flags.eval_metric }}"  # the eval metric that ranks evaluations; "-" before it when lower is better
    patience: PositiveInt | None = None  # stop after this many evaluations without a better score; null: never
{% endif %}

    # Distributed training: the README's command sets these
{% if flags.xla %}
    backend: Literal["xla-tpu"] = "xla-tpu"
    nproc_per_node: PositiveInt = 8  # expected TPU replicas; the devices found decide, and a mismatch is logged
{% else %}
    backend: Literal["nccl", "gloo"] | None = None  # nccl (GPUs) or gloo (CPUs) for several processes; null: one
    nproc_per_node: PositiveInt = 1  # processes this command spawns on each node (torchrun starts its own)
    nnodes: PositiveInt = 1
    node_rank: Rank = 0  # set on each node: 0 to nnodes - 1
    master_addr: Host = "127.0.0.1"
    master_port: Port = 29500
{% endif %}

    # Outputs: each run writes a directory under output_dir
    output_dir: Folder = "{{ flags.output_dir }}"
    log_every_iters: PositiveInt = 10
    resume_from: str | None = None  # path of a checkpoint (*.pt) to resume from
    save_training: bool = True  # training checkpoints, from which the same command continues a stopped run
    filename_prefix: Name = "training"
    save_every_iters: PositiveInt = 1000
{% if flags.eval_metric %}
    save_best_model: bool = True  # keep the n_saved best models by score
{% endif %}
    n_saved: PositiveInt = 2  # checkpoints of each kind kept
