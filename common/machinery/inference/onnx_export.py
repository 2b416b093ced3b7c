"""The trained model as an ONNX file (export.py): PyTorch's export, run in onnxruntime and checked against PyTorch."""

import importlib.util
import logging
import warnings
from argparse import ArgumentParser
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from machinery.config_files import load_run_settings
from machinery.inference.trained import newest_model

# What export.py needs beyond requirements.txt: requirements-export.txt installs them.
EXPORT_PACKAGES = ("onnx", "onnxscript", "onnxruntime")
# The largest difference allowed from PyTorch's outputs: float32 kernels round differently (templates' models: < 1e-5).
TOLERANCE = 1e-4


def require_export_packages() -> None:
    """Stop with the command that installs what exporting needs, where it is missing."""
    missing = [name for name in EXPORT_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise SystemExit(
            f"export.py needs {', '.join(missing)}, which requirements.txt leaves out: "
            "pip install -r requirements-export.txt"
        )


def export_onnx(
    model: nn.Module,
    inputs: dict[str, torch.Tensor],
    output: str,
    path: Path,
    dynamic: dict[int, str] | None = None,
) -> float:
    """Write ``model`` (on the CPU, in eval mode) to ``path`` as ONNX, run it with onnxruntime on ``inputs`` and return
    the largest difference from PyTorch's output, stopping above ``TOLERANCE``. The forward takes the named ``inputs``
    in order and returns one tensor, ``output``; ``dynamic`` names input dimensions of any size but the batch (0)."""
    import onnxruntime  # requirements-export.txt's: imported once require_export_packages() has checked

    model = model.cpu().eval()
    axes = {0: "batch", **(dynamic or {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    # Exporter warnings that concern neither these models nor the user: it prefers dynamic_shapes to dynamic_axes
    # (which it turns into them, naming the ONNX file's dimensions); torchvision's detection operators lack annotations.
    logging.getLogger("torch.onnx._internal.exporter._schemas").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*'dynamic_axes' is not recommended")
        torch.onnx.export(
            model,
            tuple(inputs.values()),
            str(path),
            input_names=list(inputs),
            output_names=[output],
            dynamic_axes=dict.fromkeys(inputs, axes),  # the output's follow from them
            dynamo=True,
            external_data=False,  # one file, weights inside (ONNX's limit is 2 GB)
            verbose=False,
        )
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (result,) = session.run([output], {name: tensor.numpy() for name, tensor in inputs.items()})
    with torch.inference_mode():
        expected = model(*inputs.values())
    difference = float((torch.from_numpy(result) - expected).abs().max())
    if not difference <= TOLERANCE:  # NaN too
        raise SystemExit(f"{path}: onnxruntime's {output} differ from PyTorch's by {difference:.3g} (> {TOLERANCE})")
    return difference


def command_line(description: str, export: Callable[[Path, Path], float]) -> None:
    """export.py's command: ``export(checkpoint, output folder)`` with the checkpoint given, else the newest."""
    parser = ArgumentParser(description=description)
    newest = "the newest run's best model, else its newest checkpoint"
    parser.add_argument("--checkpoint", type=Path, help=f"a run's checkpoint (default: {newest})")
    parser.add_argument("--output", type=Path, default=Path("exported"), help="the folder to write the files in")
    args = parser.parse_args()
    require_export_packages()
    checkpoint = args.checkpoint or newest_model(load_run_settings("config.yaml").output_dir)
    difference = export(checkpoint, args.output)
    path = args.output / "model.onnx"
    print(f"{checkpoint} exported to {path}; onnxruntime's outputs are PyTorch's within {difference:.1g}")
