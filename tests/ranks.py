"""What each process of a distributed run trained on (tests/probes/rank_records.py), and the checks of it."""

import os
import re
import subprocess
from pathlib import Path

from answers import REPO
from checkpoints import differences
from projects import run_cmd


def run_recording_ranks(
    cmd: list[str], cwd: Path, records: Path, timeout: int = 600, env: dict | None = None, returncode: int = 0
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """Run a distributed training command; return it and what each of its processes trained on, by rank.

    ``tests/probes/rank_records.py`` records, in every process, its rank, the trainer's iteration and
    epoch, a digest of each training batch and the networks' final weights: the log shows rank 0 only. It
    also leaves a gloo thread in Python as the processes end: if they then abort (SIGABRT, "terminate called
    without an active exception"), a training process ended through the interpreter's shutdown instead of
    ``end_process`` (preemption.py).
    """
    import torch

    records.mkdir(parents=True, exist_ok=True)
    paths = [str(REPO / "tests" / "probes"), os.environ.get("PYTHONPATH", "")]
    probe = {"PYTHONPATH": os.pathsep.join(filter(None, paths)), "RANK_PROBE_DIR": str(records)}
    proc = run_cmd(cmd, cwd, timeout, env={**probe, **(env or {})}, returncode=returncode)
    return proc, [torch.load(path, weights_only=True) for path in sorted(records.glob("rank*.pt"))]


def with_eval_set_of(project: Path, size: int) -> None:
    """Make the project's synthetic eval set ``size`` samples long, as a user edits data.py's constant: a
    size no process count divides shows whether each sample is scored once (samplers pad by repeating)."""
    data = project / "data.py"
    sizes = re.compile(r"^SYNTHETIC_SIZES = \((\d+), \d+\)(?=  #|$)", flags=re.MULTILINE)
    text, edits = sizes.subn(rf"SYNTHETIC_SIZES = (\1, {size})", data.read_text())
    assert edits == 1, "data.py has no SYNTHETIC_SIZES = (train, eval) line to edit"
    data.write_text(text)


def check_each_eval_sample_scored_once(ranks: list[dict], size: int) -> set[str]:
    """The last evaluation of every process: together they scored each of the ``size`` eval samples once
    (no sample repeated, no padding row counted) and all ended with the same metrics; return the rows."""
    last = [record["evaluations"][-1] for record in ranks]
    rows = [row for evaluation in last for row in evaluation["rows"]]
    assert len(rows) == len(set(rows)) == size, (
        f"{len(rows)} rows scored, {len(set(rows))} distinct, for an eval set of {size}: each sample must be "
        "scored once (a sampler that pads the set repeats some)"
    )
    for record, evaluation in zip(ranks, last, strict=True):
        assert str(evaluation["metrics"]) == str(last[0]["metrics"]), (
            f"process {record['rank']} ended its evaluation with {evaluation['metrics']}, process 0 with "
            f"{last[0]['metrics']}: the metrics are summed across processes, the same on each"
        )
    return set(rows)


def check_both_ranks_trained(ranks: list[dict], iterations: int, networks: list[dict]) -> None:
    """Two processes each trained every iteration on batches of their own (each its share of the data), and
    ended with the same parameters (their gradients averaged at each step): those of the ``networks`` rank 0
    saved. Buffers (BatchNorm's running statistics) are rank 0's in the checkpoint; DistributedDataParallel
    sends them to every rank before each forward pass, which then updates them with its own batch."""
    assert [(r["rank"], r["world_size"]) for r in ranks] == [(0, 2), (1, 2)], "one record per rank of a world of 2"
    for record in ranks:
        rank = record["rank"]
        assert record["iteration"] == len(record["batches"]) == iterations, f"rank {rank} trained {record['iteration']}"
        assert len(record["weights"]) == len(networks), f"rank {rank} built {len(record['weights'])} networks"
        for index, (weights, saved) in enumerate(zip(record["weights"], networks, strict=True)):
            if rank:
                parameters = record["parameters"][index]
                weights, saved = ({name: w[name] for name in parameters} for w in (weights, saved))
            diffs = differences(weights, saved, f"rank {rank}'s network {index}")
            assert not diffs, "each rank must end with the parameters rank 0 saved:\n" + "\n".join(diffs)
    shared = set(ranks[0]["batches"]) & set(ranks[1]["batches"])
    assert not shared, f"{len(shared)} batch(es) trained on by both ranks: each must train on its own share"
