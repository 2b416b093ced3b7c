#!/usr/bin/env bash
# The benchmarks (never part of the tests): prints a Markdown table; see bench/run.py and BENCHMARKS.md.
# `bash scripts/bench.sh --gpu [--cpu] ...`: the GPU benchmark (bench/gpu.py, base venv only), its options after --gpu.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ "${1:-}" = "--gpu" ]; then
    shift
    venv="$(bash "$root/scripts/env.sh" base)"
    exec "$venv/bin/python" "$root/bench/gpu.py" "$@"
fi
venv="$(bash "$root/scripts/env.sh" base xla)"
exec "$venv/bin/python" "$root/bench/run.py" --xla-python "$root/.venv-xla/bin/python" "$@"
