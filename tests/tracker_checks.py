"""What an experiment tracker recorded (read by tracker_records.py), checked against the run's training.log."""

from pathlib import Path

import pytest
from projects import read_log


def check_tracker_records(
    recorded: dict,
    run_dir: Path,
    config: dict,
    epochs: int = 2,
    iterations: int = 3,
    optimizers: tuple = ("optimizer",),
) -> None:
    """An experiment tracker holds the run (see tracker_records.py): its name, the config, and every value
    training.log shows, at the steps it shows them: each loss every ``log_every_iters`` iterations (the
    classifiers' ``train_loss``; the GAN's ``loss_d``, ``loss_g``, ``d_real``, ``d_fake``), each optimizer's
    learning rate at the same iterations, and the eval metrics at each epoch's end (a template with an evaluator).
    """
    log = read_log(run_dir)
    series = recorded["series"]
    assert recorded["name"] == run_dir.name, f"the tracker's run is named {recorded['name']!r}, not after {run_dir}"

    every = config["log_every_iters"]
    assert log["iterations"] == list(range(every, epochs * iterations + 1, every)), "training.log's logged iterations"
    for name in log["train"][0]:
        logged = series.get(f"train/{name}")
        assert logged, f"no train/{name} among {sorted(series)}"
        assert [step for step, _ in logged] == log["iterations"], (
            f"train/{name} must be logged every {every} iterations"
        )
        # training.log shows 4 decimals; the tracker has the full value.
        assert [value for _, value in logged] == pytest.approx([values[name] for values in log["train"]], abs=1e-4)

    epoch_ends = [iterations * epoch for epoch in range(1, epochs + 1)]
    for metric in ("accuracy", "loss") if log["evals"] else ():
        logged = series.get(f"eval/{metric}")
        assert logged, f"no eval/{metric} among {sorted(series)}"
        assert [step for step, _ in logged] == epoch_ends, f"eval/{metric} must be logged at each epoch's end"
        expected = [float(line[metric]) for line in log["evals"]]
        assert [value for _, value in logged] == pytest.approx(expected, abs=1e-4)
    if not log["evals"]:
        assert not [name for name in series if name.startswith("eval")], "no evaluator, no eval series"

    for optimizer in optimizers:
        # Named after the optimizer in main.py: "optimizer/lr/group_0" in most trackers.
        (lr_name,) = [name for name in series if name.startswith(f"{optimizer}/lr")]
        learning_rates = series[lr_name]
        assert [step for step, _ in learning_rates] == log["iterations"], (
            f"{lr_name}: the rate of every logged iteration"
        )
        values = [value for _, value in learning_rates]
        assert all(0.0 <= v <= config["lr"] * (1 + 1e-6) for v in values), values  # float32 in some trackers
        if log["evals"]:  # the classifiers warm up, then decay; the GAN's rate is constant
            assert len(set(values)) > 1, f"the learning-rate schedule must show in {lr_name}: {values}"
        else:
            assert values == pytest.approx([config["lr"]] * len(values)), lr_name

    logged_config = recorded["config"]
    for key in ("batch_size", "lr", "max_epochs", "model", "dataset", "z_dim"):
        if key in config:
            assert str(logged_config.get(key)) == str(config[key]), f"config {key}: {logged_config.get(key)!r}"
