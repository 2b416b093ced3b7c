"""Sends a training process a stop signal at an exact moment, from outside the generated code.

Imported at start-up (sitecustomize.py) in every process whose PYTHONPATH names this directory, when
``STOP_PROBE`` is set to ``WHERE:N`` or ``WHERE:N:KILL``:

- ``iteration:N``: SIGTERM while the trainer runs iteration N (at its ITERATION_STARTED event);
- ``epoch_end:N``: SIGTERM as epoch N's end handlers start (the classifiers' evaluation, the GAN's samples);
- ``save:N``: SIGTERM while the training checkpoint of iteration N is being written (inside ``torch.save``);
- ``save:N:KILL``: SIGKILL half-way through writing that checkpoint: half of its bytes are on disk;
- ``iteration:N:PAUSE``: SIGSTOP instead, to the process itself: it stays paused, holding what it holds, until
  it gets SIGCONT (or SIGKILL);
- ``iteration:N:KILL_SWEEP``: SIGKILL to the sweep worker (sweep.py) that started this trial's command, its nearest
  ancestor of that name (kill -9 of the sweep, not of the trial), once;
- ``...:PARENT``: SIGTERM to the parent process instead: the launcher of TPU replicas, which ignore signals
  (on one XLA device, the replica is a process of its own; the replicas of ``XLA_CPU_REPLICAS`` are threads
  of the launcher's process: ``iteration:N`` signals it), or torchrun's agent. Once: of the launcher's
  processes, the first to get there signals it (a second SIGTERM to torchrun's agent while it stops its
  workers makes it exit at once, which no preemption does).

With ``STOP_PROBE_STAMP`` set to a path, the probe writes there the time (``time.time()``) it sent the signal.

The trainer is the engine whose ``run`` is outermost (an evaluator runs inside it); of several replicas'
trainers, the first one to start.
"""

import os
import signal
import tempfile
import time

import torch
from ignite.engine import Engine, Events

_where, _n, *_how = os.environ["STOP_PROBE"].split(":")
_n = int(_n)


def _sweep_worker():
    """The nearest ancestor process whose command line runs sweep.py."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            if any(arg.endswith(b"sweep.py") for arg in cmdline.read().split(b"\0")):
                return pid
        with open(f"/proc/{pid}/stat") as stat:
            pid = int(stat.read().rsplit(")", 1)[1].split()[1])
    raise RuntimeError("STOP_PROBE ...:KILL_SWEEP: no sweep.py above this process")


_target = os.getppid() if _how == ["PARENT"] else _sweep_worker() if _how == ["KILL_SWEEP"] else os.getpid()
_trainer = []
_run, _fire_event, _save = Engine.run, Engine._fire_event, torch.save


def run(engine, *args, **kwargs):
    if not _trainer:
        _trainer.append(engine)
    return _run(engine, *args, **kwargs)


def fire_event(engine, event_name, *args, **kwargs):
    if _trainer and engine is _trainer[0]:
        state = engine.state
        if _where == "iteration" and event_name == Events.ITERATION_STARTED and state.iteration == _n:
            how = {"PAUSE": signal.SIGSTOP, "KILL_SWEEP": signal.SIGKILL}
            _kill(_target, how.get(_how[0] if _how else "", signal.SIGTERM))
        if _where == "epoch_end" and event_name == Events.EPOCH_COMPLETED and state.epoch == _n:
            _kill(_target, signal.SIGTERM)
    return _fire_event(engine, event_name, *args, **kwargs)


def save(obj, f, *args, **kwargs):
    iteration = obj.get("trainer", {}).get("iteration") if isinstance(obj, dict) else None
    if _where == "save" and iteration == _n:
        if _how == ["KILL"]:
            _save(obj, f, *args, **kwargs)
            f.flush()
            os.truncate(f.fileno(), os.fstat(f.fileno()).st_size // 2)
            os.kill(os.getpid(), signal.SIGKILL)
        _kill(_target, signal.SIGTERM)
    return _save(obj, f, *args, **kwargs)


def _kill(pid, signum):
    if _how in (["PARENT"], ["KILL_SWEEP"]) and not _first_to_signal(pid):
        return
    if os.environ.get("STOP_PROBE_STAMP"):
        with open(os.environ["STOP_PROBE_STAMP"], "w") as stamp:
            stamp.write(repr(time.time()))
    os.kill(pid, signum)


def _first_to_signal(pid):
    """Whether no other process has signalled ``pid`` (this process, started at that time) before this one."""
    started = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]
    try:
        os.close(os.open(os.path.join(tempfile.gettempdir(), f"stop-probe-{pid}-{started}"), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


Engine.run, Engine._fire_event, torch.save = run, fire_event, save
