#!/usr/bin/env bash
# The benchmarks (never part of the tests): prints a Markdown table; see bench/run.py and BENCHMARKS.md.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$root/scripts/env.sh" base xla)"
exec "$venv/bin/python" "$root/bench/run.py" --xla-python "$root/.venv-xla/bin/python" "$@"
