"""``python -m machinery.sweeps.orphans WORKER_PID COMMAND...``: run COMMAND (a trial's training command), sent SIGTERM
when the sweep worker that started it dies, by kill -9 too: it then stops cleanly, its checkpoint saved, for the
next worker to continue (on Linux; elsewhere a trial outlives its killed worker: stop it by hand)."""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # Linux's prctl option: a signal for this process when its parent dies


def main() -> None:
    worker, command = int(sys.argv[1]), sys.argv[2:]
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != worker:  # the worker died before the line above: nobody waits for this trial
            sys.exit(f"The sweep worker (PID {worker}) ended before its trial started.")
    os.execvp(command[0], command)  # the signal set above outlives exec


if __name__ == "__main__":
    main()
