"""Test lanes beside the pinned one: the generated projects with the releases their requirements allow.

    python scripts/lanes.py newest|lowest|xla-2.8 [--template T ...] [--launcher L ...]

(`bash scripts/lanes.sh newest|lowest|xla-2.8` runs it with the base venv's Python.)

- ``newest``: what ``pip install -r requirements.txt`` gives a user today (the newest releases).
- ``lowest``: every lower bound at its minimum (uv's ``--resolution lowest-direct``: the requirements'
  own packages at the lowest release they allow, their dependencies as a resolver picks them).
- ``xla-2.8``: the TPU projects on the other torch_xla release they support (2.8.0, which Kaggle's TPU
  image ships), named in their requirements.txt ("# also supported: ..."), in place of the 2.9.0 pins,
  on one XLA CPU device (``PJRT_DEVICE=CPU``; torch_xla without its ``tpu`` extra: no libtpu here).

The lane bakes every template with each launcher that runs without a TPU (none; spawn and torchrun with
2 gloo processes, torchrun with Hydra and mixed precision) into ``.lanes/<lane>/``, builds ``.venv-<lane>``
from the union of the baked projects' requirements.txt plus pytest (rebuilt only when that union
changes), then for each project trains briefly, offline, with the README's command, and runs the
project's own tests. It prints a table and the versions used, and exits 1 if anything failed.
The newest and lowest lanes leave the TPU projects' exact pins (torch and torch_xla 2.9.0) alone.
"""

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml
from answers import REPO, TEMPLATES
from projects import XLA_CPU, XLA_CPU_CONFIG, XLA_OWN_TESTS, make_offline, readme_block

# What the tests and the lanes share (the templates, the quick-run edits, the README's blocks, ports) lives
# beside this script: scripts/answers.py and scripts/projects.py, on the tests' path too (pyproject.toml).

LANES = ("newest", "lowest", "xla-2.8")
# The answers of each launcher a lane covers (every launcher but the TPU's: the README's commands start two gloo
# processes where there are several), and on torchrun the other shapes a dependency can break (Hydra; autocast, a
# config key: MIXED_PRECISION).
LAUNCHERS: dict[str, dict] = {
    "none": {"launcher": "none"},
    "spawn": {"launcher": "spawn", "backend": "gloo"},
    "torchrun": {"launcher": "torchrun", "backend": "gloo", "argparser": "hydra"},
}
# The config keys each launcher's project trains with in a lane.
LANE_CONFIG: dict[str, dict] = {"torchrun": {"mixed_precision": "bfloat16"}}
# What the projects' own tests need beyond requirements.txt.
TEST_REQUIREMENTS = ["pytest>=8"]
# The packages whose versions a lane reports.
REPORTED = ["torch", "torch_xla", "torchvision", "pytorch-ignite", "transformers", "datasets", "hydra-core", "numpy"]
# Nothing reaches the network: Hugging Face libraries fail at once instead of downloading.
OFFLINE_ENV = {"PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def plan(lane: str = "newest") -> list[tuple[str, str, dict]]:
    """(template, launcher, answers) of every project a lane bakes: each template with each launcher (the
    TPU lane: each template's TPU project, whose replicas torch_xla's spawn starts)."""
    if lane == "xla-2.8":
        return [(template, "xla-tpu", {"backend": "xla-tpu", "include_test": True}) for template in TEMPLATES]
    return [
        (template, launcher, {**answers, "include_test": True})
        for template in TEMPLATES
        for launcher, answers in LAUNCHERS.items()
    ]


def bake(template: str, answers: dict, output_dir: Path) -> Path:
    """Generate one project with the base venv's cookiecutter; return its directory."""
    from cookiecutter.main import cookiecutter

    output_dir.mkdir(parents=True, exist_ok=True)
    return Path(
        cookiecutter(str(REPO), directory=template, no_input=True, extra_context=answers, output_dir=str(output_dir))
    )


def requirements(projects: list[Path], lane: str = "newest") -> list[str]:
    """The union of the projects' requirements.txt (first seen first), then what their tests need. The TPU
    lane takes the releases each names as "also supported" for its pins (torch_xla without ``[tpu]``)."""
    lines: list[str] = []
    for project in projects:
        text = (project / "requirements.txt").read_text().splitlines()
        also = [spec for line in text if line.startswith("# also supported:") for spec in line.split(":")[1].split()]
        also = {spec.split("==")[0].split("[")[0]: spec.replace("[tpu]", "") for spec in also}
        for line in text:
            line = line.split("#", 1)[0].strip()
            if lane == "xla-2.8":
                line = also.get(line.split("==")[0].split("[")[0], line)
            if line and line not in lines:
                lines.append(line)
    return lines + [line for line in TEST_REQUIREMENTS if line not in lines]


def install_commands(lane: str, venv: Path, requirements_file: Path) -> list[list[str]]:
    """How the lane's venv gets its packages (after ``python -m venv``): the user's pip, or uv's lowest bounds."""
    python = str(venv / "bin" / "python")
    if lane in ("newest", "xla-2.8"):
        return [
            [python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
            [python, "-m", "pip", "install", "--quiet", "-r", str(requirements_file)],
        ]
    if lane == "lowest":
        return [
            [python, "-m", "pip", "install", "--quiet", "uv"],
            [
                str(venv / "bin" / "uv"),
                "pip",
                "install",
                "--quiet",
                "--python",
                python,
                "--resolution",
                "lowest-direct",
                "-r",
                str(requirements_file),
            ],
        ]
    raise ValueError(f"unknown lane {lane!r}: use one of {LANES}")


def venv_key(lane: str, python: str, lines: list[str]) -> str:
    """What a lane's venv is built from: when it changes, the venv is rebuilt."""
    version = subprocess.run([python, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    return hashlib.sha256("\n".join([lane, version, *lines]).encode()).hexdigest()


def build_venv(lane: str, venv: Path, lines: list[str], python: str) -> bool:
    """Create (or reuse) the lane's venv; return whether it was built now."""
    key = venv_key(lane, python, lines)
    stamp = venv / ".lane-sha256"
    if stamp.exists() and stamp.read_text().strip() == key and (venv / "bin" / "python").exists():
        return False
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    requirements_file = venv / "lane-requirements.txt"
    requirements_file.write_text("\n".join(lines) + "\n")
    for command in install_commands(lane, venv, requirements_file):
        print("+", shlex.join(command), flush=True)
        subprocess.run(command, check=True)
    stamp.write_text(key + "\n")
    return True


def train_command(project: Path) -> list[str]:
    """The README's training command (``python main.py ...`` or ``torchrun ...``), without the variables it
    sets first (a TPU project's ``PJRT_DEVICE=TPU``: the TPU lane runs on the XLA CPU device)."""
    words = shlex.split(readme_block(project, "## Train"))
    while "=" in words[0]:
        words.pop(0)
    return words


def lane_env(venv: Path, lane: str = "newest") -> dict[str, str]:
    """The environment of a user with the lane's venv activated, offline (the TPU lane: on the XLA CPU device)."""
    path = f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    xla = XLA_CPU if lane == "xla-2.8" else {}
    return {**os.environ, **OFFLINE_ENV, **xla, "VIRTUAL_ENV": str(venv), "PATH": path}


def run_step(argv: list[str], cwd: Path, env: dict, log: Path, timeout: int) -> bool:
    """Run one step, its output into ``log``; whether it succeeded (a timeout fails it)."""
    with log.open("w") as out:
        out.write(f"$ {shlex.join(argv)}\n")
        out.flush()
        try:
            proc = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            out.write(f"\ntimed out after {timeout} s\n")
            return False
    return proc.returncode == 0


def versions(venv: Path) -> dict[str, str]:
    """The versions of REPORTED installed in the venv ("-" where one is not installed)."""
    code = (
        "import importlib.metadata as m, json\n"
        "def v(name):\n"
        "    try:\n"
        "        return m.version(name)\n"
        "    except m.PackageNotFoundError:\n"
        "        return '-'\n"
        f"print(json.dumps({{name: v(name) for name in {REPORTED!r}}}))"
    )
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lane", choices=LANES)
    parser.add_argument("--template", action="append", choices=TEMPLATES, help="only this template (repeatable)")
    parser.add_argument(
        "--launcher", action="append", choices=[*LAUNCHERS, "xla-tpu"], help="only this launcher (repeatable)"
    )
    parser.add_argument("--python", default=os.environ.get("PYTHON", "python3"), help="Python for the venv")
    args = parser.parse_args(argv)

    started = time.monotonic()
    work = REPO / ".lanes" / args.lane
    shutil.rmtree(work, ignore_errors=True)
    # Every project is baked, whatever the filters: the venv is the one a user of any of them gets.
    projects = []
    for template, launcher, answers in plan(args.lane):
        project = bake(template, answers, work / f"{template}-{launcher}")
        # The edits a user makes for a brief offline run, on the default models (the releases' claim is theirs)
        # but on XLA, where segmentation's takes minutes to compile; on a port of its own (make_offline's).
        light = XLA_CPU_CONFIG.get(template, {}) if launcher == "xla-tpu" else {}
        make_offline(project, light=False, **light, **LANE_CONFIG.get(launcher, {}))
        projects.append((template, launcher, project))
    lines = requirements([project for _, _, project in projects], args.lane)
    print(f"{args.lane} lane requirements: {', '.join(lines)}", flush=True)

    venv = REPO / f".venv-{args.lane}"
    build_started = time.monotonic()
    built = build_venv(args.lane, venv, lines, args.python)
    build_seconds = time.monotonic() - build_started
    print(f"{venv}: {'built' if built else 'reused'} in {build_seconds:.0f} s", flush=True)

    env = lane_env(venv, args.lane)
    rows = []
    for template, launcher, project in projects:
        if (args.template and template not in args.template) or (args.launcher and launcher not in args.launcher):
            continue
        step_started = time.monotonic()
        port = {"PET_MASTER_PORT": str(yaml.safe_load((project / "config.yaml").read_text()).get("master_port"))}
        trained = run_step(train_command(project), project, {**env, **port}, project / "lane-train.log", timeout=900)
        own_tests = XLA_OWN_TESTS.get(template, []) if launcher == "xla-tpu" else []
        tested = run_step(
            [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", *own_tests],
            project,
            env,
            project / "lane-pytest.log",
            timeout=1800,
        )
        seconds = time.monotonic() - step_started
        rows.append((template, launcher, trained, tested, seconds, project))
        print(
            f"{template} {launcher}: train {'ok' if trained else 'FAILED'}, tests {'ok' if tested else 'FAILED'}"
            f" ({seconds:.0f} s)",
            flush=True,
        )

    print(f"\n## {args.lane} lane\n")
    print("| template | launcher | train | own tests | seconds |")
    print("|---|---|---|---|---|")
    for template, launcher, trained, tested, seconds, _ in rows:
        outcome = " | ".join("ok" if ok else "failed" for ok in (trained, tested))
        print(f"| {template} | {launcher} | {outcome} | {seconds:.0f} |")
    print("\n" + ", ".join(f"{name} {version}" for name, version in versions(venv).items()))
    print(f"venv {'built' if built else 'reused'}: {build_seconds:.0f} s; total {time.monotonic() - started:.0f} s")
    failed = [row for row in rows if not (row[2] and row[3])]
    for template, launcher, trained, tested, _, project in failed:
        for step, ok in (("train", trained), ("pytest", tested)):
            if not ok:
                log = project / f"lane-{step}.log"
                print(f"\n--- {template} {launcher}: {step} failed; the end of {log} ---")
                print(log.read_text()[-4000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
