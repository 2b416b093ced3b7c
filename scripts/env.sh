#!/usr/bin/env bash
# Create (or reuse) the pinned test environment in .venv. Source it or run it; prints the venv path.
# The venv is rebuilt only when requirements/test.txt changes (its hash is stored in the venv).
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
echo "$venv"
