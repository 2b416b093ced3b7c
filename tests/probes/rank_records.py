"""What each process of a distributed run trained on, recorded from outside the generated code.

Imported at start-up (sitecustomize.py) when ``RANK_PROBE_DIR`` is set. It wraps ignite's
``idist.auto_model`` (to keep the networks), ``os.replace`` (the files it put in place: ignite's DiskSaver
writes each to a temporary file, then renames it) and ``Engine.run``
(the outermost run is the trainer's): when the trainer's run ends, the process writes ``rank<N>.pt`` there:
its rank and world size, the trainer's iteration and epoch, a digest of every training batch it took, each
network's final weights (and which of them are parameters), the files it renamed into place, and for each
evaluation (a run inside the trainer's) a digest of every real row it scored and the metrics it ended with.

With ``RANK_PROBE_EVALUATE`` naming a training checkpoint, each epoch's end first loads that checkpoint's
model (its average, where it keeps one) into the network: the run's evaluation then scores the saved model (a
reference evaluation).
XLA replicas on the CPU are threads of one process: each keeps its own (``threading.local``).

Then, with gloo and several processes, it leaves a gloo worker thread in Python while the process ends, as
a run's last collective can: a training process that ended through the interpreter's shutdown
would abort then ("terminate called without an active exception", SIGABRT). The generated code ends them
without it (``end_process`` in preemption.py); the run's exit status shows it did.
"""

import hashlib
import os
import threading
import time
from pathlib import Path

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events

_mine = threading.local()  # this process's, or this replica thread's: models, files renamed, run depth
_auto_model = idist.auto_model
_run = Engine.run
_save = torch.save
_replace = os.replace


def _state(name: str, default):
    if not hasattr(_mine, name):
        setattr(_mine, name, default())
    return getattr(_mine, name)


def _digest(batch) -> str:
    """The bytes of every tensor of a batch, hashed: two different batches give different digests."""
    digest = hashlib.sha256()
    pending = [batch]
    while pending:
        item = pending.pop(0)
        if isinstance(item, torch.Tensor):
            digest.update(item.detach().cpu().contiguous().numpy().tobytes())
        elif isinstance(item, dict):
            pending.extend(item[key] for key in sorted(item))
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return digest.hexdigest()


def _rows(batch) -> list[str]:
    """A digest of each real row of an eval batch (every tensor's row). A TPU project's eval batch is
    ``(batch, number of real rows)`` (a Python int), padded to one shape: its padding rows are left out."""
    real = None
    if isinstance(batch, list | tuple) and len(batch) == 2 and type(batch[1]) is int:
        batch, real = batch
    tensors, pending = [], [batch]
    while pending:
        item = pending.pop(0)
        if isinstance(item, torch.Tensor):
            tensors.append(item.detach().cpu().contiguous())
        elif isinstance(item, dict):
            pending.extend(item[key] for key in sorted(item))
        elif isinstance(item, list | tuple):
            pending.extend(item)
    rows = len(tensors[0]) if real is None else real
    return [hashlib.sha256(b"".join(t[i].numpy().tobytes() for t in tensors)).hexdigest() for i in range(rows)]


def _record_rows(evaluator: Engine) -> None:
    """From now on until the next call, the digests of the rows ``evaluator`` scores go to ``probe_rows``."""
    if not hasattr(evaluator, "probe_rows"):  # the first evaluation: one handler for every one
        evaluator.add_event_handler(Events.ITERATION_STARTED, lambda e: e.probe_rows.extend(_rows(e.state.batch)))
    evaluator.probe_rows = []


def _metrics(metrics: dict) -> dict:
    return {name: value.cpu() if isinstance(value, torch.Tensor) else value for name, value in metrics.items()}


def _load_saved_model(engine) -> None:
    saved = torch.load(os.environ["RANK_PROBE_EVALUATE"], map_location="cpu", weights_only=True)
    network = getattr(_state("models", list)[0], "module", _state("models", list)[0])
    network.load_state_dict(saved.get("ema_model", saved["model"]))  # the average, where the run kept one


def auto_model(model, *args, **kwargs):
    wrapped = _auto_model(model, *args, **kwargs)
    _state("models", list).append(wrapped)
    return wrapped


def replace(src, dst, *args, **kwargs):
    _state("renamed", list).append(Path(dst).name)
    return _replace(src, dst, *args, **kwargs)


def run(engine, *args, **kwargs):
    if _state("depth", int):  # the evaluator, run by the trainer
        _record_rows(engine)
        state = _run(engine, *args, **kwargs)
        evaluation = {"rows": engine.probe_rows, "metrics": _metrics(engine.state.metrics)}
        _state("evaluations", list).append(evaluation)
        return state
    batches = []
    engine.add_event_handler(Events.ITERATION_STARTED, lambda e: batches.append(_digest(e.state.batch)))
    if os.environ.get("RANK_PROBE_EVALUATE"):  # before the project's handlers: its evaluation scores it
        engine._event_handlers[Events.EPOCH_COMPLETED].insert(0, (_load_saved_model, (engine,), {}))
    _mine.depth = 1
    try:
        state = _run(engine, *args, **kwargs)
    finally:
        _mine.depth = 0
    rank = idist.get_rank()
    networks = [getattr(m, "module", m) for m in _state("models", list)]
    record = {
        "rank": rank,
        "world_size": idist.get_world_size(),
        "iteration": engine.state.iteration,
        "epoch": engine.state.epoch,
        "batches": batches,
        "weights": [{name: w.cpu() for name, w in network.state_dict().items()} for network in networks],
        "parameters": [[name for name, _ in network.named_parameters()] for network in networks],
        "renamed": list(_state("renamed", list)),
        "evaluations": list(_state("evaluations", list)),
    }
    _save(record, Path(os.environ["RANK_PROBE_DIR"]) / f"rank{rank}.pt")
    _keep_a_gloo_thread_busy()
    return state


def _keep_a_gloo_thread_busy() -> None:
    """A collective whose completion callback keeps the gloo worker thread that ran it in Python for good,
    taking the GIL every 10 ms: once the interpreter shuts down, the next time aborts the process."""

    def nap_forever(_future) -> None:
        if threading.current_thread() is threading.main_thread():
            return  # the collective had completed: the callback runs here, in the training thread
        while True:
            time.sleep(0.01)

    if idist.backend() == "gloo" and idist.get_world_size() > 1:
        torch.distributed.all_reduce(torch.zeros(1), async_op=True).get_future().then(nap_forever)


idist.auto_model = auto_model
os.replace = replace
Engine.run = run
