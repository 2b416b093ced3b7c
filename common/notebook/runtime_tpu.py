{% import "flags.j2" as flags with context %}
{#- The TPU set-up cell: keeps a runtime's torch and torch_xla when they are a pair the project supports
    (flags.j2's releases), installs requirements.txt's pins otherwise. torchvision is pinned with them where
    the project needs it: where its requirements.txt has it. -#}
{% set requirements %}{% include "requirements.txt" %}{% endset %}
{% set torchvision = "\ntorchvision==" in requirements %}
# torch_xla works only beside the torch release of its version. This project runs on torch_xla {{ flags.torch_xla_version }} or {{ flags.torch_xla_also }}: a
# runtime with either (Kaggle's TPU image ships 2.8) keeps it; any other gets requirements.txt's pins.
import importlib.metadata as metadata
import subprocess
import sys

SUPPORTED = [  # the pinned releases, then the other supported ones
    {"torch": "{{ flags.torch_xla_version }}", "torch_xla": "{{ flags.torch_xla_version }}"{% if torchvision %}, "torchvision": "{{ flags.torchvision_xla_version }}"{% endif %}},
    {"torch": "{{ flags.torch_xla_also }}", "torch_xla": "{{ flags.torch_xla_also }}"{% if torchvision %}, "torchvision": "{{ flags.torchvision_xla_also }}"{% endif %}},
]
PINNED = ["torch=={{ flags.torch_xla_version }}", "torch_xla[tpu]=={{ flags.torch_xla_version }}"{% if torchvision %}, "torchvision=={{ flags.torchvision_xla_version }}"{% endif %}]

if not (3, 10) <= sys.version_info[:2] <= (3, 13):
    raise SystemExit(
        "torch_xla {{ flags.torch_xla_version }} has wheels for Python 3.10 to 3.13 only, and this runtime runs Python "
        f"{sys.version_info[0]}.{sys.version_info[1]}: open the notebook on a runtime with one of those "
        "(or, on a TPU VM, make a virtual environment with one) and run it again."
    )


def version(package: str) -> str | None:
    try:
        return metadata.version(package).split("+")[0]
    except metadata.PackageNotFoundError:
        return None


installed = {package: version(package) for package in SUPPORTED[0]}
if installed in SUPPORTED:
    found = ", ".join(f"{package} {release}" for package, release in installed.items())
    print(f"{found} already installed: nothing to do.")
else:
    subprocess.check_call([sys.executable, "-m", "pip", "install", *PINNED])
