"""The command line (argparse): ``python main.py config.yaml --key value ...``, any config key set for this command."""

from argparse import SUPPRESS, ArgumentParser, RawDescriptionHelpFormatter
from pathlib import Path
from typing import Any

import yaml

from machinery.config_files import load_config
from machinery.launch import ConfigClass, RunFn, launch
from machinery.settings import file_order

OVERRIDE = "--{key} {value}"  # how this command line sets a key, in the advice a check gives


def cli(run: RunFn, config_class: ConfigClass) -> None:
    """Train from the command line: ``python main.py config.yaml [--key value ...]``."""
    parser = ArgumentParser(
        description="Train with PyTorch-Ignite. Each --key sets config.yaml's key for this command: a number, true or "
        "false, null, or text, as config.yaml writes it.",
        formatter_class=RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", type=Path, help="path to the YAML config, e.g. config.yaml")
    keys = parser.add_argument_group("config keys (config.yaml's value where not given)")
    for key in file_order(config_class):
        annotation = config_class.model_fields[key].annotation
        keys.add_argument(f"--{key}", default=SUPPRESS, metavar="VALUE", type=lambda text, a=annotation: _read(text, a))
    args = vars(parser.parse_args())
    config = load_config(args.pop("config"), config_class, **args)
    launch(run, config, OVERRIDE)


def _read(text: str, annotation: Any) -> Any:
    """A value as config.yaml would read it (a number, true, null, a list), or, for a key that takes text, as typed
    (a `filename_prefix` of 007)."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    takes_text = "str" in str(annotation)
    return text if takes_text and value is not None and not isinstance(value, str) else value
