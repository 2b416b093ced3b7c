#!/usr/bin/env bash
# Install the services some tests run, where they can be (as root, with apt-get): Debian's Slurm (slurm-wlm, munge)
# for tests/test_slurm.py and PostgreSQL for tests/test_sweeps.py, in one apt-get. Elsewhere it says so and exits 0:
# those tests then skip (and fail under CI, where they must run). The tests start daemons of their own; nothing here
# starts one.
set -uo pipefail
missing=()
{ command -v slurmctld && command -v slurmd && command -v munged; } >/dev/null || missing+=(slurm-wlm munge)
{ ls /usr/lib/postgresql/*/bin/pg_ctl && command -v psql; } >/dev/null 2>&1 || missing+=(postgresql)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "install_services.sh: ${missing[*]} not installed, and cannot be here (root and apt-get): their tests skip" >&2
    exit 0
fi
log="${TMPDIR:-/tmp}/install_services.log"
echo "Installing ${missing[*]} with apt-get (about a minute; log: $log) ..." >&2
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >"$log" 2>&1; then
    echo "install_services.sh: apt-get could not install ${missing[*]} (see $log): their tests skip" >&2
fi
exit 0
