"""sweep.yaml read and checked: the study's settings, the search space over the config's keys, a trial's config."""

import re
import string
from pathlib import Path
from typing import Any

import optuna
from pydantic import BaseModel, ConfigDict, PositiveInt, ValidationError

from machinery.config_files import read_yaml, said, value_refused
from machinery.settings import RunSettings

# Set by sweep.py for a trial's command: the study, the trial and the pruner's settings (JSON).
TRIAL_ENV = "IGNITE_SWEEP_TRIAL"
# The study's database URL: only ever in the environment (it may hold a password), never in a file a run writes.
STORAGE_ENV = "OPTUNA_STORAGE"
# Keys a trial may not set: where its run goes (the sweep's), what it continues from, how the study ranks trials, how
# its processes start (the trial's command).
FIXED = ("output_dir", "resume_from", "score", "backend", "nproc_per_node", "nnodes", "node_rank", "master_addr")
# What each distribution takes: (required keys, optional keys).
KINDS = {
    "float": (("low", "high"), ("log", "step")),
    "int": (("low", "high"), ("log", "step")),
    "categorical": (("choices",), ()),
}


class SweepSettings(BaseModel):
    """sweep.yaml's keys (the comments there say what each does)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    config: str
    command: str
    study: str
    n_trials: PositiveInt
    pruning: bool
    startup_trials: int
    warmup_epochs: int
    heartbeat_interval: PositiveInt
    space: dict  # config key: its distribution


def make_pruner(pruning: bool, startup_trials: int, warmup_epochs: int) -> optuna.pruners.BasePruner:
    """Optuna's median pruner: a trial ends at an evaluation worse than the median of earlier trials' at that epoch,
    once ``startup_trials`` trials finished and after its first ``warmup_epochs`` evaluations."""
    if not pruning:
        return optuna.pruners.NopPruner()
    # Optuna's steps are the epochs: the first that can prune is n_warmup_steps.
    return optuna.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=warmup_epochs + 1)


def load_sweep(path: Path, config_class: type[RunSettings]) -> tuple[SweepSettings, dict[str, Any]]:
    """The sweep's settings and its config's keys and values; or stop, naming what is wrong in ``path``."""
    values = read_yaml(path)
    fields = list(SweepSettings.model_fields)
    if not isinstance(values.get("space"), dict) or not values["space"]:
        raise SystemExit(f"{path}: space must map config keys to their distributions (got {values.get('space')!r})")
    unknown, missing = sorted(set(values) - set(fields)), [name for name in fields if name not in values]
    if unknown or missing:
        raise SystemExit(f"{path}: unknown keys {unknown}, missing keys {missing}; it takes {', '.join(fields)}")
    try:
        settings = SweepSettings(**values)
    except ValidationError as error:
        raise SystemExit(f"{path}: " + "; ".join(said(problem, SweepSettings) for problem in error.errors())) from None
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", settings.study):
        raise SystemExit(f"{path}: study: {settings.study!r} is not a name (letters, digits, '_', '.', '-')")
    try:
        placeholders = {name for _, name, _, _ in string.Formatter().parse(settings.command) if name is not None}
    except ValueError as error:
        raise SystemExit(f"{path}: command: {error} in {settings.command!r}") from None
    if placeholders - {"config", "dir", "name"} or not ({"config"} <= placeholders or {"dir", "name"} <= placeholders):
        raise SystemExit(
            f"{path}: command: {settings.command!r} must name the trial's config, as "
            "{config} (or Hydra's {dir} and {name}), and nothing else in braces"
        )
    for key, spec in settings.space.items():
        _check_distribution(path, key, spec, config_class)
    return settings, read_yaml(Path(path).parent / settings.config)


def _check_distribution(path: Path, key: str, spec: Any, config_class: type[RunSettings]) -> None:
    """Stop, naming the file and the key, unless ``spec`` is a distribution the config key ``key`` can take."""
    where = f"{path}: space: {key}"
    if key not in config_class.model_fields or key in FIXED:
        fixed = f"; {', '.join(FIXED)} are the sweep's own" if key in FIXED else ""
        raise SystemExit(f"{where} is not a config key a trial can set (see config.py's Config{fixed})")
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind not in KINDS:
        raise SystemExit(f"{where}: give a mapping with type: {', '.join(KINDS)} (got {spec!r})")
    required, optional = KINDS[kind]
    keys = set(spec) - {"type"}
    if set(required) - keys or keys - set(required) - set(optional):
        raise SystemExit(f"{where}: a {kind} takes {', '.join(required)} and optionally {', '.join(optional) or '-'}")
    values = spec["choices"] if kind == "categorical" else [spec["low"], spec["high"]]
    number = float if kind == "float" else int
    if kind != "categorical" and not all(_is_number(value, number) for value in values):
        raise SystemExit(f"{where}: low and high must be {number.__name__}s (got {values})")
    if kind == "categorical" and not (isinstance(values, list) and values):
        raise SystemExit(f"{where}: choices must be a list of values (got {values!r})")
    # Every value the trial may get: the choices, or both ends (a float between two ints of an int key refused too).
    refused = [(value, why) for value in values if (why := value_refused(config_class, key, value))]
    middle = 0.5 * (values[0] + values[1]) if kind == "float" else None
    if not refused and middle is not None and (why := value_refused(config_class, key, middle)):
        refused = [(middle, why)]
    if refused:
        wrong, whys = [value for value, _ in refused], "; ".join(why for _, why in refused)
        raise SystemExit(f"{where}: {wrong} cannot be the config key's values: {whys}")
    if kind == "categorical":
        return
    if not isinstance(spec.get("log", False), bool) or not _is_number(spec.get("step", number(1)), number):
        raise SystemExit(f"{where}: log must be true or false, and step a {number.__name__} (got {spec})")
    if values[0] >= values[1]:
        raise SystemExit(f"{where}: low must be below high, got {values}")
    options = {name: value for name, value in spec.items() if name != "type"}
    try:  # what Optuna itself refuses: log with a step, a step of 0, log from 0 or below
        (optuna.distributions.FloatDistribution if kind == "float" else optuna.distributions.IntDistribution)(**options)
    except ValueError as error:
        raise SystemExit(f"{where}: {error}") from None


def _is_number(value: Any, number: type) -> bool:
    """Whether ``value`` is an int (an int key's), or an int or float (a float key's): a bool is neither."""
    return isinstance(value, int | float if number is float else int) and not isinstance(value, bool)


def suggest(trial: optuna.Trial, space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The trial's value for each key of the search space (a continued trial's are its first's)."""
    values: dict[str, Any] = {}
    for key, spec in space.items():
        options = {name: value for name, value in spec.items() if name != "type"}
        if spec["type"] == "float":
            values[key] = trial.suggest_float(key, **options)
        elif spec["type"] == "int":
            values[key] = trial.suggest_int(key, **options)
        else:
            values[key] = trial.suggest_categorical(key, options["choices"])
    return values
