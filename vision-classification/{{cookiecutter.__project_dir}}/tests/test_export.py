"""export.py: the ONNX file gives, in onnxruntime, the logits the model gives in PyTorch."""

import json
from pathlib import Path
from types import ModuleType

import torch

from config import Config
from data import NUM_CLASSES
from export import export
from machinery.inference.onnx_export import TOLERANCE
from machinery.runs.directory import write_classes
from models import setup_model


def test_export_writes_a_model_onnxruntime_runs_as_pytorch_does_and_its_class_names(
    config: Config, run_dir: Path, tmp_path: Path, onnxruntime: ModuleType
) -> None:
    """A run's model (saved as a run saves it, untrained) exported, then run by onnxruntime on a batch of another
    size than the export's: the logits are PyTorch's within TOLERANCE; classes.json names them."""
    classes = [f"class {label}" for label in range(NUM_CLASSES)]
    write_classes(run_dir, classes)
    model = setup_model(config.model, num_classes=NUM_CLASSES).eval()
    torch.save(model.state_dict(), run_dir / "best_model_1_accuracy=0.5000.pt")
    export(run_dir / "best_model_1_accuracy=0.5000.pt", tmp_path / "exported")

    images = torch.randn(3, 3, config.image_size, config.image_size)
    session = onnxruntime.InferenceSession(str(tmp_path / "exported" / "model.onnx"))
    (logits,) = session.run(["logits"], {"images": images.numpy()})
    with torch.inference_mode():
        expected = model(images)
    difference = float((torch.from_numpy(logits) - expected).abs().max())
    assert difference <= TOLERANCE, f"onnxruntime's logits differ from PyTorch's by {difference}"
    assert json.loads((tmp_path / "exported" / "classes.json").read_text()) == classes
