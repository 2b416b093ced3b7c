#!/usr/bin/env bash
# Install Debian's PostgreSQL for the sweep tests (tests/test_sweeps.py), where it can be: as root, with apt-get.
# Elsewhere it says so and exits 0: those tests then skip (and fail under CI). The tests start a server of their own.
set -uo pipefail
if ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && command -v psql >/dev/null; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "install_postgresql.sh: PostgreSQL is not installed and cannot be here (root and apt-get): its tests skip" >&2
    exit 0
fi
log="${TMPDIR:-/tmp}/install_postgresql.log"
echo "Installing PostgreSQL with apt-get (log: $log) ..." >&2
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } >"$log" 2>&1; then
    echo "install_postgresql.sh: apt-get could not install postgresql (see $log): its tests skip" >&2
fi
exit 0
