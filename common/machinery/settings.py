"""The run's settings (``RunSettings``), and the config read: config.yaml and overrides, checked against ``Config``
(pydantic: each key's type and range, then the rules between keys), stopping with the key, its value and what is
allowed."""

import re
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

# config.yaml's keys that are Hydra's own settings, not the run's.
HYDRA_KEYS = ("defaults", "hydra")
# The keys of a project that evaluates (an evaluator and its metric): a project without one has none of them.
EVALUATION_KEYS = ("eval_epoch_length", "ema_momentum", "score", "patience", "save_best_model")
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0")


def _matching(pattern: str, allowed: str) -> AfterValidator:
    """A text key's check: the whole value matches ``pattern``, else it names ``allowed``."""

    def check(value: str) -> str:
        if not re.fullmatch(pattern, value):
            raise ValueError(f"it must be {allowed}")
        return value

    return AfterValidator(check)


# The kinds of value RunSettings' keys take, beyond Python's and pydantic's own (PositiveInt).
Share = Annotated[float, Field(gt=0, le=1)]
Rank = Annotated[int, Field(ge=0)]
Port = Annotated[int, Field(ge=1, le=65535)]
Host = Annotated[str, _matching(r"[A-Za-z0-9][A-Za-z0-9.\-]*|\[[0-9A-Fa-f:]+\]", "a host name or an IP address")]
Name = Annotated[str, _matching(r"[A-Za-z0-9_\-]+", "letters, digits, '_' or '-'")]
Folder = Annotated[str, _matching(r"[^\x00-\x1f]*\S[^\x00-\x1f]*", "a path on one line")]


class RunSettings(BaseModel):
    """config.yaml's keys the machinery reads (after the project's own), typed, defaulting to the generated values."""

    # Strict: a value of another type stops the run (YAML's own numbers and booleans only), as does an unknown key.
    # The project's keys may start with "model_": pydantic's own names are not taken from them.
    model_config = ConfigDict(strict=True, extra="forbid", protected_namespaces=())

{% include "config/run_settings.py" %}

    @field_validator("*", mode="before")
    @classmethod
    def _float_from_text(cls, value: Any, info: ValidationInfo) -> Any:
        """PyYAML reads `lr: 5e-5` as a string (YAML 1.1's floats have a dot: 5.0e-5): a float key takes the number."""
        if isinstance(value, str) and "float" in str(cls.model_fields[info.field_name].annotation):
            try:
                return float(value)
            except ValueError:
                return value
        return value

    @model_validator(mode="after")
    def _keys_agree(self) -> "RunSettings":
        """The rules between keys: each refused with the keys, their values and what is allowed."""
        problems = conflicts(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self


Settings = TypeVar("Settings", bound=RunSettings)  # config.py's Config


def conflicts(config: RunSettings) -> list[str]:
    """What the keys of ``config`` allow each other: one message per rule broken."""
    problems = []
    tpu = config.backend == "xla-tpu"
    if tpu and config.mixed_precision == "float16":
        problems.append(
            "mixed_precision: 'float16' is not allowed with backend: 'xla-tpu': it must be 'bfloat16' or null (TPUs "
            "compute in bfloat16, which needs no gradient scaler; float16's scaler is for CUDA GPUs)"
        )
    if tpu and config.compile:
        problems.append(
            "compile: true is not allowed with backend: 'xla-tpu': it must be false (torch_xla compiles each "
            "training step itself; torch.compile's inductor is for GPUs and CPUs)"
        )
    processes = {key: getattr(config, key, 1) for key in ("nproc_per_node", "nnodes")}
    if config.backend is None:
        problems += [
            f"{key}: {value} is not allowed with backend: null (one process): it must be 1, or give a backend, "
            "nccl (GPUs) or gloo (CPUs)"
            for key, value in processes.items()
            if value != 1
        ]
    elif processes["nnodes"] > 1 and config.master_addr in LOOPBACK:
        problems.append(
            f"master_addr: {config.master_addr!r} is not allowed with nnodes: {config.nnodes}: it must be the address "
            "of the master node that the other nodes can reach, not a loopback address"
        )
    if getattr(config, "node_rank", 0) >= processes["nnodes"]:
        problems.append(
            f"node_rank: {config.node_rank} is not allowed with nnodes: {config.nnodes}: it must be from 0 to "
            f"{config.nnodes - 1}"
        )
    return problems


def file_order(config_class: type[RunSettings]) -> list[str]:
    """The config's keys as config.yaml lists them: the project's own (config.py), then the run settings."""
    keys, run = list(config_class.model_fields), set(RunSettings.model_fields)
    return [key for key in keys if key not in run] + [key for key in keys if key in run]


def as_dict(config: RunSettings) -> dict[str, Any]:
    """The config's keys and values, in config.yaml's order (a run's config-lock.yaml, a tracker's record)."""
    return {key: getattr(config, key) for key in file_order(type(config))}


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
        said = "; ".join(_said(problem, config_class) for problem in error.errors())
        raise SystemExit(f"{source} has values that are not allowed: {said}") from None


def _said(error: dict[str, Any], config_class: type[RunSettings]) -> str:
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
    return f"{key}: {_yaml(error['input'])} is not allowed: {message}"


def _yaml(value: Any) -> str:
    """``value`` as config.yaml writes it (null, true, 'text', 3)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)
