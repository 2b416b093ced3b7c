"""The test environments (scripts/env.sh makes all three) and what runs in them differently."""

import os
import sys

from answers import REPO

# The base venv: GPU and CPU projects' environment, without torch_xla.
PYTHON = sys.executable
# The XLA CPU device, for the short XLA training runs (not for the projects' own tests: their learning test runs
# long enough that slower programs cost more than a cheaper compile saves: measured 64 s, 102 s with the flags).
# The flags compile with LLVM's cheapest optimisation: these runs check which programs compile and what crosses
# between device and host, never how fast a compiled program runs, and compiling is most of their time
# (measured: a vision TPU run of 6 iterations, 28.5 s of CPU, 18.0 s with them).
XLA_CPU = {
    "PJRT_DEVICE": "CPU",
    "XLA_FLAGS": "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true",
}
# Lighter models for runs on the XLA CPU device, where compiling a default one would take minutes:
# segmentation's DeepLabV3 on MobileNetV3 (auxiliary head included) for the one on ResNet-50.
XLA_CPU_CONFIG = {"vision-segmentation": {"model": "deeplabv3_mobilenet_v3_large"}}
# The TPU environment: torch_xla layered on the base venv (scripts/env.sh makes both).
XLA_PYTHON = os.environ.get("IGNITE_TEMPLATES_XLA_PYTHON", str(REPO / ".venv-xla" / "bin" / "python"))
# The experiment trackers' packages (mlflow, wandb, ...), layered on the base venv the same way.
TRACKERS_PYTHON = os.environ.get("IGNITE_TEMPLATES_TRACKERS_PYTHON", str(REPO / ".venv-trackers" / "bin" / "python"))
