#!/usr/bin/env bash
# The whole test suite, from a fresh clone: creates (or reuses) the pinned venv, then runs pytest.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k hooks`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$root/scripts/env.sh")"
cd "$root"
exec "$venv/bin/python" -m pytest -n 2 "$@"
