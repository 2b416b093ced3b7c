"""PROCESS_STARTS_DIR: each process that multiprocessing spawns writes a file there, named by its PID, holding its
parent's PID (a TPU replica's parent is the launcher; a DataLoader worker's, the replica that reads through it)."""

import os
import sys
from pathlib import Path

if "multiprocessing.spawn" in " ".join(sys.orig_argv):
    (Path(os.environ["PROCESS_STARTS_DIR"]) / str(os.getpid())).write_text(str(os.getppid()))
