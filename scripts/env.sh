#!/usr/bin/env bash
# Create (or reuse) the pinned test environments; prints the path of the base venv.
# - .venv: everything but torch_xla (GPU users' environment: where torch_xla is importable,
#   pytorch-ignite 0.5.5 breaks gloo and nccl runs too).
# - .venv-xla: torch_xla only, layered on .venv through a .pth file (no second 7 GB copy of torch).
# Each venv is rebuilt only when its lock changes (the lock's hash is stored in the venv).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
lock="$root/requirements/test.txt"
python="${PYTHON:-python3}"

want="$(sha256sum "$lock" | cut -d' ' -f1)"
have="$(cat "$venv/.lock-sha256" 2>/dev/null || true)"
if [ "$want" != "$have" ] || ! "$venv/bin/python" -c "import torch, ignite, cookiecutter" 2>/dev/null; then
    echo "Creating the test environment in $venv (a few minutes, about 7 GB) ..." >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -r "$lock"
    echo "$want" > "$venv/.lock-sha256"
fi

xla="$root/.venv-xla"
xla_lock="$root/requirements/xla.txt"
want_xla="$(cat "$lock" "$xla_lock" | sha256sum | cut -d' ' -f1)"
have_xla="$(cat "$xla/.lock-sha256" 2>/dev/null || true)"
if [ "$want_xla" != "$have_xla" ] || ! "$xla/bin/python" -c "import torch_xla, ignite" 2>/dev/null; then
    echo "Creating the TPU test environment in $xla (torch_xla on top of $venv) ..." >&2
    rm -rf "$xla"
    "$python" -m venv "$xla"
    base_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    xla_site="$("$xla/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    echo "$base_site" > "$xla_site/_base_venv.pth"
    # torch_xla's own dependencies (absl-py, numpy, pyyaml, requests) are pinned in the base lock.
    "$xla/bin/python" -m pip install --quiet --no-deps -r "$xla_lock"
    echo "$want_xla" > "$xla/.lock-sha256"
fi
echo "$venv"
