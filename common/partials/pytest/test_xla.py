"""The TPU launch logic, checked without a TPU: spawn, replica start-up, world-size check, shim."""

import logging
from types import SimpleNamespace

import pytest
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

import utils
import xla_compat


def test_launch_spawns_one_replica_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(utils.xmp, "spawn", lambda fn, args, nprocs: calls.append((fn, args, nprocs)))
    config = SimpleNamespace(nproc_per_node=8)
    utils.launch(print, config)
    (fn, args, nprocs) = calls[0]
    # PJRT accepts nprocs=None (all devices) or 1 only: 8 would raise on torch_xla >= 2.6.
    assert nprocs is None
    assert fn is utils._xla_replica and args == (print, config)


def test_each_replica_joins_ignite_without_spawning_again(monkeypatch: pytest.MonkeyPatch) -> None:
    opened = []

    class FakeParallel:
        def __init__(self, **kwargs):
            opened.append(kwargs)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def run(self, fn, *args):
            fn(0, *args)

    monkeypatch.setattr(utils.idist, "Parallel", FakeParallel)
    ran = []
    config = SimpleNamespace(nproc_per_node=8)
    utils._xla_replica(3, lambda local_rank, config: ran.append((local_rank, config)), config)
    assert opened == [{"backend": "xla-tpu"}], "nproc_per_node would make ignite call xmp.spawn(nprocs=8)"
    assert ran == [(0, config)], "run is called once, with ignite's local rank and the config"


@pytest.mark.parametrize("devices,warned", [(8, False), (1, True), (4, True)])
def test_world_size_differing_from_nproc_per_node_is_said_in_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, devices: int, warned: bool
) -> None:
    monkeypatch.setattr(utils.idist, "get_world_size", lambda: devices)
    logger = logging.getLogger("test-world")
    with caplog.at_level(logging.INFO, logger="test-world"):
        utils.log_world(SimpleNamespace(nproc_per_node=8), logger)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if warned:
        assert warnings == [
            f"Expected 8 TPU replicas (nproc_per_node) but this runtime has {devices} device(s): "
            f"training on {devices} replica(s). A TPU v5e-1 (Colab) has one chip; Kaggle's TPU v5e-8 and "
            "8-chip TPU VMs have eight."
        ]
    else:
        assert warnings == []


def test_compat_shim_adds_only_the_missing_torch_xla_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in xla_compat.REPLACEMENTS:
        monkeypatch.delattr(xm, name, raising=False)
    own = object()
    monkeypatch.setattr(xm, "get_ordinal", own, raising=False)  # as on an older torch_xla
    assert xla_compat.apply() == ["xrt_world_size", "get_local_ordinal"]
    assert xm.get_ordinal is own, "a name torch_xla still has must be left alone"
    assert xm.xrt_world_size is xr.world_size and xm.get_local_ordinal is xr.local_ordinal
