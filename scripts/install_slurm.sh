#!/usr/bin/env bash
# Install Debian's Slurm (slurm-wlm, with munge) for the Slurm tests (tests/test_slurm.py), where it can be:
# as root, with apt-get. Elsewhere it says so and exits 0: the Slurm tests then skip (and fail under CI, where
# Slurm must run). The tests start a one-node Slurm of their own; nothing here starts a daemon.
set -uo pipefail
if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "install_slurm.sh: Slurm is not installed and cannot be here (needs root and apt-get): the Slurm tests skip" >&2
    exit 0
fi
log="${TMPDIR:-/tmp}/install_slurm.log"
echo "Installing Slurm (slurm-wlm, munge) with apt-get (about a minute; log: $log) ..." >&2
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge; } >"$log" 2>&1; then
    echo "install_slurm.sh: apt-get could not install slurm-wlm and munge (see $log): the Slurm tests skip" >&2
fi
exit 0
