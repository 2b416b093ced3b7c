"""The GPU benchmark's computations (bench/gpu.py, bench/gpu_loop.py), checked on the CPU: its tables, its
arithmetic, its data-wait clock against a deliberately slow loader, and its same-weights check against a
deliberately different loop. No GPU here: what runs is the script's own code, on a tiny model."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import gpu  # noqa: E402  (bench/gpu.py)
from gpu_loop import Setting, project_overrides, settings  # noqa: E402

TEMPLATES = json.loads((REPO / "cookiecutter.json").read_text())["templates"]


def cells_of(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def fake_row(setting: Setting, generated: bool, gen_it_s: float = 100.0, hand_it_s: float = 102.0) -> dict:
    """A row as gpu_loop.measure writes it."""
    row = {"setting": vars(setting), "label": setting.label, "hand_written": {}}
    row["hand_written"] = {"it_s": hand_it_s, "peak_mib": 2048.0, "weights": [1.5, 1.5]}
    if generated:
        row["generated"] = {"it_s": gen_it_s, "peak_mib": 2100.0, "weights": [1.5, 1.5]}
        row["data_wait"] = {"2": {"ms": 0.25, "it_s": 99.0}, "0": {"ms": 7.5, "it_s": 60.0}}
    else:
        row["not_generated"] = "not an option yet"
    return row


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_setting_is_a_row_and_every_row_has_every_column(template):
    convolutional = template != "text-classification"
    chosen = settings(template)
    # fp32, fp16, bf16 x compile off and on x (convolutional models) channels-last off and on, each once.
    assert len(set(chosen)) == len(chosen) == (12 if convolutional else 6)
    assert {s.precision for s in chosen} == {"fp32", "fp16", "bf16"}
    assert {s.compile for s in chosen} == {False, True}
    assert {s.channels_last for s in chosen} == ({False, True} if convolutional else {False})

    keys = {"mixed_precision", "compile"}  # what the projects say: the precision and compile, no memory format
    rows = [fake_row(s, project_overrides(keys, s) is not None) for s in chosen]
    rows[-1] = {"setting": vars(chosen[-1]), "label": chosen[-1].label, "skipped": "time budget"}
    text = gpu.table({"template": template, "device": "NVIDIA H200", "iterations": 100, "rows": rows})
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert cells_of(lines[0]) == gpu.COLUMNS
    body = [cells_of(line) for line in lines[2:]]
    assert [cells[0] for cells in body] == [s.label for s in chosen]
    assert all(len(cells) == len(gpu.COLUMNS) for cells in body)
    for setting, cells in zip(chosen, body, strict=True):
        row = dict(zip(gpu.COLUMNS, cells, strict=True))
        if setting == chosen[-1]:
            assert set(cells[1:]) == {"skipped (time budget)"}
        elif setting.channels_last:  # the projects cannot say it yet: not faked
            assert row["generated (it/s)"] == row["overhead"] == "n/a (not an option yet)"
            assert row["data wait, num_workers 2 (ms/step)"] == "n/a (not an option yet)"
            assert row["hand-written (it/s)"] == "102.0"
        else:
            assert row["generated (it/s)"] == "100.0" and row["overhead"] == "+2.0%"
            assert row["overhead (ms/step)"] == "+0.196"  # 10 ms a step against 9.804
            assert row["peak memory, generated (MiB)"] == "2,100"
            assert row["peak memory, hand-written (MiB)"] == "2,048"
            assert row["data wait, num_workers 2 (ms/step)"] == "0.25 (99.0 it/s)"
            assert row["data wait, num_workers 0 (ms/step)"] == "7.50 (60.0 it/s)"
            assert row["same weights after"] == "yes" and row["target <= 5%"] == "yes"


def test_each_setting_goes_to_the_project_as_its_config_key_where_it_has_one():
    # Today's projects: the precision as `mixed_precision` (null, float16, bfloat16) and `compile`; channels-last is
    # not an option yet.
    today = {"mixed_precision", "compile", "lr"}
    assert project_overrides(today, Setting("fp32")) == {"mixed_precision": None, "compile": False}
    assert project_overrides(today, Setting("bf16")) == {"mixed_precision": "bfloat16", "compile": False}
    assert project_overrides(today, Setting("fp16", compile=True)) == {"mixed_precision": "float16", "compile": True}
    assert project_overrides(today, Setting("fp32", channels_last=True)) is None
    # A project without a key of a setting runs that setting's default only.
    assert project_overrides({"mixed_precision"}, Setting("bf16")) == {"mixed_precision": "bfloat16"}
    assert project_overrides({"mixed_precision"}, Setting("bf16", compile=True)) is None
    # A project with the planned key too runs every setting, with no change here.
    planned = {"mixed_precision", "compile", "channels_last"}
    for setting in settings("vision-classification"):
        overrides = project_overrides(planned, setting)
        assert overrides == {
            "mixed_precision": {"fp32": None, "fp16": "float16", "bf16": "bfloat16"}[setting.precision],
            "compile": setting.compile,
            "channels_last": setting.channels_last,
        }


def test_overhead_is_the_extra_time_a_generated_step_takes():
    assert gpu.overhead(100.0, 105.0) == pytest.approx(0.05)
    assert gpu.overhead(105.0, 100.0) == pytest.approx(-0.047619, abs=1e-6)
    fp32 = Setting()
    within = dict(zip(gpu.COLUMNS, gpu.cells(fake_row(fp32, True, 100.0, 104.9)), strict=True))
    assert within["overhead"] == "+4.9%" and within["target <= 5%"] == "yes"
    beyond = dict(zip(gpu.COLUMNS, gpu.cells(fake_row(fp32, True, 100.0, 105.1)), strict=True))
    assert beyond["overhead"] == "+5.1%" and beyond["target <= 5%"] == "NO"


def test_the_cpu_diagnosis_is_a_row_of_its_own_against_the_same_hand_written_runs():
    row = fake_row(Setting(), True, gen_it_s=90.0, hand_it_s=100.0)
    row["generated_without_bar"] = {"it_s": 98.0, "peak_mib": None, "weights": [1.5]}
    lines = [
        line for line in gpu.table({"template": "t", "device": "CPU", "iterations": 9, "rows": [row]}).splitlines()
    ]
    body = [dict(zip(gpu.COLUMNS, cells_of(line), strict=True)) for line in lines if line.startswith("| fp32")]
    assert [r["setting"] for r in body] == [
        "fp32, eager",
        "fp32, eager: generated without its progress bar (diagnosis)",
    ]
    assert [r["overhead"] for r in body] == ["+11.1%", "+2.0%"]
    assert [r["target <= 5%"] for r in body] == ["NO", "yes"]


def test_the_same_weights_check_tells_a_different_loop_from_a_nondeterministic_device():
    row = fake_row(Setting(), True)
    assert gpu.same_weights(row) == "yes"
    row["generated"]["weights"] = [1.5 * (1 + 1e-6)] * 2  # another step: the weights differ, and every run agrees
    assert gpu.same_weights(row).startswith("NO (relative difference 1.0e-06")
    # A loop within 5% whose weights differ did not do the same work: the target is not met.
    assert dict(zip(gpu.COLUMNS, gpu.cells(row), strict=True))["target <= 5%"] == "NO"
    row["hand_written"]["weights"] = [1.5, 1.5 * (1 + 1e-7)]  # two hand-written runs differ: the device's atomics
    assert gpu.same_weights(row).startswith("nondeterministic device")
    bf16 = fake_row(Setting("bf16"), True)
    bf16["generated"]["weights"] = [1.6, 1.6]  # not expected to be exact: shown, not failed
    assert gpu.same_weights(bf16).startswith("- (not expected")


# Run in a baked vision project (its modules import as main.py's do): the script's own functions, tiny model, CPU.
IN_PROJECT = textwrap.dedent(
    """
    import json, sys, tempfile
    sys.path.insert(0, sys.argv[1])
    import torch
    import gpu, gpu_loop, loop
    from gpu_loop import (
        InMemory, Setting, SlowLoader, cached_batches, config_for, config_keys, generated, hand_written,
        project_overrides,
    )

    loop.WARMUP = 3
    cpu, n, out = torch.device("cpu"), 10, tempfile.mkdtemp()
    batches = cached_batches("vision-classification", config_for(1, out, num_workers=0), cpu)
    fast = generated(config_for(n, out, num_workers=0), n, cpu, InMemory(batches), tiny=True)
    slow = generated(config_for(n, out, num_workers=0), n, cpu, SlowLoader(batches, 0.05), tiny=True)
    hand = hand_written("vision-classification", config_for(n, out), n, Setting(), cpu, batches, True)
    # A deliberately different loop: the hand-written step at twice the learning rate.
    other = hand_written("vision-classification", config_for(n, out).model_copy(update={"lr": 0.002}), n,
                         Setting(), cpu, batches, True)
    bf16 = hand_written("vision-classification", config_for(n, out), n, Setting("bf16", channels_last=True), cpu,
                        batches, True)
    # How the baked project is told a compiled bf16 run, and what its config then holds (the bake's key included).
    said = project_overrides(config_keys(), Setting("bf16", compile=True))
    told = config_for(n, out, **said)
    project = {"said": said, "told": [told.mixed_precision, told.compile], "save_best_model": told.save_best_model}
    print(json.dumps({"fast": fast, "slow": slow, "hand": hand, "other": other, "bf16": bf16, "project": project}))
    """
)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """The tiny vision model's runs (bench/gpu_loop.py's functions), in a baked project."""
    from run import bake

    project = bake("vision-classification", tmp_path_factory.mktemp("gpu-bench"), save_best_model=False)
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", IN_PROJECT, str(REPO / "bench")],
        cwd=project, capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_data_wait_clock_sees_a_slow_loader(measured):
    fast, slow = measured["fast"], measured["slow"]
    # 50 ms a batch: every timed step waited that long for its batch, and ran no faster than the loader.
    assert 50 <= slow["wait_ms"] < 50 + 40
    assert slow["it_s"] < 1000 / 50
    # Batches in memory: next to no wait.
    assert fast["wait_ms"] < 5
    assert fast["it_s"] > slow["it_s"]


def test_the_same_weights_check_catches_a_different_loop(measured):
    fast, hand, other = measured["fast"], measured["hand"], measured["other"]
    assert fast["weights"] == hand["weights"]  # the generated trainer and the hand-written loop: the same work
    row = {
        "setting": vars(Setting()),
        "label": "fp32, eager",
        "generated": {"it_s": fast["it_s"], "peak_mib": None, "weights": [fast["weights"]]},
        "hand_written": {"it_s": hand["it_s"], "peak_mib": None, "weights": [hand["weights"]]},
    }
    assert gpu.same_weights(row) == "yes"
    row["hand_written"]["weights"] = [other["weights"]]
    assert gpu.same_weights(row).startswith("NO")
    # The CPU has no GPU memory to report; the table says so rather than 0.
    assert fast["peak_mib"] is None and gpu.cells(row)[gpu.COLUMNS.index("peak memory, generated (MiB)")] == "-"


def test_the_hand_written_loop_runs_other_settings(measured):
    # bf16 autocast and channels-last weights and images, on the CPU: the loop trains (other weights than fp32's).
    assert measured["bf16"]["it_s"] > 0
    assert measured["bf16"]["weights"] != measured["hand"]["weights"]


def test_settings_past_the_time_budget_are_rows_that_say_so():
    """bench/gpu.py's whole path (bake, bench/gpu_loop.py in it, its JSON, the table), on the CPU: past its
    deadline a setting is not measured, and its row says so."""
    import time

    labels = ["fp32, eager", "bf16, eager"]
    options = {"device": "cpu", "tiny": True, "settings": labels, "iterations": 3, "warmup": 2, "repeats": 1}
    result = gpu.measure("vision-classification", {**options, "deadline": time.time() - 1})
    assert [row["label"] for row in result["rows"]] == labels
    assert all(row["skipped"] == "time budget" for row in result["rows"])
    lines = [line for line in gpu.table(result).splitlines() if line.startswith("| fp32") or line.startswith("| bf16")]
    assert len(lines) == 2 and all(cells_of(line)[1] == "skipped (time budget)" for line in lines)


def test_the_baked_project_says_precision_and_compile_in_its_config(measured):
    # The bake's save_best_model=False is config.yaml's key now (no longer a question): the project reads it.
    project = measured["project"]
    assert project["said"] == {"mixed_precision": "bfloat16", "compile": True}
    assert project["told"] == ["bfloat16", True] and project["save_best_model"] is False


def test_the_bake_answers_the_questions_and_sets_the_rest_in_config_yaml(tmp_path):
    """bench/run.py's bake, which every benchmark bakes with: a question's answer goes to cookiecutter, a former one
    (a run-time key now) to config.yaml, where the project has that key (the GAN evaluates nothing: no best models)."""
    from run import bake

    project = bake("gan", tmp_path, argparser="fire", compile=True, save_best_model=False)
    assert "import fire" in (project / "machinery" / "cli.py").read_text()
    config = yaml.safe_load((project / "config.yaml").read_text())
    assert config["compile"] is True and "save_best_model" not in config
