#!/usr/bin/env bash
# A test lane beside the pinned one (on demand, not in CI): `bash scripts/lanes.sh newest` or
# `bash scripts/lanes.sh lowest`; see scripts/lanes.py. Extra arguments go to it
# (e.g. `--template gan --launcher torchrun` to rerun one project).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$root/scripts/env.sh" base)" # its cookiecutter bakes the projects
exec "$venv/bin/python" "$root/scripts/lanes.py" "$@"
