"""The examples a README shows, read from the README itself, and the map of the tests that run them.

An example is a fenced block: a command (``bash``), a config (``yaml``) or a data layout (``text``). A test that
runs one reads it from the rendered or generated README with ``example`` (never a copy of its text), so a README
edit cannot drift from its test. ``EXAMPLES`` says, for every block any README of any answer set shows, which test
runs it; ``tests/test_readme_examples.py::test_every_readme_example_names_the_test_that_runs_it`` fails on a block
it does not cover, and on a test it names that does not exist.
"""

import re
from dataclasses import dataclass

import yaml


@dataclass(frozen=True)
class Block:
    """A fenced block of a README: the section it is in (its nearest ``##`` or ``###`` heading), its language and
    its text."""

    heading: str
    lang: str
    text: str


FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(readme: str) -> list[Block]:
    """Every fenced block of ``readme``, in order."""
    found = []
    for match in FENCE.finditer(readme):
        headings = re.findall(r"^(#{2,3} .*)$", readme[: match.start()], flags=re.MULTILINE)
        found.append(Block(headings[-1] if headings else "", match.group(1), match.group(2)))
    return found


def example(readme: str, heading: str, lang: str, pattern: str = "") -> Block:
    """The one block of ``heading`` in ``lang`` whose text matches ``pattern`` (a regular expression)."""
    found = [b for b in blocks(readme) if b.heading == heading and b.lang == lang and re.search(pattern, b.text)]
    assert len(found) == 1, f"the README has {len(found)} {lang} blocks matching {pattern!r} under {heading!r}"
    return found[0]


def commands(block: Block) -> list[str]:
    """The command lines of a ``bash`` block, their comments left out."""
    lines = (re.sub(r"\s+#\s.*$", "", line).strip() for line in block.text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def settings(block: Block) -> dict:
    """The config keys and values of a ``yaml`` block."""
    return yaml.safe_load(block.text)


def layout(block: Block) -> dict[str, list[str]]:
    """A data layout (``text`` block) as paths and what is shown of each.

    A line ``name/  words`` is a folder under the last folder less indented than it, with the words shown in it
    (file names, ``...``); a line ``name  first line`` a file with its first line; a line more indented than
    its entry's name goes on with that entry (a file's next lines).
    """
    entries: dict[str, list[str]] = {}
    stack: list[tuple[int, str]] = []  # (indent, path) of the folders the next lines may be in
    last: tuple[int, str] | None = None
    for line in block.text.splitlines():
        indent = len(line) - len(line.lstrip())
        if last is not None and indent > last[0] + 2:
            entries[last[1]].append(line.strip())
            continue
        name, _, shown = line.strip().partition("  ")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = (stack[-1][1] if stack else "") + name
        entries[path] = [shown.strip()] if shown.strip() else []
        if name.endswith("/"):
            entries[path] = shown.split()
            stack.append((indent, path))
        last = (indent, path)
    return entries


@dataclass(frozen=True)
class Example:
    """Blocks of one kind: their section, language and a pattern of their text; ``runs``, the tests that run them
    (``tests/<file>.py::<function>``), or ``not_run``, why none can here."""

    heading: str
    lang: str
    pattern: str
    runs: tuple[str, ...] = ()
    not_run: str = ""


# Which test runs each block of every README: the generated ones (every template, every answer set) and the
# repository's. A block takes the first entry of its heading and language whose pattern it matches.
TRAIN_COMMAND = r"^(\w+=\S+ )*(python main\.py|torchrun )"
OWN = "tests/test_readme_examples.py::"
YOUR_DATA = (OWN + "test_train_on_your_data_as_the_readme_shows",)
INSTALLS = OWN + "test_install_commands_of_every_readme"
EXAMPLES = [
    # Generated READMEs.
    Example("## Install", "bash", r"^pip install", (INSTALLS,)),
    Example(
        "## Train",
        "bash",
        r" -m ",
        (
            "tests/test_hydra_multirun.py::test_a_multirun_trains_each_job_and_a_stopped_one_continues_where_it_stopped",
            "tests/test_hydra_multirun.py::test_a_multirun_with_torchrun_trains_each_job_in_one_process_group",
        ),
    ),
    Example("## Train", "bash", r"^PJRT_DEVICE=TPU ", ("tests/test_xla_runs.py::tpu_run",)),
    Example(
        "## Train",
        "bash",
        r"nnodes[= ]2",
        ("tests/test_commands.py::test_two_node_readme_command_trains_as_one_world",),
    ),
    Example(
        "## Train",
        "bash",
        r"^torchrun ",
        (
            "tests/test_preemption.py::test_sigterm_to_the_launcher_stops_both_processes_at_one_iteration_and_the_rerun_finishes",
        ),
    ),
    Example(
        "## Train",
        "bash",
        TRAIN_COMMAND,
        ("tests/test_commands.py::test_nccl_advice_and_override_example_train_as_printed",),
    ),
    Example(
        "## Configuration",
        "yaml",
        r"^mixed_precision: ",
        (
            "tests/test_preemption.py::test_every_behaviour_switched_on_trains_and_a_run_stopped_three_times_ends_bit_identical",
        ),
    ),
    Example("## Train on your data", "text", r"", YOUR_DATA),
    Example(
        "## Train on your data",
        "yaml",
        r"dataset_config",
        (OWN + "test_a_hub_dataset_by_name_and_configuration_trains_as_the_readme_shows",),
    ),
    Example("## Train on your data", "yaml", r"", YOUR_DATA),
    Example("## Use the model", "bash", r"export\.py", (INSTALLS, *YOUR_DATA)),
    Example("## Use the model", "bash", r"predict\.py", YOUR_DATA),
    Example(
        "## Sweep",
        "bash",
        r"^sbatch ",
        (
            "tests/test_slurm.py::test_a_sweep_as_a_job_array_requeues_a_preempted_task_which_continues_its_trial_and_ends_exact",
        ),
    ),
    Example(
        "## Sweep",
        "bash",
        r"^python sweep\.py",
        (
            "tests/test_sweeps.py::test_a_sweep_killed_mid_trial_continues_that_trial_prunes_in_every_process_and_ends_exact",
        ),
    ),
    Example(
        "## Sweep",
        "bash",
        r"OPTUNA_STORAGE",
        ("tests/test_sweeps.py::test_two_workers_share_a_postgresql_study_end_exact_and_write_its_password_nowhere",),
    ),
    Example("## Train on a Slurm cluster", "bash", r"^sbatch slurm\.sh$", ("tests/slurm_cluster.py::sbatch",)),
    Example("## Experiment tracking", "bash", TRAIN_COMMAND, ("tests/test_tracker_runs.py::bake_and_train",)),
    Example(
        "## Experiment tracking",
        "bash",
        r"^tensorboard --logdir ",
        ("tests/test_tracker_runs.py::test_a_stopped_and_continued_run_is_one_tensorboard_run_with_every_step_once",),
    ),
    Example(
        "## Experiment tracking",
        "bash",
        r"^mlflow ui ",
        (
            "tests/test_tracker_runs.py::test_mlflow_sqlite_store_holds_a_stopped_and_continued_run_once_at_the_readmes_uri",
        ),
    ),
    Example(
        "## Experiment tracking",
        "bash",
        r"^python -m visdom\.server$",
        not_run="it downloads its page's scripts at start: test_tracker_runs.py starts visdom's server without that",
    ),
    Example(
        "## Tests",
        "bash",
        r"^pip install pytest\npytest$",
        (INSTALLS, "tests/test_project_tooling.py::test_ci_commands_pass_in_a_fresh_venv"),
    ),
    Example("## Pre-commit hooks", "bash", r"^pip install pre-commit\npre-commit install$", (INSTALLS,)),
    Example(
        "## Generate it again",
        "bash",
        r"^cookiecutter gh:<org>/<repo> ",
        ("tests/test_project_tooling.py::test_readme_command_generates_the_same_project_byte_for_byte",),
    ),
    # The repository's README.
    Example(
        "## Two commands",
        "bash",
        r"^bash scripts/demo\.sh .*\nbash scripts/test\.sh ",
        ("tests/test_repository.py::test_demo_builds_only_the_base_venv_and_trains_the_default_project",),
        not_run="`bash scripts/test.sh` is the suite itself: .ci/run runs exactly it",
    ),
    Example(
        "## Generate a project",
        "bash",
        r"^pip install cookiecutter\n",
        (OWN + "test_generate_a_project_as_the_readme_shows",),
    ),
    Example(
        "## Keep a project up to date with cruft",
        "bash",
        r"^pip install cruft\ncruft create ",
        ("tests/test_cruft.py::test_the_readmes_cruft_commands_create_check_and_update_a_project",),
    ),
    Example(
        "## Options",
        "yaml",
        r"^mixed_precision: ",
        (
            "tests/test_preemption.py::test_every_behaviour_switched_on_trains_and_a_run_stopped_three_times_ends_bit_identical",
        ),
    ),
    Example(
        "### Projects made while the training behaviours were questions (issue 64)",
        "bash",
        r"^cruft update -y\npython -m machinery\.upgrade",
        (
            "tests/test_cruft.py::test_a_project_whose_answers_were_behaviours_updates_to_config_keys_with_its_values_and_its_run_continues",
        ),
    ),
    Example(
        "### Change an answer later (GPU to TPU and back)",
        "bash",
        r"^cruft update -y --variables-to-update ",
        ("tests/test_cruft.py::test_switching_a_project_from_gpu_to_tpu_and_back_keeps_the_users_edit",),
    ),
    Example(
        "## Test a fork with pytest-cookies",
        "python",
        r"def test_",
        ("tests/test_repository.py::test_readme_pytest_cookies_example_passes",),
    ),
]
