"""The test lanes' driver (scripts/lanes.py): what it bakes, runs and installs, without building a venv."""

from pathlib import Path

import lanes
import pytest
from answers import TEMPLATES
from packaging.requirements import Requirement

# Releases a lower bound once admitted that the lowest lane found broken (`bash scripts/lanes.sh lowest`).
BROKEN_RELEASES = {
    # 3.7.0-3.7.2: built against NumPy 1 without requiring numpy<2, "numpy.core.multiarray failed to import"
    # beside NumPy 2; 3.7.3-3.8.3 require numpy<2, with which pyarrow (under datasets) fails to import.
    "matplotlib": ["3.7.0", "3.7.2", "3.7.3", "3.8.3"],
}


def test_a_lane_bakes_every_template_with_every_launcher_but_the_tpus() -> None:
    planned = lanes.plan()
    assert sorted((template, launcher) for template, launcher, _ in planned) == sorted(
        (template, launcher) for template in TEMPLATES for launcher in ("none", "spawn", "torchrun")
    ), "a lane must cover each template with launcher none, spawn and torchrun"
    for template, launcher, answers in planned:
        assert answers["include_test"] is True, f"{template} {launcher}: the lane runs the project's own tests"
        assert answers.get("backend") != "xla-tpu", "the TPU pins are exact: no lane touches them"
        if launcher != "none":
            assert answers["backend"] == "gloo", f"{template} {launcher}: a lane runs gloo processes on a CPU"
    torchrun = [answers for _, launcher, answers in planned if launcher == "torchrun"]
    assert all(a["argparser"] == "hydra" for a in torchrun) and lanes.LANE_CONFIG["torchrun"] == {
        "mixed_precision": "bfloat16"
    }, "torchrun projects take Hydra and mixed precision, so the lanes cover those dependencies too"


def test_the_tpu_lane_trains_each_templates_tpu_project_on_the_other_supported_torch_xla(tmp_path: Path) -> None:
    planned = lanes.plan("xla-2.8")
    assert [(template, answers["backend"]) for template, _, answers in planned] == [(t, "xla-tpu") for t in TEMPLATES]
    project = tmp_path / "tpu"
    project.mkdir()
    (project / "requirements.txt").write_text(
        "# also supported: torch==2.8.0 torch_xla[tpu]==2.8.0\ntorch==2.9.0\ntorch_xla[tpu]==2.9.0\n"
        "pytorch-ignite>=0.5.5,<0.6\n# also supported: torchvision==0.23.0\ntorchvision==0.24.0 # for torch 2.9.0\n"
    )
    assert lanes.requirements([project], "xla-2.8") == [
        "torch==2.8.0",
        "torch_xla==2.8.0",  # no libtpu on a CPU
        "pytorch-ignite>=0.5.5,<0.6",
        "torchvision==0.23.0",
        *lanes.TEST_REQUIREMENTS,
    ]
    assert lanes.lane_env(tmp_path, "xla-2.8")["PJRT_DEVICE"] == "CPU", "the TPU lane runs on the XLA CPU device"
    tpu_project = lanes.bake("gan", {"backend": "xla-tpu"}, tmp_path)
    assert lanes.train_command(tpu_project)[:2] == ["python", "main.py"], "the README's command, PJRT_DEVICE=TPU left"


def test_lowest_lane_resolves_each_lower_bound_to_its_minimum_and_newest_installs_as_a_user_does(
    tmp_path: Path,
) -> None:
    requirements = tmp_path / "requirements.txt"
    lowest = lanes.install_commands("lowest", tmp_path / "venv", requirements)
    resolver = lowest[-1]
    assert "uv" in Path(resolver[0]).name and resolver[1:3] == ["pip", "install"], resolver
    assert resolver[resolver.index("--resolution") + 1] == "lowest-direct", "lowest must take every bound's minimum"
    assert resolver[-2:] == ["-r", str(requirements)]

    newest = lanes.install_commands("newest", tmp_path / "venv", requirements)
    assert newest[-1][1:] == ["-m", "pip", "install", "--quiet", "-r", str(requirements)], (
        "newest must be a plain `pip install -r requirements.txt`, what a user runs"
    )
    assert not any("--resolution" in command or "-c" in command for command in newest)


def test_a_lane_venv_holds_the_union_of_the_requirements_and_is_rebuilt_when_it_changes(tmp_path: Path) -> None:
    vision, text = tmp_path / "vision", tmp_path / "text"
    for project, text_ in ((vision, "torch>=2.4\ntorchvision>=0.19\n"), (text, "torch>=2.4\ntransformers>=5.0,<6\n")):
        project.mkdir()
        (project / "requirements.txt").write_text(text_)
    union = lanes.requirements([vision, text])
    assert union == ["torch>=2.4", "torchvision>=0.19", "transformers>=5.0,<6", *lanes.TEST_REQUIREMENTS], union

    python = lanes.sys.executable
    key = lanes.venv_key("lowest", python, union)
    assert key == lanes.venv_key("lowest", python, list(union)), "the same inputs must reuse the venv"
    assert key != lanes.venv_key("lowest", python, [*union, "matplotlib>=3.8"]), "a new requirement rebuilds it"
    assert key != lanes.venv_key("newest", python, union), "each lane has its own venv"


def test_a_lane_trains_with_the_readmes_command_and_briefly(tmp_path: Path) -> None:
    template, launcher, answers = next(row for row in lanes.plan() if row[1] == "torchrun")
    project = lanes.bake(template, answers, tmp_path)
    assert lanes.train_command(project)[:3] == ["torchrun", "--nproc_per_node=2", "main.py"]
    assert "requirements.txt" in {path.name for path in project.iterdir()}
    lanes.make_offline(project)
    config = (project / "config.yaml").read_text()
    assert "dataset: synthetic" in config and "max_epochs: 2" in config, "the lane's run must be offline and brief"


@pytest.mark.parametrize("template", TEMPLATES)
def test_generated_requirements_exclude_the_releases_the_lowest_lane_found_broken(bake, template: str) -> None:
    project = bake(template, argparser="hydra")
    for line in (project / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        for release in BROKEN_RELEASES.get(requirement.name, []):
            assert not requirement.specifier.contains(release), (
                f"{template}'s requirements.txt allows {requirement.name} {release}, which fails with the newest"
                f" releases of its dependencies: raise the bound ({line})"
            )
