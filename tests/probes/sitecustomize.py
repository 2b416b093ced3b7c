"""The tests' probes, imported at start-up by every process whose PYTHONPATH names this directory
(torchrun's workers, the processes ignite spawns, the process torch_xla.launch starts):

- ``XLA_CPU_REPLICAS=N``: the XLA CPU runtime as N replicas with working collectives (xla_cpu_replicas.py);
- ``RANK_PROBE_DIR``: what each process, or replica, trained on, written there (rank_records.py);
- ``STOP_PROBE``: a stop signal at an exact moment of training (stop_signals.py);
- ``ONE_STOP``: a stop that reaches one training process (or replica) only (one_stop.py);
- ``SLOW_ITERATIONS``: each training iteration that many seconds longer, asleep (slow_iterations.py);
- ``PROCESS_STARTS_DIR``: each process multiprocessing spawns, and its parent, written there (process_starts.py).
"""

import os

if os.environ.get("XLA_CPU_REPLICAS"):
    import xla_cpu_replicas  # noqa: F401  (first: it sets the XLA runtime's environment)
if os.environ.get("RANK_PROBE_DIR"):
    import rank_records  # noqa: F401
if os.environ.get("STOP_PROBE"):
    import stop_signals  # noqa: F401
if os.environ.get("ONE_STOP"):
    import one_stop  # noqa: F401
if os.environ.get("SLOW_ITERATIONS"):
    import slow_iterations  # noqa: F401
if os.environ.get("PROCESS_STARTS_DIR"):
    import process_starts  # noqa: F401
