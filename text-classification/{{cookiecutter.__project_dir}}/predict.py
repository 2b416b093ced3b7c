"""Classify texts with a trained model: ``python predict.py [FILE...] [--text TEXT] [--checkpoint PATH] [--output P]``.

Writes a CSV of ``input,label,score``: each text, its class (named as in training) and the model's probability
for it. The texts are the lines of .txt files, the text column of CSV, JSON Lines or Parquet files (config.yaml's
``text_column``), and each ``--text``. The model is the newest run's best model (else its newest training
checkpoint) unless ``--checkpoint`` names one; the run directory it is in gives the settings it was trained
with and the class names. On the GPU if there is one, else on the CPU (a TPU project's models too).
"""

from argparse import ArgumentParser
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from config import Config
from data import FILE_FORMATS, encode, read_file, setup_tokenizer
from machinery.config_files import load_config
from machinery.inference.trained import class_names, inference_device, load_trained, newest_model, write_predictions
from models import TextClassifier, logits_of, setup_model


def trained_model(checkpoint: Path) -> tuple[TextClassifier, PreTrainedTokenizerBase, Config, list[str]]:
    """The model in ``checkpoint`` (in eval mode, on the CPU), its tokenizer, the settings it was trained with and
    its class names."""
    config, weights = load_trained(checkpoint, Config)
    classes = class_names(checkpoint)
    tokenizer = setup_tokenizer(config)
    model = setup_model(config, vocab_size=len(tokenizer), num_classes=len(classes), pretrained=False)
    model.load_state_dict(weights)
    return model.eval(), tokenizer, config, classes


def predict(texts: Sequence[str], checkpoint: Path, batch_size: int = 64) -> list[tuple[str, str, float]]:
    """(text, class name, probability) of each text, by the model in ``checkpoint``, in batches."""
    model, tokenizer, config, classes = trained_model(checkpoint)
    device = inference_device()
    model.to(device)
    rows = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = list(texts[start : start + batch_size])
            tokens = encode(tokenizer, batch, config.max_length)  # as in training
            inputs = (torch.tensor(tokens[key], device=device) for key in ("input_ids", "attention_mask"))
            scores, labels = logits_of(model(*inputs)).softmax(dim=1).max(dim=1)
            named = zip(batch, labels.tolist(), scores.tolist(), strict=True)
            rows += [(text, classes[label], score) for text, label, score in named]
    return rows


def texts_in(files: Sequence[str], text_column: str) -> list[str]:
    """The texts of the files given: a .txt file's non-empty lines, a data file's ``text_column``."""
    texts = []
    for path in map(Path, files):
        if not path.is_file():
            raise SystemExit(f"{path} is not a file")
        if path.suffix == ".txt":
            texts += [line for line in path.read_text().splitlines() if line.strip()]
        elif path.suffix in FILE_FORMATS:
            data = read_file(path)
            if text_column not in data.column_names:
                raise SystemExit(f"{path} has no column {text_column!r} (text_column): it has {data.column_names}")
            texts += data[text_column]
        else:
            raise SystemExit(f"{path}: give .txt files (a text a line) or {', '.join(FILE_FORMATS)} files")
    return texts


def main() -> None:
    parser = ArgumentParser(description="Classify texts with a trained model; write a CSV of the predictions.")
    parser.add_argument("files", nargs="*", help=f"files of texts: .txt (a text a line), {', '.join(FILE_FORMATS)}")
    parser.add_argument("--text", action="append", default=[], help="a text to classify (may be repeated)")
    parser.add_argument("--checkpoint", type=Path, help="a best model or training checkpoint (default: the newest)")
    parser.add_argument("--output", type=Path, default=Path("predictions.csv"), help="the CSV file to write")
    args = parser.parse_args()
    if not args.files and not args.text:
        parser.error("give files of texts, or --text TEXT")
    config = load_config("config.yaml", Config)
    checkpoint = args.checkpoint or newest_model(config.output_dir)
    rows = predict(texts_in(args.files, config.text_column) + args.text, checkpoint)
    write_predictions(rows, args.output)
    print(f"{len(rows)} predictions of {checkpoint} in {args.output}")


if __name__ == "__main__":
    main()
