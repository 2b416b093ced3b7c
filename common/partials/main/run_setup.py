{#- The start of every template's run(): seeds, cuDNN determinism, the run directory and logging. #}
    rank = idist.get_rank()
    manual_seed(config.seed + rank)
{% if cookiecutter.deterministic %}
    # Reproducible cuDNN kernels; the trainer reseeds the rest (data order, noise).
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
{% endif %}
    run_dir = setup_run_dir(config)
    logger = setup_logging(run_dir)
    logger.info("Run directory: %s", run_dir)
    log_world({{ "config, " if flags.xla }}logger)
