{#- A classifier's short training run (vision and text): the model, the log, the run directory,
    checkpoints. The test module imports Any, pytest, torch, NUM_CLASSES, run and setup_model. -#}
def test_short_run_trains_a_model_for_the_data_and_logs_metrics_and_saves_the_asked_checkpoints(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = []

    def setup_and_keep_model(*args: Any, **kwargs: Any) -> torch.nn.Module:
        built.append(setup_model(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr("main.setup_model", setup_and_keep_model)
    run(0, config)
    # One output per class of the data (the synthetic set's NUM_CLASSES here), not a model's default number.
    (model,) = built
    *_, classifier = (module for module in model.modules() if isinstance(module, torch.nn.Linear))
    assert classifier.out_features == NUM_CLASSES, "main.py must build the model with the data's number of classes"
    # The run's directory (an MLflow project also keeps its mlflow.db store there).
    (run_dir,) = (path for path in Path(config.output_dir).iterdir() if path.is_dir())
    log = (run_dir / "training.log").read_text()
    assert "train_loss=" in log, log
    assert "eval: accuracy=" in log, log
    assert (run_dir / "config-lock.yaml").is_file()
{% include "pytest/short_run_checkpoints.py" %}
