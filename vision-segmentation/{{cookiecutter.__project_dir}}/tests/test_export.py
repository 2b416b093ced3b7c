"""export.py: the ONNX file gives, in onnxruntime, the logits the model's main head gives in PyTorch."""

import json
from pathlib import Path
from types import ModuleType

import torch

from config import Config
from data import CLASSES, NUM_CLASSES
from export import export
from machinery.inference.onnx_export import TOLERANCE
from machinery.runs.directory import write_classes
from models import logits_of, setup_model


def test_export_writes_a_model_onnxruntime_runs_on_any_image_size_as_pytorch_does(
    config: Config, run_dir: Path, tmp_path: Path, onnxruntime: ModuleType
) -> None:
    """A run's model (saved as a run saves it, untrained) exported, then run by onnxruntime on a batch of another
    size, and images of another height and width, than the export's: the main head's logits are PyTorch's within
    TOLERANCE; classes.json names them."""
    write_classes(run_dir, CLASSES)
    model = setup_model(config.model, NUM_CLASSES).eval()
    torch.save(model.state_dict(), run_dir / "best_model_1_mIoU=0.5000.pt")
    export(run_dir / "best_model_1_mIoU=0.5000.pt", tmp_path / "exported")

    images = torch.randn(1, 3, config.crop_size + 16, config.crop_size - 8)
    session = onnxruntime.InferenceSession(str(tmp_path / "exported" / "model.onnx"))
    (logits,) = session.run(["logits"], {"images": images.numpy()})
    with torch.inference_mode():
        expected = logits_of(model(images))
    assert logits.shape == (1, NUM_CLASSES, config.crop_size + 16, config.crop_size - 8), "a score per class and pixel"
    difference = float((torch.from_numpy(logits) - expected).abs().max())
    assert difference <= TOLERANCE, f"onnxruntime's logits differ from PyTorch's by {difference}"
    assert json.loads((tmp_path / "exported" / "classes.json").read_text()) == list(CLASSES)
