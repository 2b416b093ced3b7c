"""The commands a generated project prints run as printed: the advice for nccl without a GPU, the
README's override example, and the README's multi-node command (two nodes on one machine), torchrun's and the
spawned processes'.

`tests/test_readme.py` checks the syntax of every command and hint of every README; these few real,
tiny runs show that the argparsers accept them.
"""

import os
import re
import shlex
import subprocess

import pytest
import torch
import yaml
from environments import PYTHON
from projects import make_offline, read_log, readme_train_command, run_cmd, run_dirs
from test_readme import override_hints, prose

pytestmark = (
    pytest.mark.slow
)  # they train generated projects with the commands their READMEs print: not in the quick lane

ADVICE = re.compile(r"add `([^`]+)` at the end of the command")


@pytest.mark.parametrize("argparser", ["argparse", "fire", "hydra"])
def test_nccl_advice_and_override_example_train_as_printed(bake, argparser: str) -> None:
    """Without a GPU, the README's nccl command stops with advice; the command plus that advice (plus the
    README's override example, for fire and hydra) trains on gloo."""
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: nccl would run")
    project = bake(argparser=argparser, backend="nccl", launcher="spawn")
    make_offline(project, max_epochs=1)
    argv, env = readme_train_command(project)
    stopped = subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=300, env={**os.environ, **env})
    assert stopped.returncode != 0, "nccl without a GPU must stop"
    advice = ADVICE.findall(stopped.stderr)
    assert len(advice) == 1, f"the nccl message must name one command-line fix:\n{stopped.stderr}"
    readme = (project / "README.md").read_text()
    assert f"add `{advice[0]}` at the end of the command" in readme, "the README gives the script's advice"

    # The README's example of overriding a config key, in the project's own syntax.
    example = [hint for hint in override_hints(prose(readme)) if hint != shlex.split(advice[0])]
    assert len(example) == 1 and "max_epochs" in example[0][0], f"the example overrides max_epochs: {example}"
    # Smaller: one process (the last value given wins), in the project's own syntax (machinery/cli.py's).
    (override,) = re.findall(r'^OVERRIDE = "(.+)"', (project / "machinery" / "cli.py").read_text(), re.MULTILINE)
    one_process = shlex.split(override.format(key="nproc_per_node", value=1))
    run_cmd([*argv, *shlex.split(advice[0]), *example[0], *one_process], cwd=project, env=env)
    (run_dir,) = run_dirs(project)
    log = read_log(run_dir)
    assert "backend: gloo" in log["text"], f"the advice must switch the backend to gloo:\n{log['text']}"
    assert len(log["evals"]) == 2, f"config.yaml says 1 epoch; the README's example says 2 (override {example}):"


@pytest.mark.parametrize("launcher", ["torchrun", "spawn"])
def test_two_node_readme_command_trains_as_one_world(bake, launcher: str) -> None:
    """The README's command for 2 nodes, run twice on this machine (node ranks 0 and 1, the master at this machine's
    address in place of the README's 10.0.0.1: a loopback address is refused with several nodes), trains one world
    of 2 processes: torchrun's options, or the spawned processes' config keys on the command line (one process a
    node here: smaller)."""
    project = bake(backend="gloo", launcher=launcher, argparser="fire")
    make_offline(project)
    readme = (project / "README.md").read_text()
    (command,) = [line for line in example_lines(readme) if "10.0.0.1" in line]
    address = next(
        word for word in run_cmd(["hostname", "-I"], project).stdout.split() if re.fullmatch(r"[\d.]+", word)
    )
    smaller = command.replace("10.0.0.1", address).replace("nproc_per_node=2", "nproc_per_node=1")
    port = yaml.safe_load((project / "config.yaml").read_text())["master_port"]
    smaller = smaller.replace("--master_port=29500", f"--master_port={port}")  # torchrun's: a port of this test's
    nodes = []
    for rank in (0, 1):
        argv = shlex.split(smaller.replace("node_rank=0", f"node_rank={rank}"))
        argv = [PYTHON, "-m", "torch.distributed.run", *argv[1:]] if argv[0] == "torchrun" else [PYTHON, *argv[1:]]
        nodes.append(
            subprocess.Popen(
                argv,
                cwd=project,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        )
    outputs = []
    try:
        for node in nodes:
            outputs.append(node.communicate(timeout=600)[0])
    finally:
        for node in nodes:
            node.kill()
    for rank, (node, output) in enumerate(zip(nodes, outputs, strict=True)):
        assert node.returncode == 0, f"node {rank} failed with exit code {node.returncode}:\n{output[-6000:]}"
    (run_dir,) = run_dirs(project)
    log = read_log(run_dir)
    assert "World size: 2" in log["text"], f"the two nodes must train as one world of 2:\n{log['text']}"
    assert len(log["evals"]) == 2, f"two epochs, each evaluated:\n{log['text']}"


def example_lines(readme: str) -> list[str]:
    """The command lines of the README's ``bash`` blocks."""
    return [
        line
        for block in re.findall(r"^```bash\n(.*?)^```$", readme, re.MULTILINE | re.DOTALL)
        for line in block.splitlines()
    ]
