"""export.py: the ONNX file gives, in onnxruntime, the images the generator draws in PyTorch."""

import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
import yaml

import export
from config import Config
from machinery.inference.onnx_export import TOLERANCE
from models import Generator


def test_export_writes_a_generator_onnxruntime_runs_as_pytorch_does(
    config: Config, run_dir: Path, tmp_path: Path, onnxruntime: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's command, with the newest run's newest training checkpoint (the generator saved as a run saves
    it, untrained): onnxruntime's images, from noise of another batch size than the export's, are the generator's
    (batch norm in eval mode) in [0, 1] within TOLERANCE."""
    generator = Generator(config.z_dim, config.g_filters, config.channels, config.image_size).eval()
    torch.save({"trainer": {}, "generator": generator.state_dict()}, run_dir / "training_checkpoint_4.pt")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config.model_dump()))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["export.py"])
    export.command_line("Export a trained generator to ONNX.", export.export)

    noise = torch.randn(3, config.z_dim, 1, 1)
    session = onnxruntime.InferenceSession(str(tmp_path / "exported" / "model.onnx"))
    (images,) = session.run(["images"], {"noise": noise.numpy()})
    with torch.inference_mode():
        expected = (generator(noise) + 1) / 2
    difference = float((torch.from_numpy(images) - expected).abs().max())
    assert difference <= TOLERANCE, f"onnxruntime's images differ from PyTorch's by {difference}"
