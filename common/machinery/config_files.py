"""config.yaml (with a command line's keys) and a run's config-lock.yaml, read and checked against config.py's
``Config``: a key missing, undeclared, of another type, out of its range or at odds with another stops the run before
it writes anything, naming the key, its value and what is allowed."""

import math
import re
import typing
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from machinery.settings import RunSettings, Settings, file_order

# config.yaml's keys that are Hydra's own settings, not the run's.
HYDRA_KEYS = ("defaults", "hydra")
# The keys of a project that evaluates (an evaluator and its metric): a project without one has none of them.
EVALUATION_KEYS = ("eval_epoch_length", "ema_momentum", "score", "patience", "save_best_model")


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
    """Read the YAML config, apply overrides (the command line's ``--key value``) and check it."""
    values = read_yaml(path)
    for key in HYDRA_KEYS:
        values.pop(key, None)
    unknown = sorted(set(overrides) - set(config_class.model_fields))
    if unknown:
        raise SystemExit(f"Unknown config keys {unknown}; the config keys are {sorted(config_class.model_fields)}")
    source = f"{path} with the command line's keys" if overrides else str(path)
    return checked_config({**values, **overrides}, source, config_class)


def load_lock(path: str | Path, config_class: type[Settings]) -> Settings:
    """A run's config-lock.yaml, checked: a key it lacks (one added to the project since the run started) takes its
    default, with which the run trained."""
    defaults = {key: field.default for key, field in config_class.model_fields.items()}
    return checked_config({**defaults, **read_yaml(path)}, str(path), config_class)


def load_run_settings(path: str | Path) -> RunSettings:
    """A config file's run settings alone (the project's own keys left aside): where predict.py finds the runs."""
    values = read_yaml(path)
    return checked_config({k: v for k, v in values.items() if k in RunSettings.model_fields}, str(path), RunSettings)


def checked_config(values: dict[str, Any], source: str, config_class: type[Settings]) -> Settings:
    """``values`` as a Config once every key is declared, present and allowed: else stop, naming what is wrong."""
    keys = file_order(config_class)
    undeclared = [key for key in values if key not in keys]
    evaluation = [key for key in undeclared if key in EVALUATION_KEYS]
    if evaluation:
        raise SystemExit(
            f"{source} has {', '.join(evaluation)}: keys of a project that evaluates its model (an evaluator and its "
            "metric, which early stopping, the best models and the average of the weights rank), and this one does not."
        )
    if undeclared:
        raise SystemExit(
            f"{source} has keys that config.py does not declare: {', '.join(undeclared)}. Declare each in its "
            "Config (name: type = default value), or remove it."
        )
    missing = {key: config_class.model_fields[key].default for key in keys if key not in values}
    if missing:
        raise SystemExit(
            f"{source} lacks keys that this project reads: {', '.join(missing)}. Add them, for example "
            f"with the values this project was generated with:\n{yaml.safe_dump(missing, sort_keys=False)}"
        )
    try:
        return config_class(**values)
    except ValidationError as error:
        place = {key: index for index, key in enumerate(keys)}  # config.yaml's order; the rules between keys last
        problems = sorted(error.errors(), key=lambda problem: place.get(next(iter(problem["loc"]), ""), len(place)))
        said_all = "; ".join(said(problem, config_class) for problem in problems)
        raise SystemExit(f"{source} has values that are not allowed: {said_all}") from None


def value_refused(config_class: type[RunSettings], key: str, value: Any) -> str | None:
    """Why ``value`` cannot be the config key ``key``'s (its type and range alone), or None if it can."""
    field = config_class.model_fields[key]
    kind = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    try:
        TypeAdapter(kind).validate_python(value, strict=True)
    except ValidationError as error:
        return said({**error.errors()[0], "loc": (key,)}, config_class)
    return None


def said(error: dict[str, Any], config_class: type[BaseModel]) -> str:
    """One of pydantic's errors as the run says it: the key, its value, what it must be."""
    message = error["msg"].removeprefix("Value error, ").replace("Input should be", "it must be")
    if not error["loc"]:  # a rule between keys (conflicts): its message names them
        return message
    key = str(error["loc"][0])
    if key in config_class.model_fields and type(None) in typing.get_args(config_class.model_fields[key].annotation):
        message += ", or null"
    if key == "backend":
        message += (
            " (a project trains on the backends it was generated for: TPUs with xla-tpu, GPUs and CPUs with nccl, "
            "gloo or one process; Ignite Templates' README, 'Change an answer later', moves it to the other)"
        )
    shown = repr(error["input"]) if isinstance(error["input"], str) else yaml_value(error["input"])
    return f"{key}: {shown} is not allowed: {message}"


def with_values(text: str, values: dict[str, Any]) -> str:
    """config.yaml's ``text`` with ``values`` in place of its keys' (their lines' comments kept): a sweep's trial's
    config, a config carried across a template update (upgrade.py)."""
    for key, value in values.items():
        line = re.compile(rf"^{re.escape(key)}:[^#\n]*?(?=[ \t]*(#|$))", re.MULTILINE)
        if len(line.findall(text)) != 1:
            raise SystemExit(f"the config has no line `{key}: ...` of its own to set")
        text = line.sub(lambda _match, key=key, value=value: f"{key}: {yaml_value(value)}", text)
    return text


def yaml_value(value: Any) -> str:
    """``value`` on one line as YAML 1.1 reads it back (null, true, 'a: b', a float's exponent after a dot: 1.0e-05)."""
    if isinstance(value, float) and math.isfinite(value):
        return re.sub(r"^(-?\d+)(e)", r"\1.0\2", repr(value))
    return yaml.safe_dump(value, default_flow_style=True, width=1_000_000).removesuffix("\n...\n").strip()
