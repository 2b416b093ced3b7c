"""The commands a generated project prints run as printed: the advice for nccl without a GPU, the
README's override example, and the README's multi-node torchrun command (two nodes on one machine).

`tests/test_readme.py` checks the syntax of every command and hint of every README; these few real,
tiny runs show that the argparsers accept them.
"""

import os
import re
import shlex
import subprocess

import pytest
import torch
from projects import free_port, make_offline, read_log, readme_train_command, run_cmd, run_dirs
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
    project = bake(argparser=argparser, backend="nccl", launcher="spawn", nproc_per_node="1", master_port=free_port())
    make_offline(project, max_epochs=1)
    argv, env = readme_train_command(project)
    stopped = subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=300, env={**os.environ, **env})
    assert stopped.returncode != 0, "nccl without a GPU must stop"
    advice = ADVICE.findall(stopped.stderr)
    assert len(advice) == 1, f"the nccl message must name one command-line fix:\n{stopped.stderr}"
    readme = (project / "README.md").read_text()
    assert f"add `{advice[0]}` at the end of the command" in readme, "the README gives the script's advice"

    # The README's example of overriding a config key (fire and hydra; argparse overrides only the backend).
    example = [hint for hint in override_hints(prose(readme)) if hint != shlex.split(advice[0])]
    assert len(example) == (argparser != "argparse"), f"override examples in the README: {example}"
    assert example == [] or example[0][-1].endswith("max_epochs=2"), f"the example overrides max_epochs: {example}"
    run_cmd([*argv, *shlex.split(advice[0]), *(example[0] if example else [])], cwd=project, env=env)
    (run_dir,) = run_dirs(project)
    log = read_log(run_dir)
    assert "backend: gloo" in log["text"], f"the advice must switch the backend to gloo:\n{log['text']}"
    epochs = 2 if example else 1  # config.yaml says 1; the README's example says max_epochs 2
    assert len(log["evals"]) == epochs, f"expected {epochs} epochs (override {example}):\n{log['text']}"


def test_two_node_readme_command_trains_as_one_world(bake) -> None:
    """The README's torchrun command for 2 nodes, run twice on this machine (node ranks 0 and 1, the master
    at 127.0.0.1), trains one world of 2 processes."""
    # The hook refuses a loopback master address with several nodes: bake with a name, then point it here.
    project = bake(
        backend="gloo",
        launcher="torchrun",
        nnodes="2",
        nproc_per_node="1",
        master_addr="node0",
        master_port=free_port(),
    )
    make_offline(project)
    argv, env = readme_train_command(project)
    assert "--master_addr=node0" in argv and "--node_rank=0" in argv, f"README command: {argv}"
    argv[argv.index("--master_addr=node0")] = "--master_addr=127.0.0.1"
    nodes = []
    for rank in (0, 1):
        node_argv = [arg.replace("--node_rank=0", f"--node_rank={rank}") for arg in argv]
        nodes.append(
            subprocess.Popen(
                node_argv,
                cwd=project,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
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
