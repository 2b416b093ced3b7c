"""The run directory and continuing: its start and log, its files, how it ended, the clean stop."""
