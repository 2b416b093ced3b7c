"""A one-node Slurm of the tests' own: munge, slurmctld and slurmd, every file of theirs in one folder.

Debian's slurm-wlm (scripts/install_services.sh installs it). Started and stopped by tests/test_slurm.py, which
leaves nothing running: the jobs are cancelled and the daemons stopped by their PIDs.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from projects import free_port, wait_for

DAEMONS = ("munged", "slurmctld", "slurmd")


def missing() -> str | None:
    """Why a one-node Slurm cannot start here, or None."""
    absent = [name for name in (*DAEMONS, "sbatch", "scontrol") if shutil.which(name) is None]
    if absent:
        return f"Slurm is not installed ({', '.join(absent)} missing): scripts/install_services.sh installs it"
    if os.geteuid() != 0:
        return "the one-node Slurm of the tests runs its daemons as root"
    return None


class Slurm:
    """A one-node Slurm: ``start()``, ``sbatch(...)``, ``job(id)``, ``wait_for(...)``, ``stop()``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.host = socket.gethostname().split(".")[0]
        self.conf = folder / "slurm.conf"
        self.munge_socket = folder / "munge" / "munge.socket"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.pids: dict[str, int] = {}

    def start(self) -> None:
        for sub in ("munge", "state", "spool", "log"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        munge = self.folder / "munge"
        munge.chmod(0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        # --force: munged refuses to run as root, and a key folder it would rather see owned by `munge`.
        self.run(
            "munged", "--force", f"--key-file={key}", f"--socket={self.munge_socket}",
            f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
            f"--seed-file={munge / 'munged.seed'}",
        )  # fmt: skip
        self.pids["munged"] = self._pid(munge / "munged.pid")
        self.conf.write_text(self._conf())
        for daemon in ("slurmctld", "slurmd"):
            self.run(daemon, "-f", str(self.conf))
            self.pids[daemon] = self._pid(self.folder / f"{daemon}.pid")
        self.wait_for(lambda: "idle" in self._out("sinfo", "--noheader", "--format=%t"), 30, "the node idle")

    def _conf(self) -> str:
        folder = self.folder
        return f"""\
ClusterName=tests
# slurm.sh's rendezvous port is 20000 + the job id % 20000: job ids from 5000 give ports clear of free_port's.
FirstJobId=5000
SlurmctldHost={self.host}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={folder / "state"}
SlurmdSpoolDir={folder / "spool"}
SlurmctldPidFile={folder / "slurmctld.pid"}
SlurmdPidFile={folder / "slurmd.pid"}
SlurmctldLogFile={folder / "log" / "ctld.log"}
SlurmdLogFile={folder / "log" / "d.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
# A CPU to each job, not a core: where 2 CPUs are one core's threads, jobs and array tasks still run side by side.
SelectTypeParameters=CR_CPU
ReturnToService=2
JobRequeue=1
MpiDefault=none
NodeName={self.host} CPUs={os.cpu_count()} RealMemory=1000 State=UNKNOWN
PartitionName=tests Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
"""

    def run(self, *argv: str) -> None:
        """A Slurm command or daemon, e.g. ``run("scancel", "--batch", job_id)``; fails the test if it fails."""
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"

    def _out(self, *argv: str) -> str:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60).stdout

    def _pid(self, pid_file: Path) -> int:
        # The daemon creates its PID file, then writes it: wait for the PID, not the file.
        self.wait_for(lambda: pid_file.is_file() and pid_file.read_text().split(), 30, f"{pid_file.name}")
        return int(pid_file.read_text().split()[0])

    def sbatch(self, project: Path, *options: str, env: dict[str, str], args: tuple[str, ...] = ()) -> str:
        """Submit the project's slurm.sh (with ``args``) from its directory, as the README says; return the job id."""
        proc = subprocess.run(
            ["sbatch", "--parsable", *options, "slurm.sh", *args],
            cwd=project, env={**self.env, **env}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, f"sbatch slurm.sh failed:\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """The job's fields, as `scontrol show job` gives them (JobState, Restarts, Reason, ...)."""
        return dict(re.findall(r"(\w+)=(\S*)", self._out("scontrol", "--oneliner", "show", "job", job_id)))

    def queued(self, job_id: str) -> bool:
        """Whether the job is in the queue: pending, running, or ending (its processes not all gone)."""
        return bool(self._out("squeue", "--noheader", f"--jobs={job_id}").strip())

    wait_for = staticmethod(wait_for)  # scripts/projects.py's, for the tests that hold a Slurm

    def stop(self) -> None:
        """Cancel every job, wait for them to end, then stop the daemons; nothing of this Slurm runs after."""
        if "slurmctld" in self.pids:
            subprocess.run(["scancel", "--full", "--partition=tests"], env=self.env, capture_output=True, timeout=60)
            ending = time.monotonic() + 60
            while self._out("squeue", "--noheader") and time.monotonic() < ending:
                time.sleep(0.5)
        for name in reversed(DAEMONS):
            if name in self.pids:
                try:
                    os.kill(self.pids[name], signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for name, pid in self.pids.items():
            self.wait_for(lambda pid=pid: not running(pid), 30, f"{name} to stop")


def running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
