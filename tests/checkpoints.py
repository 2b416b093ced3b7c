"""Checkpoints loaded as the generated code loads them, and compared bit for bit."""

import json
from pathlib import Path

from environments import PYTHON
from projects import run_cmd


def load_checkpoint(path: Path, deterministic: bool = False) -> dict:
    """A checkpoint loaded as the generated ``resume_from`` loads it: ``weights_only``, so it runs no code.

    A DeterministicEngine's trainer state holds NumPy's random state: with ``deterministic``, exactly
    the types of that array are allowed too, as the generated code allows them (and no others).
    """
    import numpy as np
    import torch

    allowed = []
    if deterministic:
        key = np.random.get_state()[1]
        allowed = [key.__reduce__()[0], np.ndarray, np.dtype, type(key.dtype)]
    with torch.serialization.safe_globals(allowed):
        return torch.load(path, map_location="cpu", weights_only=True)


def differences(saved, expected, where: str = "checkpoint") -> list[str]:
    """Where two loaded checkpoints differ, bit for bit: every tensor (``torch.equal``, and its dtype), NumPy
    array, number and string, walking dicts, lists and tuples alike. Empty when they are identical."""
    import numpy as np
    import torch

    if isinstance(expected, dict):
        if not isinstance(saved, dict) or saved.keys() != expected.keys():
            return [f"{where}: keys {sorted(map(str, saved))} != {sorted(map(str, expected))}"]
        return [diff for key in expected for diff in differences(saved[key], expected[key], f"{where}[{key!r}]")]
    if isinstance(expected, list | tuple):
        if type(saved) is not type(expected) or len(saved) != len(expected):
            return [f"{where}: {saved!r} != {expected!r}"]
        pairs = enumerate(zip(saved, expected, strict=True))
        return [diff for i, (a, b) in pairs for diff in differences(a, b, f"{where}[{i}]")]
    if isinstance(expected, torch.Tensor):
        same = isinstance(saved, torch.Tensor) and saved.dtype == expected.dtype and torch.equal(saved, expected)
        return [] if same else [f"{where}: tensors differ"]
    if isinstance(expected, np.ndarray):
        return [] if np.array_equal(saved, expected) else [f"{where}: arrays differ"]
    return [] if type(saved) is type(expected) and saved == expected else [f"{where}: {saved!r} != {expected!r}"]


# Run in the base venv: loads a checkpoint as a user without torch_xla would, with no map_location (a
# tensor saved on the XLA device would then fail to load, or load onto it), and prints where its tensors are.
LOAD_AS_SAVED = """
import importlib.util, json, sys, torch

def tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict | list | tuple):
        for item in value.values() if isinstance(value, dict) else value:
            yield from tensors(item)

checkpoint = torch.load(sys.argv[1], weights_only=True)
devices = [str(tensor.device) for tensor in tensors(checkpoint)]
print(json.dumps({"torch_xla": importlib.util.find_spec("torch_xla") is not None, "devices": devices}))
"""


def check_loads_without_torch_xla(checkpoint: Path) -> None:
    """The checkpoint of an XLA run holds CPU tensors as saved: it loads where no XLA device exists."""
    proc = run_cmd([PYTHON, "-c", LOAD_AS_SAVED, str(checkpoint)], cwd=checkpoint.parent)
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not loaded["torch_xla"], f"{PYTHON} must be an environment without torch_xla"
    assert loaded["devices"], f"{checkpoint.name} holds no tensors"
    assert set(loaded["devices"]) == {"cpu"}, f"{checkpoint.name} must hold CPU tensors only: {loaded['devices']}"
