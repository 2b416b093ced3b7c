"""Sweeps: a study of trials over the config's keys (sweep.py), each trial a run of the training command."""
