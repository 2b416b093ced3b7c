"""The run's settings: ``RunSettings``, config.yaml's keys that the machinery reads, each with its type and range
(checked by pydantic), and the rules between them (``conflicts``). config_files.py reads and checks a config."""

import re
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

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
    # The project's keys may start with "model_": pydantic's own names are not taken from them. The validator is
    # built at the first config read, not at import: a spawned process (a loader worker too) imports config.py but
    # reads no config.
    model_config = ConfigDict(strict=True, extra="forbid", protected_namespaces=(), defer_build=True)

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
