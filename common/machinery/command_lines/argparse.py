"""The command line (argparse): ``python main.py config.yaml --key value ...``, any config key set for this command."""

from argparse import SUPPRESS, ArgumentParser, RawDescriptionHelpFormatter
from collections.abc import Iterable
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

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
        field = config_class.model_fields[key]
        annotation = field.annotation
        keys.add_argument(
            f"--{key}",
            default=SUPPRESS,
            metavar="VALUE",
            type=lambda text, a=annotation: _read(text, a),
            help=_kind(annotation, field.metadata),
        )
    args = vars(parser.parse_args())
    config = load_config(args.pop("config"), config_class, **args)
    launch(run, config, OVERRIDE)


# What --help says of a key's bounds, kept by pydantic as annotated_types' (Field(gt=0, le=1): Gt(gt=0), Le(le=1)).
BOUNDS = {"Gt": "above", "Ge": "at least", "Lt": "below", "Le": "at most"}
NAMES = {int: "an int", float: "a float", str: "text", bool: "true or false", type(None): "null"}


def _kind(annotation: Any, metadata: Iterable[Any] = ()) -> str:
    """The values a key takes, as --help shows them: ``an int above 0``, ``'float16' or 'bfloat16' or null``.
    ``metadata``: its bounds (a field's own, or a Field(...)'s in an Annotated)."""
    if get_origin(annotation) is Literal:
        return " or ".join(repr(value) for value in get_args(annotation))
    if get_origin(annotation) in (Union, UnionType):
        return " or ".join(_kind(member) for member in get_args(annotation))
    if get_origin(annotation) is Annotated:
        base, *inner = get_args(annotation)
        return _kind(base, [item for entry in inner for item in getattr(entry, "metadata", [entry])])
    name = NAMES.get(annotation, getattr(annotation, "__name__", str(annotation)))
    bounds = [
        f"{BOUNDS[kind]} {getattr(item, kind.lower())}" for item in metadata if (kind := type(item).__name__) in BOUNDS
    ]
    return " ".join([name, " and ".join(bounds)]) if bounds else name


def _read(text: str, annotation: Any) -> Any:
    """A value as config.yaml would read it (a number, true, null, a list), or, for a key that takes text, as typed
    (a `filename_prefix` of 007)."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    takes_text = "str" in str(annotation)
    return text if takes_text and value is not None and not isinstance(value, str) else value
