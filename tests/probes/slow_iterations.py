"""Makes each training iteration last SLOW_ITERATIONS seconds longer, asleep (the CPU stays free): a run that is
still training when a scheduler's signal comes, however late it comes, at no cost to the tests' other runs.

Imported at start-up (sitecustomize.py). The trainer is the engine whose ``run`` is called first.
"""

import os
import time

from ignite.engine import Engine, Events

_seconds = float(os.environ["SLOW_ITERATIONS"])
_run = Engine.run
_trainer = []


def run(engine, *args, **kwargs):
    if not _trainer:
        _trainer.append(engine)
        engine.add_event_handler(Events.ITERATION_COMPLETED, lambda _: time.sleep(_seconds))
    return _run(engine, *args, **kwargs)


Engine.run = run
