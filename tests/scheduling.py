"""How pytest-xdist shares the tests between its workers: as its ``load`` mode does, but the tests that check
one shared run (a training run several tests read) all go to one worker, which then makes that run once.

xdist's own ``loadgroup`` mode would do it with ``xdist_group`` marks, but pytest-xdist 3.8 marks the group in
``item._nodeid``, which pytest 9 no longer reads: the groups are lost (measured: a shared TPU run made on
both workers). Here the group travels in the test's parameter id instead, which both sides see (and no
``xdist_group`` mark is set: without xdist, ``-p no:xdist``, ``--strict-markers`` would refuse it).
"""

import re

import pytest
from xdist.scheduler import LoadScopeScheduling

# "test_x[vision-classification@tpu-run-vision-classification]": the group follows the last "@" in the id.
_GROUP = re.compile(r"@([^@\[\]]+)\]$")
# The tests of these files run on one worker, one after the other: they train on the XLA CPU device, whose
# runtime starts a pool of threads per process (16 for 8 replicas, whose collectives wait for every replica
# thread), so two such runs never share the 2 cores; the other worker meanwhile runs CPU tests, one thread
# each (an 8-replica vision run measured 47 s alone; CONTRIBUTING.md, "What the suite costs"). The Slurm tests
# share one one-node Slurm, a module fixture, and their two jobs.
ONE_WORKER_FILES = {
    "tests/test_xla_runs.py": "xla",
    "tests/test_xla_replicas.py": "xla",
    "tests/test_slurm.py": "slurm",
}


def on_one_worker(group: str, value: str):
    """A test parameter: every test given it runs on the one worker that runs the shared run ``group``."""
    return pytest.param(value, id=f"{value}@{group}")


class SharedRunScheduling(LoadScopeScheduling):
    """Each test is a unit of work of its own, but for those of one group, which are one unit together.

    As xdist's scope scheduling does, the units with the most tests are handed out first, then the others in
    the collection's order (tests/conftest.py puts the slow ones first), one at a time as workers free up.
    """

    def _split_scope(self, nodeid: str) -> str:
        group = _GROUP.search(nodeid)
        return ONE_WORKER_FILES.get(nodeid.split("::")[0]) or (group[1] if group else nodeid)
