{#- A classifier's short training run (vision and text): the log, the run directory, checkpoints. -#}
def test_short_run_logs_metrics_and_saves_checkpoints(config: SimpleNamespace) -> None:
    run(0, config)
    (run_dir,) = Path(config.output_dir).iterdir()
    log = (run_dir / "training.log").read_text()
    assert "train_loss=" in log, log
    assert "eval: accuracy=" in log, log
    assert (run_dir / "config-lock.yaml").is_file()
{% if cookiecutter.save_training or cookiecutter.save_best_model %}
    assert list(run_dir.glob("*.pt")), "no checkpoint was written"
{% endif %}
