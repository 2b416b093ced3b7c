"""Mixed precision (the question and the config key ``mixed_precision``: float16, bfloat16 or null): the autocast
and the gradient scaler ``machinery.backend.Backend`` picks for it, and the values a run refuses.

No GPU here: bfloat16 autocasts on the CPU for real; float16's CUDA path is checked as far as a CPU takes it (the
run falls back to full precision and says so, its scaler off but kept in the training state). The real runs
with each value are in tests/test_training_runs.py, tests/test_gan_runs.py and tests/test_preemption.py.
"""

import logging
from pathlib import Path

import pytest
import yaml
from projects import load_module, make_offline

FALLBACK = "mixed_precision: float16 autocasts on CUDA GPUs only; this run trains on the cpu in full precision"


def backend_for(project: Path, precision: str | None):
    """The project's Backend for ``mixed_precision: precision`` in this process (its device: the CPU)."""
    config = load_module(project / "config.py").Config(mixed_precision=precision)
    return load_module(project / "machinery" / "backend.py").Backend(config)


@pytest.mark.parametrize("answer", ["float16", "bfloat16"])
def test_the_backend_autocasts_and_scales_as_mixed_precision_says(bake, caplog, answer: str) -> None:
    import torch

    project = bake(launcher="none", backend="gloo", mixed_precision=answer)
    assert yaml.safe_load((project / "config.yaml").read_text())["mixed_precision"] == answer
    assert load_module(project / "config.py").Config().mixed_precision == answer

    def computes_in(backend) -> torch.dtype:
        with backend.autocast():
            return (torch.ones(2, 2) @ torch.ones(2, 2)).dtype

    caplog.set_level(logging.WARNING, logger="train")
    # bfloat16 autocasts on the CPU, with no gradient scaler: nothing more in a checkpoint.
    bfloat16 = backend_for(project, "bfloat16")
    assert computes_in(bfloat16) == torch.bfloat16 and bfloat16.state_objects() == {}
    # null: full precision, no scaler.
    full = backend_for(project, None)
    assert computes_in(full) == torch.float32 and full.state_objects() == {}
    assert not caplog.records, [record.getMessage() for record in caplog.records]
    # float16 needs CUDA: on the CPU the run trains in full precision and says so; its scaler, off, is kept in the
    # training state (a float16 run's checkpoints hold one wherever it trained).
    float16 = backend_for(project, "float16")
    assert computes_in(float16) == torch.float32
    assert [record.getMessage().split(" (")[0] for record in caplog.records] == [FALLBACK]
    scaler = float16.state_objects()["scaler"]
    assert isinstance(scaler, torch.amp.GradScaler) and not scaler.is_enabled()
    assert list(float16.state_objects()) == ["scaler"] and scaler.state_dict() == {}
    # Its backward pass, optimizer step and update are a plain step's there.
    weight = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([weight], lr=0.5)
    with float16.autocast():
        loss = (weight * 2).sum()
    float16.backward(loss)
    float16.optimizer_step(optimizer)
    float16.update()
    assert torch.equal(weight.detach(), torch.zeros(2))


@pytest.mark.parametrize(
    ("answers", "allowed"),
    [
        ({"backend": "gloo", "mixed_precision": "float16"}, "'float16' or 'bfloat16' or None"),
        ({"backend": "xla-tpu", "mixed_precision": "bfloat16"}, "'bfloat16' or None"),
    ],
    ids=["gpu", "tpu"],
)
def test_a_mixed_precision_the_project_cannot_run_is_refused_naming_the_key_and_what_is_allowed(
    bake, answers: dict, allowed: str
) -> None:
    """Typed like every key (a Literal of its values, or null): a TPU project takes bfloat16 or null only."""
    project = bake(launcher="none" if answers["backend"] == "gloo" else "auto", **answers)
    make_offline(project)
    settings = load_module(project / "machinery" / "settings.py")
    config_class = load_module(project / "config.py").Config
    path = project / "config.yaml"
    wrong = ["float32", True, "float16"] if answers["backend"] == "xla-tpu" else ["float32", True, "fp16"]
    for value in wrong:
        with pytest.raises(SystemExit, match=f"mixed_precision: {value!r} is not {allowed}$"):
            settings.load_config(path, config_class, mixed_precision=value)
    for value in [None, answers["mixed_precision"]]:
        assert settings.load_config(path, config_class, mixed_precision=value).mixed_precision == value


def test_without_mixed_precision_there_is_no_key_and_no_autocast(bake) -> None:
    """The default (no): the config has no mixed_precision key, and the backend no autocast or scaler."""
    project = bake(launcher="none")
    assert "mixed_precision" not in yaml.safe_load((project / "config.yaml").read_text())
    backend = (project / "machinery" / "backend.py").read_text()
    assert "autocast(" not in backend.replace("def autocast(", "") and "GradScaler" not in backend
