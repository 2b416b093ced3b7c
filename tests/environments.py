"""The test environments (scripts/env.sh makes all three) and what runs in them differently."""

import os
import sys

from answers import REPO
from projects import XLA_CPU, XLA_CPU_CONFIG, XLA_CPU_OWN_TESTS, XLA_LIGHT_MODELS  # noqa: F401  (what runs on the XLA CPU device: shared with the lanes)

# The base venv: GPU and CPU projects' environment, without torch_xla.
PYTHON = sys.executable
# The TPU environment: torch_xla layered on the base venv (scripts/env.sh makes both).
XLA_PYTHON = os.environ.get("IGNITE_TEMPLATES_XLA_PYTHON", str(REPO / ".venv-xla" / "bin" / "python"))
# The experiment trackers' packages (mlflow, wandb, ...), layered on the base venv the same way.
TRACKERS_PYTHON = os.environ.get("IGNITE_TEMPLATES_TRACKERS_PYTHON", str(REPO / ".venv-trackers" / "bin" / "python"))
