{% import "flags.j2" as flags with context %}
"""machinery/xla.py without a TPU: spawn, replica start-up, world size, shim{{ ", padded eval batches, eval metrics" if flags.eval_metric }}."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import ignite.distributed as idist
import pytest
{% if flags.eval_metric %}
import torch
import torch_xla
{% endif %}
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
{% if flags.segmentation %}
from ignite.metrics import ConfusionMatrix, IoU, mIoU
from ignite.metrics.confusion_matrix import cmAccuracy
{% elif flags.eval_metric %}
from ignite.metrics import Accuracy, Loss
{% endif %}
{% if flags.eval_metric %}
from torch.utils.data import DataLoader
{% endif %}

{% if flags.eval_metric %}
import metrics
{% endif %}
{% if flags.segmentation %}
from data import CLASSES, IGNORE_INDEX, NUM_CLASSES
{% endif %}
from machinery import xla
{% if flags.eval_metric %}
from machinery.loaders import EvalShard
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
        "import sys, types, test_xla; from machinery import xla; "
        "xla.launch(test_xla.record_replica, types.SimpleNamespace(nproc_per_node=8, records=sys.argv[1]))"
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
    loader = xla.device_loader(DataLoader(numbers, batch_size=4, sampler=EvalShard(numbers)))
    batches = [(batch.cpu().tolist(), real.item()) for batch, real in loader]
    assert batches == [([0, 1, 2, 3], 4), ([4, 5, 6, 7], 4), ([8, 9, 8, 8], 2)], "the short last batch is padded"
{% endif %}
{% if flags.segmentation %}


def test_confusion_matrix_counted_on_the_device_gives_ignites_scores_across_replicas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same predicted masks, scored by ignite's ConfusionMatrix metrics on the CPU and by
    metrics.SegmentationMetrics on the XLA device, in 3 replicas of 3 batches each, the last one padded."""
    device = torch_xla.device()
    monkeypatch.setattr(metrics.idist, "device", lambda: device)
    generator = torch.Generator().manual_seed(0)
    matrix = ConfusionMatrix(NUM_CLASSES)
    # Built before the matrix counts anything: building one of ignite's metrics on it resets it.
    mean_iou, iou, accuracy = mIoU(matrix), IoU(matrix), cmAccuracy(matrix)
    replicas = [metrics.SegmentationMetrics(CLASSES, IGNORE_INDEX) for _ in range(3)]
    for replica in replicas:
        for rows in (4, 4, 3):
            logits = torch.randn(rows, NUM_CLASSES, 8, 8, generator=generator)
            targets = torch.randint(0, NUM_CLASSES, (rows, 8, 8), generator=generator)
            targets[:, :, :2] = IGNORE_INDEX  # VOC's borders: not scored
            matrix.update((logits, targets.masked_fill(targets == IGNORE_INDEX, -1)))
            # Padding rows the model gets right (their target is their prediction): counted, they would show.
            padding = 4 - rows
            logits = torch.cat([logits, logits[:1].expand(padding, -1, -1, -1)])
            targets = torch.cat([targets, logits[:1].argmax(dim=1).expand(padding, -1, -1)])
            real = torch.arange(4) < rows
            replica.update((logits.to(device), targets.to(device), real.to(device)))

    def all_reduce(counts: torch.Tensor) -> torch.Tensor:
        """What all_reduce does across replicas: each one gets the sum of every replica's counts."""
        assert counts is replicas[0].counts
        return sum(replica.counts for replica in replicas)

    monkeypatch.setattr(metrics.idist, "all_reduce", all_reduce)
    scores = replicas[0].compute()
    assert scores["mIoU"] == pytest.approx(mean_iou.compute().item(), rel=1e-12)
    assert scores["pixel_accuracy"] == pytest.approx(accuracy.compute().item(), rel=1e-12)
    per_class = [scores[f"IoU_{name}"] for name in CLASSES]
    assert per_class == pytest.approx(iou.compute().tolist(), rel=1e-12)
    assert 0.0 < scores["mIoU"] < 1.0, "random predictions score some IoU, not all"
{% elif flags.eval_metric %}


def test_accuracy_and_loss_summed_on_the_device_equal_ignites_across_replicas(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same predictions, scored by ignite's Accuracy and Loss on the CPU and by metrics.ClassifierMetrics
    on the XLA device, in 3 replicas of 3 batches each, the last one padded."""
    device = torch_xla.device()
    monkeypatch.setattr(metrics.idist, "device", lambda: device)
    generator = torch.Generator().manual_seed(0)
    loss_fn = torch.nn.CrossEntropyLoss()
    accuracy, loss = Accuracy(), Loss(loss_fn)
    replicas = [metrics.ClassifierMetrics(loss_fn) for _ in range(3)]
    for replica in replicas:
        for rows in (8, 8, 5):
            logits = torch.randn(rows, 10, generator=generator)
            targets = torch.randint(0, 10, (rows,), generator=generator)
            accuracy.update((logits, targets))
            loss.update((logits, targets))
            # Padding rows the model gets right (their target is their argmax): counted, they would show.
            padding = 8 - rows
            logits = torch.cat([logits, logits[:1].expand(padding, -1)])
            targets = torch.cat([targets, logits[:1].argmax(dim=1).expand(padding)])
            real = torch.arange(8) < rows
            replica.update((logits.to(device), targets.to(device), real.to(device)))

    def all_reduce(sums: torch.Tensor) -> torch.Tensor:
        """What all_reduce does across replicas: each one gets the sum of every replica's sums."""
        assert sums is replicas[0].sums
        return sum(replica.sums for replica in replicas)

    monkeypatch.setattr(metrics.idist, "all_reduce", all_reduce)
    scores = replicas[0].compute()
    assert scores["accuracy"] == accuracy.compute(), "the counts must agree exactly"
    assert scores["loss"] == pytest.approx(loss.compute(), rel=1e-6)
{% endif %}
