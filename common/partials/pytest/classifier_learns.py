{#- A classifier learns its synthetic data (vision and text). The including test module sets, before
    the include, `learning` (config items that make a short run learn on a CPU, one a line) and
    `min_accuracy`, and imports re, Path, SimpleNamespace, NUM_CLASSES and run. -#}
def test_a_short_run_learns_the_synthetic_data(config: SimpleNamespace) -> None:
    """Eval accuracy well above chance after seconds of training: data, labels, loss, optimizer and
    learning-rate schedule work together (shuffled labels or a frozen model would stay at chance)."""
    learning = {
        {{ learning | trim | indent(8) }}
    }
    run(0, SimpleNamespace(**{**vars(config), **learning}))
    (run_dir,) = (path for path in Path(config.output_dir).iterdir() if path.is_dir())
    log = (run_dir / "training.log").read_text()
    accuracies = [float(value) for value in re.findall(r" - eval: accuracy=([0-9.]+)", log)]
    chance = 1 / NUM_CLASSES
    assert accuracies[-1] >= {{ min_accuracy }}, f"eval accuracy per epoch {accuracies}; chance is {chance:.2f}"
