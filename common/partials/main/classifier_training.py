{#- The second half of a classifier's run() (vision and text): trainer, evaluator and metrics,
    checkpoints and handlers, tracking, resume, training. Expects model, optimizer, loss_fn,
    lr_scheduler, device, the loaders, epoch_length, run_dir, logger and rank to be set. #}
{% if flags.cuda_amp %}
    # Mixed precision runs on CUDA only; the gradient scaler is part of the training state.
    scaler = torch.amp.GradScaler("cuda", enabled=config.use_amp and device.type == "cuda")
    trainer = setup_trainer(model, optimizer, loss_fn, device, train_loader, scaler)
{% elif flags.xla_amp %}
    trainer = setup_trainer(model, optimizer, loss_fn, device, train_loader, use_amp=config.use_amp)
{% else %}
    trainer = setup_trainer(model, optimizer, loss_fn, device, train_loader)
{% endif %}
    trainer.logger = logger
    # At the iteration's start, so that each iteration trains with the scheduled learning rate.
    trainer.add_event_handler(Events.ITERATION_STARTED, lr_scheduler)
{% if flags.xla %}
    setup_xla_metrics(trainer, run_dir, logger)
{% endif %}
{% if flags.cuda_amp %}
    evaluator = setup_evaluator(model, device, use_amp=scaler.is_enabled())
{% elif flags.xla_amp %}
    evaluator = setup_evaluator(model, device, use_amp=config.use_amp)
{% else %}
    evaluator = setup_evaluator(model, device)
{% endif %}
{% if flags.xla %}
    # ignite metrics refuse an XLA device: they run on the CPU, fed by the evaluator.
    Accuracy(device="cpu").attach(evaluator, "accuracy")
    Loss(loss_fn, device="cpu").attach(evaluator, "loss")
{% else %}
    Accuracy(device=device).attach(evaluator, "accuracy")
    Loss(loss_fn, device=device).attach(evaluator, "loss")
{% endif %}

    @trainer.on(Events.EPOCH_COMPLETED)
    def evaluate(engine: Engine) -> None:
        evaluator.run(eval_loader, epoch_length=config.eval_epoch_length)
        log_metrics(logger, engine.state.epoch, "eval", evaluator.state.metrics)

{% if cookiecutter.save_training %}
    to_save = {"model": model, "optimizer": optimizer, "trainer": trainer, "lr_scheduler": lr_scheduler}
{% if flags.cuda_amp %}
    to_save["scaler"] = scaler
{% endif %}
{% endif %}
    setup_handlers(
        trainer,
{% if flags.watch_evaluator %}
        evaluator,
{% endif %}
        config,
{% if flags.save_checkpoints %}
        run_dir,
{% endif %}
{% if cookiecutter.save_training %}
        to_save=to_save,
{% endif %}
{% if cookiecutter.save_best_model %}
        model=model,
{% endif %}
    )
{% if cookiecutter.logger != "none" %}
    tracker = setup_tracking(trainer, evaluator, {"optimizer": optimizer}, config, run_dir) if rank == 0 else None
{% endif %}

    if config.resume_from:
        resume_from({{ "to_save" if cookiecutter.save_training else '{"model": model}' }}, config.resume_from, logger)

    trainer.run(train_loader, max_epochs=config.max_epochs, epoch_length=epoch_length)
{% if cookiecutter.logger != "none" %}
    if tracker is not None:
        tracker.close()
{% endif %}
