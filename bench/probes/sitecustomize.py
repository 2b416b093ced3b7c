"""The benchmarks' probe, imported at start-up by every process whose PYTHONPATH names this directory first
(tests/probes after it: its probes, the 8-replica harness among them, are imported as the tests import them).

``BENCH_TOTALS=DIR``: each time an engine's run returns, the process's XLA counters so far, all replicas
together, written to ``DIR/<pid>-<thread>.json``. Once every replica's trainer has returned, the largest are the
whole run's: torch_xla.launch trains in a process of its own, whose counters its launcher never sees.
"""

import json
import os
import runpy
import threading
from pathlib import Path

runpy.run_path(str(Path(__file__).resolve().parents[2] / "tests" / "probes" / "sitecustomize.py"))

if os.environ.get("BENCH_TOTALS"):
    from ignite.engine import Engine

    _run = Engine.run

    def run_and_count(self: Engine, *args: object, **kwargs: object) -> object:
        try:
            return _run(self, *args, **kwargs)
        finally:
            import torch_xla.debug.metrics as met

            count = lambda name: (met.metric_data(name) or [0])[0]  # noqa: E731
            ops = [name for name in met.counter_names() if name.startswith("aten::") and "_local_scalar" not in name]
            totals = {"compilations": count("CompileTime"), "transfers": count("TransferFromDeviceTime")}
            totals["fallbacks"] = sum(met.counter_value(name) for name in ops)
            path = Path(os.environ["BENCH_TOTALS"]) / f"{os.getpid()}-{threading.get_ident()}.json"
            path.write_text(json.dumps(totals))

    Engine.run = run_and_count
