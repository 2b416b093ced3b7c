"""Fast checks of the data, the model and short training runs, on CPU with synthetic data (offline)."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from datasets import DatasetDict

import data
from config import Config
from data import CLASSES, NUM_CLASSES, get_datasets, setup_tokenizer, synthetic_reviews
from machinery.inference.trained import inference_device, newest_model
from machinery.runs.directory import write_classes
from main import run
from models import setup_model
from predict import predict, texts_in


def test_every_synthetic_review_is_padded_to_max_length(config: Config) -> None:
    train, evaluation, classes = get_datasets(config, setup_tokenizer(config))
    assert classes == CLASSES
    everything = train[:]
    # One shape for every batch (one XLA compilation), whatever the length of the texts.
    assert everything["input_ids"].shape == everything["attention_mask"].shape == (len(train), config.max_length)
    assert set(everything["label"].tolist()) == set(range(NUM_CLASSES))
    assert len(evaluation) > 0


def test_imdb_path_tokenizes_the_splits_it_loads(config: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """The IMDB code path, given a small stand-in for the download: tests never reach the network."""
    splits = DatasetDict(train=synthetic_reviews(8, 0, max_words=20), test=synthetic_reviews(4, 1, max_words=20))

    def load_dataset(path: str, name: str | None, cache_dir: str) -> DatasetDict:
        assert (path, name, cache_dir) == ("stanfordnlp/imdb", None, config.data_path), "IMDB, cached in data_path"
        return splits

    monkeypatch.setattr(data, "load_dataset", load_dataset)
    imdb = config.model_copy(update={"dataset": "imdb"})
    train, evaluation, classes = get_datasets(imdb, setup_tokenizer(config))
    assert (len(train), len(evaluation)) == (8, 4)
    assert classes == CLASSES, "the classes are the dataset's label names"
    assert tuple(train[0]["input_ids"].shape) == (config.max_length,)


def test_model_gives_one_logit_per_class_whatever_the_padding(config: Config) -> None:
    tokenizer = setup_tokenizer(config)
    model = setup_model(config, vocab_size=len(tokenizer), num_classes=NUM_CLASSES).eval()
    short = tokenizer(["a good film"], padding="max_length", max_length=8, return_tensors="pt")
    long = tokenizer(["a good film"], padding="max_length", max_length=16, return_tensors="pt")
    with torch.no_grad():
        logits = model(short["input_ids"], short["attention_mask"])
        assert logits.shape == (1, NUM_CLASSES)
        # Padding is masked out: more of it changes nothing.
        torch.testing.assert_close(model(long["input_ids"], long["attention_mask"]), logits)


{% include "pytest/classifier_short_run.py" %}


def test_a_short_run_learns_the_synthetic_data(train_for_eval_scores: Callable[..., list[float]]) -> None:
    """Eval accuracy well above chance after seconds of training: data, labels, loss, optimizer and
    learning-rate schedule work together (shuffled labels or a frozen model would stay at chance).
    Over seeds 0-9 the final eval accuracy was 1.00 every time (chance: 0.50)."""
    # config.yaml's `lr: null`: the tiny random encoder's rate, larger than fine-tuning's (models.learning_rate).
    # Batches of 32 texts of 64 tokens, no dropout (the config fixture's: every test's).
    accuracies = train_for_eval_scores(max_epochs=2, train_epoch_length=30, eval_epoch_length=4)
    assert accuracies[-1] >= 0.8, f"eval accuracy per epoch {accuracies}; chance is {1 / NUM_CLASSES:.2f}"


def test_predict_gives_each_text_the_class_and_probability_its_model_gives_it(
    config: Config, run_dir: Path, tmp_path: Path
) -> None:
    """predict.py on a .txt file (a text a line) and a CSV file (its text column), in batches of 4, with the newest
    run's best model: each row holds the text, the class name (classes.json) and the probability the model gives
    the same text, padded as in training, in the same batches on the same device (a GPU rounds otherwise than the
    CPU, and may differently for another batch size). (The model is saved as a run saves it, untrained.)"""
    write_classes(run_dir, ["bad", "good"])
    tokenizer = setup_tokenizer(config)
    model = setup_model(config, vocab_size=len(tokenizer), num_classes=2).eval()
    torch.save(model.state_dict(), run_dir / "best_model_1_accuracy=0.5000.pt")
    reviews = synthetic_reviews(6, seed=1, max_words=config.max_length - 2)
    (tmp_path / "reviews.txt").write_text("".join(f"{text}\n\n" for text in reviews["text"][:3]))
    reviews.select(range(3, 6)).to_csv(tmp_path / "reviews.csv")
    texts = texts_in([str(tmp_path / "reviews.txt"), str(tmp_path / "reviews.csv")], "text")
    assert texts == reviews["text"], "the .txt file's lines (not its empty ones), then the CSV's text column"
    rows = predict(texts, newest_model(config.output_dir), batch_size=4)

    tokens = tokenizer(texts, padding="max_length", truncation=True, max_length=config.max_length, return_tensors="pt")
    device = inference_device()
    model.to(device)
    ids, mask = tokens["input_ids"].to(device), tokens["attention_mask"].to(device)
    with torch.inference_mode():
        logits = [model(ids[start : start + 4], mask[start : start + 4]) for start in range(0, len(texts), 4)]
    expected = torch.cat(logits).softmax(dim=1).cpu()
    assert [row[0] for row in rows] == texts, "one row per text, in order"
    for (text, label, score), probabilities in zip(rows, expected, strict=True):
        assert label == ["bad", "good"][int(probabilities.argmax())], f"{text}: {label}, the model says {probabilities}"
        assert score == pytest.approx(float(probabilities.max()), abs=1e-5), f"{text}: probability {score}"
