{#- The checkpoints of a generated test's short run, exactly those the config asks for: lines of a test
    function, after `run(0, config)`, with `run_dir` and `log` (training.log's text) set. -#}
{% import "flags.j2" as flags with context %}
    checkpoints = {path.name for path in run_dir.glob("*.pt")}
    # The training state every save_every_iters iterations and at each epoch end (save_training), named with
    # filename_prefix and the iteration: the last n_saved of them are kept.
    iterations = range(1, config.max_epochs * config.train_epoch_length + 1)
    saved = [it for it in iterations if it % config.save_every_iters == 0 or it % config.train_epoch_length == 0]
    saved = saved if config.save_training else []
    training = {f"{config.filename_prefix}_checkpoint_{it}.pt" for it in saved[-config.n_saved :]}
    assert training <= checkpoints, f"expected the training checkpoints {sorted(training)}, found {sorted(checkpoints)}"
    checkpoints -= training
{% if flags.eval_metric %}
    # The n_saved best models (save_best_model), each named with its epoch and its eval score as training.log shows.
    best = {name for name in checkpoints if name.startswith("best_model_")}
    kept = min(config.n_saved, config.max_epochs) if config.save_best_model else 0
    assert len(best) == kept, f"expected the best {kept} of {config.max_epochs} epochs: {sorted(best)}"
    for name in best:
        epoch, score = name.removeprefix("best_model_").removesuffix(".pt").split("_{{ flags.eval_metric }}=")
        assert f"Epoch {epoch} - eval: {{ flags.eval_metric }}={score}" in log, f"{name} is not named after a logged eval"
    checkpoints -= best
{% endif %}
    assert not checkpoints, f"checkpoints that the config did not ask for: {sorted(checkpoints)}"
