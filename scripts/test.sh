#!/usr/bin/env bash
# The whole test suite, from a fresh clone: creates (or reuses) the pinned venv, then runs pytest.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k hooks`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Slurm for the Slurm tests and PostgreSQL for the sweep tests, installed where they can be (root, apt-get) while the
# venvs are built.
bash "$root/scripts/install_services.sh" &
services=$!
venv="$(bash "$root/scripts/env.sh")"
wait "$services"
cd "$root"
exec "$venv/bin/python" -m pytest -n 2 "$@"
