"""export.py: the ONNX file gives, in onnxruntime, the logits the model gives in PyTorch, to the texts its
tokenizer (exported beside it) encodes."""

import json
from pathlib import Path
from types import ModuleType

import torch
from transformers import AutoTokenizer

from config import Config
from data import CLASSES, NUM_CLASSES, setup_tokenizer, synthetic_reviews
from export import export
from machinery.inference.onnx_export import TOLERANCE
from machinery.runs.directory import write_classes
from models import setup_model


def test_export_writes_a_model_onnxruntime_runs_as_pytorch_does_its_class_names_and_tokenizer(
    config: Config, run_dir: Path, tmp_path: Path, onnxruntime: ModuleType
) -> None:
    """A run's model (saved as a run saves it, untrained) exported, then run by onnxruntime on texts the exported
    tokenizer encodes as training does, in a batch of another size and sequences of another length than the
    export's: the logits are PyTorch's within TOLERANCE; classes.json names them."""
    write_classes(run_dir, CLASSES)
    model = setup_model(config, vocab_size=len(setup_tokenizer(config)), num_classes=NUM_CLASSES).eval()
    torch.save(model.state_dict(), run_dir / "best_model_1_accuracy=0.5000.pt")
    export(run_dir / "best_model_1_accuracy=0.5000.pt", tmp_path / "exported")

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "exported")
    texts = list(synthetic_reviews(3, seed=1, max_words=12)["text"])
    tokens = tokenizer(texts, padding="longest", return_tensors="pt")  # shorter than max_length
    assert tokens["input_ids"].shape[1] < config.max_length
    session = onnxruntime.InferenceSession(str(tmp_path / "exported" / "model.onnx"))
    inputs = {key: tokens[key].numpy() for key in ("input_ids", "attention_mask")}
    (logits,) = session.run(["logits"], inputs)
    with torch.inference_mode():
        expected = model(tokens["input_ids"], tokens["attention_mask"])
    difference = float((torch.from_numpy(logits) - expected).abs().max())
    assert difference <= TOLERANCE, f"onnxruntime's logits differ from PyTorch's by {difference}"
    assert json.loads((tmp_path / "exported" / "classes.json").read_text()) == list(CLASSES)
