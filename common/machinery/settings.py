{% import "flags.j2" as flags with context %}
"""The run's settings (``RunSettings``), and the config read: config.yaml and overrides, checked against ``Config``."""

import dataclasses
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any{{ ", Literal" if flags.amp }}, TypeVar

import yaml

# config.yaml's keys that are Hydra's own settings, not the run's.
HYDRA_KEYS = ("defaults", "hydra")


@dataclass
class RunSettings:
    """config.yaml's keys the machinery reads (after the project's own), typed, defaulting to the generated values."""

{% include "config/run_settings.py" %}


Settings = TypeVar("Settings", bound=RunSettings)  # config.py's Config


def file_order(config_class: type[RunSettings]) -> list[dataclasses.Field]:
    """The config's keys as config.yaml lists them: the project's own (config.py), then the run settings."""
    fields, run = dataclasses.fields(config_class), {field.name for field in dataclasses.fields(RunSettings)}
    return [field for field in fields if field.name not in run] + [field for field in fields if field.name in run]


def as_dict(config: RunSettings) -> dict[str, Any]:
    """The config's keys and values, in config.yaml's order (a run's config-lock.yaml, a tracker's record)."""
    return {field.name: getattr(config, field.name) for field in file_order(type(config))}


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A config file's keys and values. A key given twice stops the run, naming it and its lines: PyYAML would keep
    the last one silently (a merge, or a `cruft update` conflict resolved by keeping both sides, writes two)."""
    try:
        text = Path(path).read_text()
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except OSError as error:
        raise SystemExit(f"{path} cannot be read: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise SystemExit(f"{path} is not YAML that can be read: {error}") from None
    if node is not None and not isinstance(node, yaml.MappingNode):
        raise SystemExit(f"{path} must be a mapping of keys to values, one `key: value` a line")
    lines: dict[str, list[int]] = {}
    for key, _ in node.value if node is not None else []:
        lines.setdefault(key.value, []).append(key.start_mark.line + 1)
    twice = [f"{key} (lines {', '.join(map(str, found))})" for key, found in lines.items() if len(found) > 1]
    if twice:
        raise SystemExit(f"{path} gives a key more than once: {'; '.join(twice)}. Keep one line for each key.")
    return yaml.safe_load(text) or {}


def load_config(path: str | Path, config_class: type[Settings], **overrides: Any) -> Settings:
    """Read the YAML config, apply overrides (the command line's ``--key=value``) and check it."""
    values = read_yaml(path)
    for key in HYDRA_KEYS:
        values.pop(key, None)
    keys = [field.name for field in dataclasses.fields(config_class)]
    unknown = sorted(set(overrides) - set(keys))
    if unknown:
        raise SystemExit(f"Unknown config keys {unknown}; the config keys are {sorted(keys)}")
    return checked_config({**values, **overrides}, str(path), config_class)


def load_run_settings(path: str | Path) -> RunSettings:
    """A config file's run settings alone (the project's own keys left aside): where predict.py finds the runs."""
    values = read_yaml(path)
    names = [field.name for field in dataclasses.fields(RunSettings)]
    return checked_config({key: value for key, value in values.items() if key in names}, str(path), RunSettings)


def checked_config(values: dict[str, Any], source: str, config_class: type[Settings]) -> Settings:
    """``values`` as a Config once every key is declared, present and of its type: else stop, naming what is wrong."""
    fields = {field.name: field for field in file_order(config_class)}
    undeclared = [key for key in values if key not in fields]
    if undeclared:
        raise SystemExit(
            f"{source} has keys that config.py does not declare: {', '.join(undeclared)}. Declare each in its "
            "Config (name: type = default value), or remove it."
        )
    missing = {name: field.default for name, field in fields.items() if name not in values}
    if missing:
        raise SystemExit(
            f"{source} lacks keys that this project reads: {', '.join(missing)}. Add them, for example "
            f"with the values this project was generated with:\n{yaml.safe_dump(missing, sort_keys=False)}"
        )
    hints = typing.get_type_hints(config_class)
    # PyYAML reads `lr: 5e-5` as a string (YAML 1.1's floats have a dot: 5.0e-5): a float key takes it as the number.
    values = {key: _float_or_value(value, hints[key]) for key, value in values.items()}
    wrong = [f"{key}: {values[key]!r} is not {_name(hints[key])}" for key in fields if not _is(values[key], hints[key])]
    if wrong:
        raise SystemExit(f"{source} has values of the wrong type: " + "; ".join(wrong))
    return config_class(**values)


def _float_or_value(value: Any, kind: Any) -> Any:
    """``value`` as a float where it is a string that reads as one and ``kind`` takes a float, else as it is."""
    if isinstance(value, str) and _is(0.5, kind) and not _is(value, kind):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _is(value: Any, kind: Any) -> bool:
    """Whether ``value`` is of type ``kind`` (an int is a float, a bool no number; list and Literal items checked)."""
    if _is_union(kind):
        return any(_is(value, option) for option in typing.get_args(kind))
    if typing.get_origin(kind) is typing.Literal:
        return any(type(value) is type(allowed) and value == allowed for allowed in typing.get_args(kind))
    if typing.get_origin(kind) is list:
        (item,) = typing.get_args(kind)
        return isinstance(value, list) and all(_is(element, item) for element in value)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _is_union(kind: Any) -> bool:
    """Whether ``kind`` is a union (``str | None``; ``Literal["a"] | None``, a ``typing.Union`` up to Python 3.13)."""
    return isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union


def _name(kind: Any) -> str:
    """``int``, ``str or None``, ``'float16' or 'bfloat16' or None``, ...: a type as the error message says it."""
    if _is_union(kind):
        return " or ".join(_name(option) for option in typing.get_args(kind))
    if typing.get_origin(kind) is typing.Literal:
        return " or ".join(map(repr, typing.get_args(kind)))
    if typing.get_origin(kind) is list:
        return f"a list of {_name(typing.get_args(kind)[0])}"
    return "None" if kind is type(None) else kind.__name__
