"""A stop that reaches one training process only, at an exact iteration, from outside the generated code.

Imported at start-up (sitecustomize.py) in every process whose PYTHONPATH names this directory, when
``ONE_STOP`` is set to ``WHAT:RANK:N``; only the process (or replica) of rank ``RANK`` acts, as its trainer
starts iteration ``N``:

- ``signal:RANK:N``: SIGTERM to that process alone (one node's preemption notice reaching one training
  process, not its launcher nor the other processes);
- ``limit:RANK:N``: that process's ``limit_sec`` runs out now (its clock started before the others'), the
  others' much later.

Every other process learns of the stop only through the processes' agreement (handlers.read_losses).

XLA replicas on the CPU (``XLA_CPU_REPLICAS``) are threads of one process, which share the module globals a
TPU's replica processes each have their own of: here each replica thread also gets a stop request of its own
(``machinery.runs.preemption.STOP``, a copy per thread), so that a stop one replica sees is its own, as on a TPU.
Without it, a replica reading the shared request after the others' votes would see their stop as its own.
"""

import copy
import os
import signal
import sys
import threading
import time

from ignite.engine import Engine, Events

_what, _rank, _n = os.environ["ONE_STOP"].split(":")
_rank, _n = int(_rank), int(_n)
assert _what in ("signal", "limit"), f"ONE_STOP={os.environ['ONE_STOP']}: signal or limit"
_mine = threading.local()  # this process's trainer, or this replica thread's
_run = Engine.run


def _stop(engine: Engine) -> None:
    import ignite.distributed as idist

    if engine.state.iteration != _n or idist.get_rank() != _rank:
        return
    if _what == "signal":
        os.kill(os.getpid(), signal.SIGTERM)
    else:
        sys.modules["machinery.runs.preemption"].STOP.deadline = time.monotonic()


def run(engine, *args, **kwargs):
    if not getattr(_mine, "trainer", None):  # the outermost run: the trainer's (an evaluator runs inside it)
        _mine.trainer = engine
        engine.add_event_handler(Events.ITERATION_STARTED, _stop)
    return _run(engine, *args, **kwargs)


Engine.run = run


class PerReplicaStop:
    """Stands in for ``preemption.STOP`` in every module that holds it: each thread a StopRequest of its own,
    a copy of the shared one as it was when the thread first used it."""

    def __init__(self, shared) -> None:
        object.__setattr__(self, "_shared", shared)
        object.__setattr__(self, "_own", threading.local())

    def _request(self):
        own = object.__getattribute__(self, "_own")
        if not hasattr(own, "request"):
            own.request = copy.copy(object.__getattribute__(self, "_shared"))
        return own.request

    def __getattr__(self, name):
        return getattr(self._request(), name)

    def __setattr__(self, name, value) -> None:
        setattr(self._request(), name, value)


if os.environ.get("XLA_CPU_REPLICAS"):
    from torch_xla._internal import pjrt

    _spawned_call = pjrt._SpawnFn.__call__
    _swap = threading.Lock()

    def spawned_call(self) -> None:
        """A replica thread starts: first, every module's STOP becomes one request per thread (once)."""
        with _swap:
            shared = sys.modules["machinery.runs.preemption"].STOP
            if not isinstance(shared, PerReplicaStop):
                per_replica = PerReplicaStop(shared)
                for module in list(sys.modules.values()):
                    if getattr(module, "STOP", None) is shared:
                        module.STOP = per_replica
        return _spawned_call(self)

    pjrt._SpawnFn.__call__ = spawned_call  # what each replica thread runs
