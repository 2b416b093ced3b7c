"""What each process of a distributed run trained on, recorded from outside the generated code.

Python imports this module at start-up in every process whose PYTHONPATH names this directory (torchrun's
workers and the processes ignite spawns alike) when ``RANK_PROBE_DIR`` is set. It wraps ignite's
``idist.auto_model`` (to keep the networks) and ``Engine.run`` (the outermost run is the trainer's): when
the trainer's run ends, the process writes ``rank<N>.pt`` there: its rank and world size, the trainer's
iteration and epoch, a digest of every training batch it took, and each network's final weights (and which
of them are parameters).

Then, with gloo and several processes, it leaves a gloo worker thread in Python while the process ends, as
a run's last collective can: a training process that ended through the interpreter's shutdown
would abort then ("terminate called without an active exception", SIGABRT). The generated code ends them
without it (``end_process`` in preemption.py); the run's exit status shows it did.
"""

import os

if os.environ.get("RANK_PROBE_DIR"):
    import hashlib
    import threading
    import time
    from pathlib import Path

    import ignite.distributed as idist
    import torch
    from ignite.engine import Engine, Events

    _models = []
    _auto_model = idist.auto_model
    _run = Engine.run
    _depth = [0]

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

    def auto_model(model, *args, **kwargs):
        wrapped = _auto_model(model, *args, **kwargs)
        _models.append(wrapped)
        return wrapped

    def run(engine, *args, **kwargs):
        if _depth[0]:  # the evaluator, run by the trainer
            return _run(engine, *args, **kwargs)
        batches = []
        engine.add_event_handler(Events.ITERATION_STARTED, lambda e: batches.append(_digest(e.state.batch)))
        _depth[0] += 1
        try:
            state = _run(engine, *args, **kwargs)
        finally:
            _depth[0] -= 1
        rank = idist.get_rank()
        record = {
            "rank": rank,
            "world_size": idist.get_world_size(),
            "iteration": engine.state.iteration,
            "epoch": engine.state.epoch,
            "batches": batches,
            "weights": [getattr(m, "module", m).state_dict() for m in _models],
            "parameters": [[name for name, _ in getattr(m, "module", m).named_parameters()] for m in _models],
        }
        torch.save(record, Path(os.environ["RANK_PROBE_DIR"]) / f"rank{rank}.pt")
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
    Engine.run = run
