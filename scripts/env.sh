#!/usr/bin/env bash
# Create (or reuse) the pinned test environments; prints the path of the base venv.
# Usage: env.sh [LAYER ...]: `env.sh base` makes only the base venv (what the demo runs in);
# no argument makes all three (what the tests need).
# - .venv (base): everything but torch_xla (GPU users' environment: where torch_xla is importable,
#   pytorch-ignite 0.5.5 breaks gloo and nccl runs too).
# - .venv-xla (xla): torch_xla only, layered on .venv through a .pth file (no second 7 GB copy of torch).
# - .venv-trackers (trackers): the experiment trackers' packages (mlflow, wandb, ...), layered on .venv
#   the same way: they pin some of .venv's packages differently (polyaxon wants an older Jinja2).
# Each venv is rebuilt only when its lock changes (the lock's hash is stored in the venv).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
lock="$root/requirements/test.txt"
python="${PYTHON:-python3}"
layers=("$@")
[ ${#layers[@]} -gt 0 ] || layers=(base xla trackers)
for layer in "${layers[@]}"; do
    case "$layer" in
        base | xla | trackers) ;;
        *) echo "env.sh: unknown layer '$layer': use base, xla or trackers" >&2 && exit 2 ;;
    esac
done
wants() { [[ " ${layers[*]} " == *" $1 "* ]]; }

# The venvs are built side by side: a layer installs its own packages only (--no-deps), so it needs the base
# venv's packages only when it runs, and pip unpacking torch into the base venv keeps one core busy for minutes.
# A rebuilt base venv rebuilds the layers too (they are checked by importing through it).
building=()
build() { "$@" & building+=("$!"); }

# The base venv: every layer sits on it.
want="$(sha256sum "$lock" | cut -d' ' -f1)"
have="$(cat "$venv/.lock-sha256" 2>/dev/null || true)"
fresh_base=""
if [ "$want" != "$have" ] || ! "$venv/bin/python" -c "import torch, ignite, cookiecutter" 2>/dev/null; then
    echo "Creating the test environment in $venv (a few minutes, about 7 GB) ..." >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    fresh_base=1
    # The lock pins every package, so it installs without resolving (--no-deps) in two pip processes side by
    # side: torch with its CUDA libraries and triton (most of the 7 GB, one core busy unpacking them) and the
    # rest (measured from pip's cache: 2m14s in one process, 1m24s-1m42s in two). pip check then
    # proves the lock whole: a dependency it lacks fails the set-up here, not a test later.
    base_packages() {
        "$venv/bin/python" -m pip install --quiet --upgrade pip
        local big='^(torch|triton|nvidia-[a-z0-9-]+)=='
        "$venv/bin/python" -m pip install --quiet --no-deps -r <(grep -E "$big" "$lock") &
        local unpacking=$!
        "$venv/bin/python" -m pip install --quiet --no-deps -r <(grep -vE "$big" "$lock")
        wait "$unpacking"
        "$venv/bin/python" -m pip check >&2  # stdout is the base venv's path alone (test.sh reads it)
        echo "$want" > "$venv/.lock-sha256"
    }
    build base_packages
fi
base_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"

# A venv whose packages are its lock's, on top of the base venv's (a .pth file adds those).
new_layer() {
    rm -rf "$1"
    "$python" -m venv "$1"
    local site
    site="$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    echo "$base_site" > "$site/_base_venv.pth"
}

xla="$root/.venv-xla"
xla_lock="$root/requirements/xla.txt"
want_xla="$(cat "$lock" "$xla_lock" | sha256sum | cut -d' ' -f1)"
have_xla="$(cat "$xla/.lock-sha256" 2>/dev/null || true)"
if wants xla && { [ -n "$fresh_base" ] || [ "$want_xla" != "$have_xla" ] \
    || ! "$xla/bin/python" -c "import torch_xla, ignite" 2>/dev/null; }; then
    echo "Creating the TPU test environment in $xla (torch_xla on top of $venv) ..." >&2
    xla_packages() {
        new_layer "$xla"
        # torch_xla's own dependencies (absl-py, numpy, pyyaml, requests) are pinned in the base lock.
        "$xla/bin/python" -m pip install --quiet --no-deps -r "$xla_lock"
        echo "$want_xla" > "$xla/.lock-sha256"
    }
    build xla_packages
fi

trackers="$root/.venv-trackers"
trackers_lock="$root/requirements/trackers.txt"
want_trackers="$(cat "$lock" "$trackers_lock" | sha256sum | cut -d' ' -f1)"
have_trackers="$(cat "$trackers/.lock-sha256" 2>/dev/null || true)"
if wants trackers && { [ -n "$fresh_base" ] || [ "$want_trackers" != "$have_trackers" ] \
    || ! "$trackers/bin/python" -c "import clearml, mlflow, neptune, polyaxon, visdom, wandb, ignite" 2>/dev/null; }; then
    echo "Creating the experiment-tracker test environment in $trackers (on top of $venv) ..." >&2
    tracker_packages() {
        new_layer "$trackers"
        # The build tools first: visdom is a source package built with them, without build isolation.
        # shellcheck disable=SC2046
        "$trackers/bin/python" -m pip install --quiet $(grep -E '^(setuptools|wheel)==' "$trackers_lock")
        "$trackers/bin/python" -m pip install --quiet --no-deps --no-build-isolation -r "$trackers_lock"
        echo "$want_trackers" > "$trackers/.lock-sha256"
    }
    build tracker_packages
fi

failed=""
for pid in "${building[@]}"; do
    wait "$pid" || failed=1
done
if [ -n "$failed" ]; then
    echo "env.sh: building a test environment failed (its pip output is above); run it again to retry" >&2
    exit 1
fi
echo "$venv"
