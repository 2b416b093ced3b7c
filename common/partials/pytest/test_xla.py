{% import "flags.j2" as flags with context %}
"""machinery/tpu without a TPU: spawn, replica start-up, world size, shim, loader errors{{ ", padded eval batches,
eval metrics" if flags.eval_metric }}."""

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import ignite.distributed as idist
import pytest
import torch
{% if flags.eval_metric %}
import torch_xla
{% endif %}
import torch_xla.core.xla_model as xm
{% if flags.eval_metric %}
import torch_xla.debug.metrics as met
{% endif %}
import torch_xla.runtime as xr
{% if flags.eval_metric %}
from ignite.engine import Engine
from torch import nn
{% endif %}
from torch.utils.data import DataLoader

{% if flags.eval_metric %}
import metrics
{% endif %}
{% if flags.segmentation %}
from data import IGNORE_INDEX, NUM_CLASSES
{% endif %}
{% if flags.eval_metric %}
from machinery.data.loaders import EvalShard
{% endif %}
from machinery.tpu import xla
from machinery.tpu.device_loaders import device_loader
{% if flags.eval_metric %}
from machinery.training.evaluation import evaluation_engine
{% endif %}
{% if flags.segmentation %}
from models import SegmentationLoss
{% endif %}

TESTS_DIR = Path(__file__).resolve().parent


def record_replica(local_rank: int, config: SimpleNamespace) -> None:
    """A stand-in for ``main.run``: each replica writes where it runs, for the test below to read."""
    replica = {
        "local_rank": local_rank,
        "rank": idist.get_rank(),
        "world_size": idist.get_world_size(),
        "backend": idist.backend(),
        "devices": xr.global_runtime_device_count(),
    }
    (Path(config.records) / f"replica_{replica['rank']}.json").write_text(json.dumps(replica))


def test_launch_spawns_one_replica_per_device(tmp_path: Path) -> None:
    # In a fresh process: torch_xla.launch refuses to start where the XLA runtime is already in use (by other tests).
    # nproc_per_node=8 whatever the device count: PJRT takes nprocs=None (all devices) or 1, and 8 raises.
    launch = (
        "import sys, types, test_xla; from machinery.tpu import xla; "
        "xla.launch_replicas(test_xla.record_replica, types.SimpleNamespace(nproc_per_node=8, records=sys.argv[1]))"
    )
    path = os.pathsep.join([str(TESTS_DIR), str(TESTS_DIR.parent), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", launch, str(tmp_path)],
        cwd=TESTS_DIR.parent,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"launch failed:\n{proc.stderr[-3000:]}"
    replicas = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("replica_*.json"))]
    assert replicas, "launch ran no replica"
    devices = replicas[0]["devices"]
    assert len(replicas) == devices, f"{len(replicas)} replica(s) ran on {devices} device(s)"
    assert [replica["rank"] for replica in replicas] == list(range(devices)), "each replica has its own rank"
    for replica in replicas:
        assert replica["world_size"] == devices and replica["backend"] == "xla-tpu", replica


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

    monkeypatch.setattr(xla.idist, "Parallel", FakeParallel)
    ran = []
    config = SimpleNamespace(nproc_per_node=8)
    xla._xla_replica(3, lambda local_rank, config: ran.append((local_rank, config)), config)
    assert opened == [{"backend": "xla-tpu"}], "nproc_per_node would make ignite call xmp.spawn(nprocs=8)"
    assert ran == [(0, config)], "run is called once, with ignite's local rank and the config"


@pytest.mark.parametrize("devices,warned", [(8, False), (1, True), (4, True)])
def test_world_size_differing_from_nproc_per_node_is_said_in_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, devices: int, warned: bool
) -> None:
    monkeypatch.setattr(xla.idist, "get_world_size", lambda: devices)
    logger = logging.getLogger("test-world")
    with caplog.at_level(logging.INFO, logger="test-world"):
        xla.check_replicas(SimpleNamespace(nproc_per_node=8), logger)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if warned:
        assert warnings == [
            f"Expected 8 TPU replicas (nproc_per_node) but this runtime has {devices} device(s): "
            f"training on {devices} replica(s). A TPU v5e-1 (Colab) has one chip; Kaggle's TPU v5e-8 and "
            "8-chip TPU VMs have eight."
        ]
    else:
        assert warnings == []


class _Unreadable(torch.utils.data.Dataset):
    """Eight items, the sixth unreadable (a truncated image, say), or only the first time it is read (a network
    file system's hiccup)."""

    def __init__(self, once: bool = False) -> None:
        self.once = once
        self.failed = threading.Event()

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == 5 and not (self.once and self.failed.is_set()):
            self.failed.set()
            raise ValueError("cannot read item 5")
        return torch.tensor([float(index)])


class _FailingPass:
    """Batches whose pass fails as it starts, as a persistent loader's does once one of its workers has died."""

    def __len__(self) -> int:
        return 4

    def __iter__(self) -> Iterator[list[int]]:
        raise RuntimeError("DataLoader worker (pid(s) 1) exited unexpectedly")


@pytest.mark.parametrize("where", ["mid-pass", "at a pass's start", "in a pass left early"])
def test_a_loader_error_is_raised_in_the_loop_taking_the_pass_that_met_it(where: str) -> None:
    """torch_xla's loader thread prints a loader's error and ends the pass as if the data had run out (an epoch cut
    short), and one met as a pass starts leaves the loop waiting for a batch for ever: the run must fail with it. The
    thread reads ahead: an error met in a pass left early (an evaluation's eval_epoch_length batches) is not the next
    pass's. The DataLoader stays where code unwrapping a device loader finds it (engine.py seeds its batches)."""
    dataset = _Unreadable(once=where == "in a pass left early")
    batches = {"batch_sampler": _FailingPass()} if where == "at a pass's start" else {"batch_size": 2}
    loader = DataLoader(dataset, **batches)
    on_device = device_loader(loader)
    assert on_device._loader is loader, "the device loader hides its DataLoader"
    if where == "in a pass left early":
        next(iter(on_device))
        assert dataset.failed.wait(60), "the loader thread did not read ahead to the unreadable item"
    taken: dict[str, object] = {}

    def take() -> None:
        try:
            taken["batches"] = [batch.cpu().flatten().tolist() for batch in on_device]
        except Exception as raised:
            taken["error"] = str(raised)

    loop = threading.Thread(target=take, daemon=True)
    loop.start()
    loop.join(60)
    assert not loop.is_alive(), f"{where}: the loop waits for a batch for ever"
    if where == "in a pass left early":
        assert taken == {"batches": [[0, 1], [2, 3], [4, 5], [6, 7]]}, f"the next pass was not whole: {taken}"
    else:
        error = "cannot read item 5" if where == "mid-pass" else "exited unexpectedly"
        assert error in str(taken.get("error")), f"{where}: the pass ended without the loader's error: {taken}"


def test_compat_shim_adds_only_the_missing_torch_xla_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in xla.REMOVED_NAMES:
        monkeypatch.delattr(xm, name, raising=False)
    own = object()
    monkeypatch.setattr(xm, "get_ordinal", own, raising=False)  # as on an older torch_xla
    assert xla.add_removed_names() == ["xrt_world_size", "get_local_ordinal"]
    assert xm.get_ordinal is own, "a name torch_xla still has must be left alone"
    assert xm.xrt_world_size is xr.world_size and xm.get_local_ordinal is xr.local_ordinal
{% if flags.eval_metric %}


def test_eval_batches_are_padded_to_one_shape_with_their_real_row_count() -> None:
    numbers = list(range(10))
    loader = device_loader(DataLoader(numbers, batch_size=4, sampler=EvalShard(numbers)))
    batches = [(batch.cpu().tolist(), real) for batch, real in loader]
    assert batches == [([0, 1, 2, 3], 4), ([4, 5, 6, 7], 4), ([8, 9, 8, 8], 2)], "the short last batch is padded"


def test_the_metrics_on_the_device_score_padded_batches_as_on_the_cpu_from_the_real_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """metrics.py's metrics through the evaluator on the XLA device (the batches padded to one shape, the metrics'
    state read once) give what the same metrics give on the CPU from the real rows alone: a metric added to
    eval_metrics is checked here too."""
    device = torch_xla.device()
    monkeypatch.setattr(idist, "device", lambda: device)
    loss_fn, batches = eval_outputs(torch.Generator().manual_seed(0))
    on_cpu = Engine(lambda engine, batch: batch)
    for name, metric in metrics.eval_metrics(loss_fn).items():
        metric.attach(on_cpu, name)
    expected = on_cpu.run(batches).metrics
    # The short last batch padded with copies of its first row, as device_loader pads it: counted, they show.
    padded = [
        (tuple(torch.cat([t, t[:1].expand(4 - len(t), *t.shape[1:])]).to(device) for t in batch), len(batch[0]))
        for batch in batches
    ]
    evaluator = evaluation_engine(lambda engine, batch: batch, nn.Identity(), metrics.eval_metrics(loss_fn))
    torch_xla.sync()
    reads = met.metric_data("TransferFromDeviceTime")
    scores = evaluator.run(padded).metrics
    read = met.metric_data("TransferFromDeviceTime")[0] - (reads[0] if reads else 0)
    assert scores.keys() == expected.keys()
    for name, value in expected.items():
        assert scores[name] == pytest.approx(value, rel=1e-6), name
    assert read == 1, f"the evaluation read the device {read} times"
{% endif %}
{% if flags.segmentation %}


def eval_outputs(generator: torch.Generator) -> tuple[nn.Module, list[tuple[torch.Tensor, torch.Tensor]]]:
    """The loss and 3 eval batches' logits and masks (the last one short), some pixels ignored."""
    batches = []
    for rows in (4, 4, 3):
        targets = torch.randint(0, NUM_CLASSES, (rows, 8, 8), generator=generator)
        targets[:, :, :2] = IGNORE_INDEX  # VOC's borders: not scored
        batches.append((torch.randn(rows, NUM_CLASSES, 8, 8, generator=generator), targets))
    return SegmentationLoss(0.5), batches
{% elif flags.classifier %}


def eval_outputs(generator: torch.Generator) -> tuple[nn.Module, list[tuple[torch.Tensor, torch.Tensor]]]:
    """The loss and 3 eval batches' logits and labels (the last one short)."""
    batches = [
        (torch.randn(rows, 10, generator=generator), torch.randint(0, 10, (rows,), generator=generator))
        for rows in (4, 4, 3)
    ]
    return nn.CrossEntropyLoss(), batches
{% endif %}
