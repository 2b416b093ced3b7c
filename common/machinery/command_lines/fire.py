"""The command line (Python Fire): ``python main.py config.yaml --key=value ...``, any config key set for this
command."""

from typing import Any

import fire

from machinery.config_files import load_config
from machinery.launch import ConfigClass, RunFn, launch

OVERRIDE = "--{key}={value}"  # how this command line sets a key, in the advice a check gives


def cli(run: RunFn, config_class: ConfigClass) -> None:
    """Train from the command line with Python Fire."""

    def train(config: str = "config.yaml", **overrides: Any) -> None:
        """Train: ``python main.py config.yaml --key=value ...`` overrides any config key."""
        launch(run, load_config(config, config_class, **overrides), OVERRIDE)

    fire.Fire(train)
