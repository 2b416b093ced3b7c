"""Mixed precision (the config key ``mixed_precision``: float16, bfloat16 or null): the autocast and the gradient scaler
``machinery.backend.Backend`` picks for it, in every project, switched at run time.

No GPU here: bfloat16 autocasts on the CPU for real; float16's CUDA path is checked as far as a CPU takes it (the
run falls back to full precision and says so, its scaler off but kept in the training state). The values a run
refuses are tests/test_config_keys.py's; the real runs with each value are in tests/test_preemption.py and
tests/test_gan_runs.py.
"""

import logging
from pathlib import Path

import pytest
from projects import load_module

FALLBACK = "mixed_precision: float16 autocasts on CUDA GPUs only; this run trains on the cpu in full precision"


def backend_for(project: Path, precision: str | None):
    """The project's backend for ``mixed_precision: precision`` in this process (its device: the CPU)."""
    config = load_module(project / "config.py").Config(mixed_precision=precision)
    return load_module(project / "machinery" / "backend.py").setup_backend(config)


def test_the_backend_autocasts_and_scales_as_mixed_precision_says(baked, caplog: pytest.LogCaptureFixture) -> None:
    import torch

    project = baked()  # the default answers: the key is null there, and any project takes every value
    assert load_module(project / "config.py").Config().mixed_precision is None

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
