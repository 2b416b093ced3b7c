"""TPU projects trained as 8 replicas, the TPU rule, with the README's command and the generated code unchanged.

No TPU exists here: ``tests/probes/xla_cpu_replicas.py`` makes the XLA CPU runtime 8 devices with working
collectives (its replicas are threads of one process), and ``tests/probes/rank_records.py`` records what
each replica trained on. These runs check what only several replicas show: the gradients all-reduced, a
shard of the data each, the training checkpoints written once, by replica 0.
"""

import math
import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from answers import TEMPLATES
from checkpoints import check_loads_without_torch_xla, differences, load_checkpoint
from environments import XLA_CPU, XLA_LIGHT_MODELS, XLA_PYTHON
from projects import make_offline, read_log, readme_train_command, run_dirs
from ranks import check_each_eval_sample_scored_once, run_recording_ranks, with_eval_set_of

pytestmark = pytest.mark.slow  # 8 XLA replicas on 2 cores: not in the quick lane

REPLICAS = 8
# 2 samples per replica and step (BatchNorm needs 2), 2 epochs of 2 iterations, 1 eval batch per replica.
REPLICA_CONFIG = {
    "batch_size": 2 * REPLICAS,
    "eval_batch_size": 2 * REPLICAS,
    "train_epoch_length": 2,
    "eval_epoch_length": 1,
}
# Eval sets no replica count divides, scored whole: 8 replicas score 9 or 10 images each (5 batches of 2, the
# last one short on some), segmentation's 3 or 2 scenes (2 batches on some replicas, 1 on the others).
EVAL_SIZES = {"vision-classification": 75, "vision-segmentation": 21}


def bake_for_replicas(bake, template: str, **config) -> Path:
    """Bake ``template`` for the TPU with the short config of the 8-replica runs and these values."""
    project = bake(template, backend="xla-tpu")
    keys = yaml.safe_load((project / "config.yaml").read_text())
    # The lightest models: each is compiled 8 times over.
    values = {k: v for k, v in REPLICA_CONFIG.items() if k in keys} | XLA_LIGHT_MODELS.get(template, {})
    if template in EVAL_SIZES:
        with_eval_set_of(project, EVAL_SIZES[template])
        values["eval_epoch_length"] = None
    make_offline(project, **values | config)
    return project


def run_as_replicas(
    project: Path, records: Path, env: dict | None = None, replicas: int = REPLICAS, returncode: int = 0
) -> list[dict]:
    """Train ``project`` with its README's command as 8 XLA replicas on the CPU (or ``replicas``); return each
    replica's record (``records``: where they are written)."""
    argv, readme_env = readme_train_command(project, python=XLA_PYTHON)
    assert readme_env == {"PJRT_DEVICE": "TPU"}, "the README runs on the TPU: the harness makes it the CPU"
    harness = {"XLA_CPU_REPLICAS": str(replicas), "XLA_FLAGS": XLA_CPU["XLA_FLAGS"], **readme_env, **(env or {})}
    return run_recording_ranks(argv, project, records, env=harness, returncode=returncode)[1]


def train_as_replicas(
    bake,
    tmp_path: Path,
    template: str,
    env: dict | None = None,
    replicas: int = REPLICAS,
    **config: int,
) -> tuple[Path, dict, list[dict]]:
    """Bake ``template`` for the TPU and train it with its README's command as 8 XLA replicas on the CPU (or
    ``replicas``), with these config values; return the run directory, its log and each replica's record."""
    project = bake_for_replicas(bake, template, **config)
    ranks = run_as_replicas(project, tmp_path / "ranks", env, replicas)
    (run_dir,) = run_dirs(project)
    return run_dir, read_log(run_dir), ranks


def evaluate_alone(run_dir: Path, checkpoint: Path, tmp_path: Path, project: Path | None = None) -> dict:
    """The evaluation of ``checkpoint``'s model (the average of its weights, where it keeps one) on one XLA device,
    by a copy of the run's project (or ``project``): its one training iteration done, the probe loads the
    checkpoint's model, which the project's evaluation scores."""
    source = project or run_dir.parent.parent
    project = shutil.copytree(source, tmp_path / "alone", ignore=shutil.ignore_patterns("logs"))
    config = yaml.safe_load((project / "config.yaml").read_text()) | {"max_epochs": 1, "train_epoch_length": 1}
    (project / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    argv, _ = readme_train_command(project, python=XLA_PYTHON)
    env = {**XLA_CPU, "RANK_PROBE_EVALUATE": str(checkpoint)}
    _, (record,) = run_recording_ranks(argv, project, tmp_path / "alone-ranks", env=env)
    return record["evaluations"][0]


def parameters(record: dict) -> list[dict[str, torch.Tensor]]:
    """Each network's parameters (not its buffers: BatchNorm's statistics follow each replica's batches)."""
    return [{n: w[n] for n in names} for w, names in zip(record["weights"], record["parameters"], strict=True)]


# The average of the weights (ema) where it costs no run of its own: the 8 replicas evaluate it, and it is what the
# checkpoint keeps and one device scores alike.
AVERAGED = {"vision-classification"}


# The templates whose code differs on the replicas' path: what 8 replicas share (the shards, the all-reduce, replica
# 0's checkpoints, the evaluation's sums across replicas) is machinery's and the classifiers'; text-classification's
# model and batches on the XLA device are checked by its one-device run (test_xla_runs.py). Vision stands for both
# classifiers (80 s of a text run on 8 replicas saved); segmentation scores per pixel; the GAN trains two networks.
REPLICA_TEMPLATES = [template for template in TEMPLATES if template != "text-classification"]


@pytest.mark.parametrize("template", REPLICA_TEMPLATES)
def test_tpu_project_trains_as_8_replicas_that_end_alike_on_shards_of_their_own(bake, tmp_path, template) -> None:
    averaged = {"ema_momentum": 0.001} if template in AVERAGED else {}
    run_dir, log, ranks = train_as_replicas(bake, tmp_path, template, **averaged)
    assert "World size: 8, backend: xla-tpu" in log["text"], log["text"][-3000:]
    assert [(r["rank"], r["world_size"], r["iteration"]) for r in ranks] == [(k, 8, 4) for k in range(8)], (
        "each of the 8 replicas must train all 4 iterations"
    )
    # The gradients are all-reduced (xm.optimizer_step) and every replica began from replica 0's weights.
    for record in ranks[1:]:
        diffs = differences(parameters(record), parameters(ranks[0]), f"replica {record['rank']}")
        assert not diffs, "every replica must end with replica 0's parameters:\n" + "\n".join(diffs[:10])
    batches = [batch for record in ranks for batch in record["batches"]]
    assert len(set(batches)) == len(batches) == 8 * 4, "each replica must train on batches of its own shard"
    # The counters are the process's, all 8 replicas together: none compiled after the first epoch.
    compiled = re.search(r"compilations per epoch \[(\d+), (\d+)\]", log["text"])
    assert compiled, f"no XLA counters in training.log:\n{log['text'][-2000:]}"
    assert compiled[2] == "0", f"8 replicas compiled again in epoch 2: {compiled[0]}"
    # Training checkpoints: written once per save, by replica 0, loadable without torch_xla.
    checkpoints = sorted(path.name for path in run_dir.glob("training_checkpoint_*.pt"))
    assert checkpoints == ["training_checkpoint_2.pt", "training_checkpoint_4.pt"], checkpoints
    for record in ranks:
        put = [name for name in record["renamed"] if name.endswith(".pt")]
        expected = [name for name in ranks[0]["renamed"] if name.endswith(".pt")] if record["rank"] == 0 else []
        assert put == expected, f"replica {record['rank']} put {put} in place: only replica 0 writes checkpoints"
    assert set(checkpoints) <= set(ranks[0]["renamed"]), "replica 0 wrote the training checkpoints"
    saved = load_checkpoint(run_dir / "training_checkpoint_4.pt")
    networks = [saved["model"]] if "model" in saved else [saved["generator"], saved["discriminator"]]
    saved = parameters({"weights": networks, "parameters": ranks[0]["parameters"]})
    assert not differences(saved, parameters(ranks[0]), "checkpoint"), "the checkpoint is replica 0's"
    check_loads_without_torch_xla(run_dir / "training_checkpoint_4.pt")
    if template not in EVAL_SIZES:
        return
    # The last evaluation scored every eval sample once, its sums added up across the 8 replicas: it equals
    # the same model's evaluation on one device (replica 0's parameters and buffers: the checkpoint's).
    rows = check_each_eval_sample_scored_once(ranks, EVAL_SIZES[template])
    alone_project = None
    if template in AVERAGED:  # the checkpoint's average, scored by the project made without one
        checkpoint = load_checkpoint(run_dir / "training_checkpoint_4.pt")
        assert checkpoint["ema_model"].keys() == checkpoint["model"].keys(), "the average of every weight"
        assert differences(checkpoint["ema_model"], checkpoint["model"]), "the average is not the trained weights"
        alone_project = bake_for_replicas(bake, template)
    alone = evaluate_alone(run_dir, run_dir / "training_checkpoint_4.pt", tmp_path, alone_project)
    assert set(alone["rows"]) == rows, "one device scored other samples than the 8 replicas together"
    replicas = ranks[0]["evaluations"][-1]["metrics"]
    assert alone["metrics"].keys() == replicas.keys(), f"metrics {list(alone['metrics'])}, {list(replicas)}"
    for name, value in alone["metrics"].items():
        if name == "loss":  # float32 sums added in another order (8 partial sums) round apart, by 1e-7 of it
            assert math.isclose(value, replicas[name], rel_tol=1e-6), f"loss {replicas[name]}, alone {value}"
        else:  # counts of right predictions (pixels) and their ratios: exact
            assert torch.equal(torch.as_tensor(replicas[name]), torch.as_tensor(value)), (
                f"{name}: {replicas[name]} on 8 replicas, {value} on one device"
            )


@pytest.fixture(scope="module")
def four_unreduced_replicas(tmp_path_factory, bake_for_a_shared_run) -> tuple[dict, list[dict]]:
    """One GAN run read by the two tests below: ``nproc_per_node`` 8 on a runtime of 4 devices, the gradients
    left un-reduced (``XLA_CPU_REPLICAS_UNREDUCED``); training.log and each replica's record."""
    tmp_path = tmp_path_factory.mktemp("four-unreduced")
    unreduced = {"XLA_CPU_REPLICAS_UNREDUCED": "1"}
    _, log, ranks = train_as_replicas(bake_for_a_shared_run, tmp_path, "gan", unreduced, replicas=4, max_epochs=1)
    return log, ranks


def test_replicas_without_the_gradient_all_reduce_end_apart(four_unreduced_replicas) -> None:
    """The negative control of the tests above: their equality of weights is the all-reduce's doing."""
    _, ranks = four_unreduced_replicas
    apart = [r["rank"] for r in ranks[1:] if differences(parameters(r), parameters(ranks[0]), "replica")]
    assert apart == [1, 2, 3], f"without the all-reduce, replicas {apart} only ended apart from replica 0"


def test_nproc_per_node_8_on_4_devices_says_so_and_trains_on_4_replicas(four_unreduced_replicas) -> None:
    """A TPU with 4 chips (one device on Colab is tested on the one XLA CPU device: test_xla_runs.py)."""
    log, ranks = four_unreduced_replicas
    found = "Expected 8 TPU replicas (nproc_per_node) but this runtime has 4 device(s): training on 4 replica(s)"
    assert log["text"].count(found) == 1, f"replica 0 must say what it found, once:\n{log['text'][-2000:]}"
    assert "World size: 4, backend: xla-tpu" in log["text"]
    assert [(r["rank"], r["world_size"], r["iteration"]) for r in ranks] == [(k, 4, 2) for k in range(4)]


def test_8_replicas_stopped_mid_epoch_stop_together_and_continue_to_the_end_of_a_run_never_stopped(
    bake, tmp_path
) -> None:
    """Replica 1's time limit runs out as iteration 6 of 8 starts (epoch 2 of 2), the others' much later
    (tests/probes/one_stop.py: each replica thread keeps a stop request of its own, as a TPU's replica processes
    do): the others learn of it only through the replicas' vote where they read the losses, every replica stops
    after the same iteration, replica 0 writes one checkpoint, and the command exits 0 (a time limit's stop, as
    the README says); the same command continues to the end. Deterministic, it ends with the networks,
    optimizers and trainer of the run never stopped, bit for bit. (A stop signal to the launcher reaches every
    replica at once, through its stop file: the TPU run of test_preemption.py stops that way.)

    The run never stopped is the same run continued from its epoch-1 checkpoint (copied before the stop), not
    one from scratch: the 8 replica threads share one process's CPU random generators, where a TPU's replicas
    are processes of their own, so which initial weights replica 0 draws (and every replica takes, from
    ``start_alike``) depends on how the threads interleave. For the same reason the checkpoints' record of
    those process-wide generators (``rng_states``: each replica reseeds them every iteration) is left out.
    """
    limits = {"deterministic": True, "limit_sec": 3600}  # 1 hour: replica 1's runs out at once (one_stop.py)
    project = bake_for_replicas(bake, "gan", train_epoch_length=4, log_every_iters=1, **limits)
    stopped = run_as_replicas(project, tmp_path / "stopped", {"ONE_STOP": "limit:1:6"})
    (run_dir,) = run_dirs(project)
    status = yaml.safe_load((run_dir / "status.yaml").read_text())
    at = status["iteration"]
    assert 6 <= at < 8, f"the run stopped after iteration {at}, not in the middle of epoch 2 (iterations 5 to 8)"
    assert status["reason"] == "another process's stop request", f"replica 0 learnt of it by the vote: {status}"
    assert [(r["rank"], r["iteration"]) for r in stopped] == [(k, at) for k in range(8)], "all stop together"
    checkpoint = f"training_checkpoint_{at}.pt"
    for record in stopped:
        expected = 1 if record["rank"] == 0 else 0
        assert record["renamed"].count(checkpoint) == expected, f"replica {record['rank']}: {record['renamed']}"

    # The run never stopped: a copy of the project whose run has only its epoch-1 checkpoint, continued.
    never_stopped = shutil.copytree(project, tmp_path / "never-stopped")
    (never_stopped / run_dir.relative_to(project) / checkpoint).unlink()
    assert (never_stopped / run_dir.relative_to(project) / "training_checkpoint_4.pt").is_file()
    run_as_replicas(never_stopped, tmp_path / "never-stopped-ranks")
    continued = run_as_replicas(project, tmp_path / "continued")
    assert run_dirs(project) == [run_dir], "the same command continues the run in its directory"
    assert [(r["rank"], r["iteration"]) for r in continued] == [(k, 8) for k in range(8)]
    assert len(continued[0]["batches"]) == 8 - at, "the continued run trains the iterations left, no more"
    expected = load_checkpoint(run_dirs(never_stopped)[0] / "training_checkpoint_8.pt", deterministic=True)
    got = load_checkpoint(run_dir / "training_checkpoint_8.pt", deterministic=True)
    for saved in (expected, got):
        del saved["trainer"]["rng_states"]  # the threads' shared generators (see above)
    diffs = differences(got, expected)
    assert not diffs, "the continued run ended apart from the run never stopped:\n" + "\n".join(diffs[:20])
