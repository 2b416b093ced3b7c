"""Tune the training config with Optuna: ``python sweep.py sweep.yaml`` (the README's "Sweep")."""

from config import Config
from machinery.sweeps.study import sweep_cli

if __name__ == "__main__":
    sweep_cli(Config)
