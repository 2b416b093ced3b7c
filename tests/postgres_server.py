"""A PostgreSQL server of the tests' own, every file of it in one folder, reached only through a Unix socket there.

Debian's postgresql (scripts/install_services.sh installs it). Its data folder belongs to the user ``postgres``:
initdb and pg_ctl refuse root. ``listen_addresses=`` (empty) opens no TCP port at all.
"""

import os
import shutil
import subprocess
from pathlib import Path

BIN = sorted(Path("/usr/lib/postgresql").glob("*/bin"))


def missing() -> str | None:
    """Why the tests' PostgreSQL cannot start here, or None."""
    if not BIN or not (BIN[-1] / "pg_ctl").is_file() or shutil.which("psql") is None:
        return "PostgreSQL is not installed: scripts/install_services.sh installs it"
    if os.geteuid() != 0:
        return "the tests' PostgreSQL is started as its own user, postgres, which takes root"
    return None


class Postgres:
    """A server in ``folder`` on ``port``: ``start()``, ``url(password)`` (a database of its own), ``stop()``."""

    def __init__(self, folder: Path, port: str) -> None:
        self.folder, self.port = folder, port
        folder.mkdir(parents=True, exist_ok=True)
        shutil.chown(folder, "postgres", "postgres")
        folder.chmod(0o755)

    def _as_postgres(self, command: str) -> None:
        argv = ["su", "postgres", "-s", "/bin/bash", "-c", command]
        subprocess.run(argv, check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        pg, data = BIN[-1], self.folder / "data"
        self._as_postgres(f"{pg}/initdb -D {data} -A trust -U postgres")
        options = f"-k {self.folder} -p {self.port} -c listen_addresses="
        self._as_postgres(f"{pg}/pg_ctl -D {data} -o '{options}' -l {self.folder}/log -w start")
        psql = ["psql", "-h", str(self.folder), "-p", self.port, "-U", "postgres", "-c", "create database sweeps"]
        subprocess.run(psql, check=True, capture_output=True, timeout=60)

    def url(self, password: str) -> str:
        """The database's SQLAlchemy URL, with a password (the server trusts any: what matters is where it goes)."""
        return f"postgresql+psycopg://postgres:{password}@/sweeps?host={self.folder}&port={self.port}"

    def stop(self) -> None:
        self._as_postgres(f"{BIN[-1]}/pg_ctl -D {self.folder / 'data'} -m immediate stop")
