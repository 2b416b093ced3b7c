"""The real datasets' loaders: CIFAR-10, MNIST and IMDB on disk train offline, and nothing is downloaded.

Each run uses the project's own loader (torchvision's CIFAR10 and MNIST with ``download=True``; the `datasets`
loader of the Hub's stanfordnlp/imdb) on a few items written in the dataset's real on-disk format, in the place
the loader looks (the default ``data_path: ./data``), with the network unreachable and the Hugging Face Hub
offline. No download is attempted: one would fail (the project then stops, saying where the files go), and the
data folder's files are the same after the run (torchvision 0.24 prints nothing when it downloads).

The files are tiny, so their checksums are not the real ones torchvision pins for CIFAR-10: the test
registers the small files' checksums in torchvision's lists (a sitecustomize module on PYTHONPATH, run before
the README's command) and changes nothing in the project. MNIST's files are checked by name only.
"""

import hashlib
import json
import math
import os
import pickle
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import yaml
from environments import PYTHON
from projects import (
    NO_NETWORK,
    SAVE_TINY_MODEL,
    load_module,
    make_offline,
    read_log,
    readme_train_command,
    run_cmd,
    run_dirs,
)

pytestmark = pytest.mark.slow  # they train generated projects: not in the quick lane

# CIFAR-10's class names, as its batches.meta gives them (label 0 to 9).
CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
# The shortest runs: one epoch of two training iterations of small batches (and one eval iteration, for the
# classifiers: EVAL_RUN).
SHORT_RUN = {"batch_size": 8, "max_epochs": 1, "train_epoch_length": 2, "log_every_iters": 1}
EVAL_RUN = {"eval_batch_size": 8, "eval_epoch_length": 1}


def write_cifar10(data_path: Path, images: np.ndarray, labels: list[int], test_size: int) -> dict[str, str]:
    """CIFAR-10's python version, as its archive unpacks: ``cifar-10-batches-py/`` with five training batches,
    a test batch (the last ``test_size`` images) and batches.meta, each a pickled dict (protocol 2, str keys, as
    Python 2 wrote them: torchvision reads them with encoding latin1), images as rows of 3072 bytes (the red
    plane, then green, then blue). Returns each file's md5."""
    folder = data_path / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rows = images.transpose(0, 3, 1, 2).reshape(len(images), 3072)  # N x 32 x 32 x 3 (HWC) to planes
    train_size = len(rows) - test_size
    batches = {f"data_batch_{n + 1}": part for n, part in enumerate(np.array_split(np.arange(train_size), 5))}
    batches["test_batch"] = np.arange(train_size, len(rows))
    for name, indices in batches.items():
        batch = {
            "batch_label": f"{name} of {len(batches)}",
            "labels": [int(labels[index]) for index in indices],
            "data": rows[indices],
            "filenames": [f"image_{index}.png" for index in indices],
        }
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
    meta = {"num_cases_per_batch": len(batches["data_batch_1"]), "label_names": CIFAR10_CLASSES, "num_vis": 3072}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return {path.name: hashlib.md5(path.read_bytes()).hexdigest() for path in folder.iterdir()}


def write_mnist(data_path: Path, images: np.ndarray, labels: list[int], test_size: int) -> None:
    """MNIST's raw files as torchvision unpacks them into ``MNIST/raw/``: idx files, big-endian, the images
    file of magic 2051 (unsigned bytes, 3 dimensions) then N, 28, 28; the labels file of magic 2049 then N."""
    folder = data_path / "MNIST" / "raw"
    folder.mkdir(parents=True)
    splits = {"train": slice(0, len(images) - test_size), "t10k": slice(len(images) - test_size, len(images))}
    for prefix, part in splits.items():
        pixels, targets = images[part], np.array(labels[part], dtype=np.uint8)
        header = struct.pack(">IIII", 2051, len(pixels), 28, 28)
        (folder / f"{prefix}-images-idx3-ubyte").write_bytes(header + pixels.astype(np.uint8).tobytes())
        (folder / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 2049, len(targets)) + targets.tobytes())


def cifar10_checksums(tmp_path: Path, md5s: dict[str, str]) -> dict[str, str]:
    """The environment that registers these CIFAR-10 files' md5s in torchvision before a command runs, in
    place of the real files' (a sitecustomize module: Python imports it at start-up, in every process)."""
    folder = tmp_path / "checksums"
    folder.mkdir()
    train = [[f"data_batch_{n}", md5s[f"data_batch_{n}"]] for n in range(1, 6)]
    (folder / "sitecustomize.py").write_text(
        "from torchvision.datasets import CIFAR10\n\n"
        f"CIFAR10.train_list = {train!r}\n"
        f"CIFAR10.test_list = {[['test_batch', md5s['test_batch']]]!r}\n"
        f"CIFAR10.meta = {{**CIFAR10.meta, 'md5': {md5s['batches.meta']!r}}}\n"
    )
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}


def files_under(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` with its size."""
    return {str(path.relative_to(folder)): path.stat().st_size for path in folder.rglob("*") if path.is_file()}


def train_offline(project: Path, env: dict | None = None):
    """Train with the README's command, the network unreachable (a download would end the run: it must pass)."""
    argv, readme_env = readme_train_command(project)
    proc = run_cmd(argv, cwd=project, env={**readme_env, **NO_NETWORK, **(env or {})}, timeout=180)
    for stream in (proc.stdout, proc.stderr):
        assert "Downloading" not in stream, f"the run says it downloads:\n{stream[-3000:]}"
    return proc


def test_cifar10_on_disk_trains_with_workers_offline_naming_its_classes_and_downloads_nothing(bake, tmp_path) -> None:
    """``dataset: cifar10`` (the default) with CIFAR-10's files in ./data/cifar-10-batches-py: torchvision's
    CIFAR10 reads them (with ``download=True``, which only checks them) and the run trains and evaluates with 2
    DataLoader workers, the network unreachable; ./data is unchanged; the run's classes.json holds the class
    names of batches.meta. The images are the synthetic set's, whose labels a model can learn."""
    project = bake("vision-classification")
    synthetic = load_module(project / "data.py").SyntheticImages(40, seed=0, transform=np.asarray)
    images = np.stack([synthetic[index][0] for index in range(len(synthetic))])
    labels = [synthetic[index][1] for index in range(len(synthetic))]
    data_path = project / "data"
    md5s = write_cifar10(data_path, images, labels, test_size=8)
    before = files_under(data_path)
    config = make_offline(project, dataset="cifar10", num_workers=2, **SHORT_RUN, **EVAL_RUN)
    assert config["data_path"] == "./data", "the test writes CIFAR-10 where the default config looks for it"

    train_offline(project, cifar10_checksums(tmp_path, md5s))
    (run_dir,) = run_dirs(project)
    log = read_log(run_dir)
    assert log["iterations"] == [1, 2], f"two training iterations on the CIFAR-10 files:\n{log['text']}"
    assert log["evals"] and "accuracy" in log["evals"][-1], f"an evaluation on test_batch:\n{log['text']}"
    classes = json.loads((run_dir / "classes.json").read_text())
    assert classes == CIFAR10_CLASSES, f"classes.json must hold batches.meta's label_names, not {classes}"
    assert files_under(data_path) == before, "the run changed ./data: it must read CIFAR-10's files, not fetch them"


def test_mnist_and_cifar10_on_disk_train_the_gan_offline_and_download_nothing(bake, tmp_path) -> None:
    """The GAN's ``dataset: mnist`` (MNIST's raw idx files in ./data/MNIST/raw; 1 channel; 2 workers) and
    ``dataset: cifar10`` (./data/cifar-10-batches-py; 3 channels; no worker): torchvision reads each with
    ``download=True`` and the run trains on it, the network unreachable; ./data is unchanged by either run."""
    project = bake("gan")
    rng = np.random.default_rng(0)
    data_path = project / "data"
    # Bright discs on black, as MNIST's digits are light strokes on black (learning is not the claim here).
    y, x = np.mgrid[:28, :28]
    centres = rng.uniform(9, 19, size=(32, 2))
    digits = np.stack([((y - cy) ** 2 + (x - cx) ** 2 <= 36) * 255 for cy, cx in centres]).astype(np.uint8)
    write_mnist(data_path, digits, list(rng.integers(0, 10, 32)), test_size=8)
    md5s = write_cifar10(data_path, rng.integers(0, 256, (32, 32, 32, 3), dtype=np.uint8), [0, 1] * 16, test_size=8)
    before = files_under(data_path)
    env = cifar10_checksums(tmp_path, md5s)

    for run, (dataset, channels, workers) in enumerate([("mnist", 1, 2), ("cifar10", 3, 0)]):
        make_offline(project, dataset=dataset, channels=channels, num_workers=workers, **SHORT_RUN)
        train_offline(project, env)
        run_dir = run_dirs(project)[run]
        log = read_log(run_dir)
        assert log["iterations"] == [1, 2], f"{dataset}: two training iterations on its files:\n{log['text']}"
        assert all(math.isfinite(value) for value in log["losses"]), f"{dataset}: losses {log['losses']}"
        locked = yaml.safe_load((run_dir / "config-lock.yaml").read_text())
        assert locked["dataset"] == dataset, f"the run trained on {locked['dataset']}, not {dataset}"
        assert files_under(data_path) == before, f"the {dataset} run changed ./data: it must read the files there"


# The cache keeps a Hub dataset under the commit it was loaded at: this one stands for stanfordnlp/imdb's.
IMDB_COMMIT = "e6281661ce1c48d982bc483cf8a173c1bbeb5d31"
# Run in a text project (argv: a folder, IMDB_COMMIT): a tiny BERT and its tokenizer saved as a Hugging Face model
# folder (model/); and IMDB as the `datasets` loader leaves it in its cache_dir after loading stanfordnlp/imdb from
# the Hub (data/stanfordnlp___imdb/plain_text/0.0.0/<commit>/: imdb-<split>.arrow and dataset_info.json, written
# by the Parquet builder the Hub's Parquet files load with), of synthetic reviews labelled neg and pos.
WRITE_IMDB = (
    """
import shutil, sys
from pathlib import Path
from datasets import ClassLabel
from datasets.packaged_modules.parquet.parquet import Parquet
from data import synthetic_reviews

root = Path(sys.argv[1])
"""
    + SAVE_TINY_MODEL
    + """
files = {}
for seed, split in enumerate(("train", "test", "unsupervised")):
    reviews = synthetic_reviews(16, seed, max_words=20).cast_column("label", ClassLabel(names=["neg", "pos"]))
    files[split] = str(root / "parquet" / f"{split}.parquet")
    reviews.to_parquet(files[split])
commit = sys.argv[2]  # the Hub repository's commit, which names the cache's folder
builder = Parquet(
    cache_dir=str(root / "built"), dataset_name="imdb", config_name="plain_text", config_id="plain_text",
    hash=commit, data_files=files, features=reviews.features,
)
builder.download_and_prepare()
# The Hub's namespace: stanfordnlp/imdb's cache folder is stanfordnlp___imdb.
shutil.move(root / "built" / "imdb", Path("data") / "stanfordnlp___imdb")
"""
)


def test_imdb_in_the_datasets_cache_trains_offline_with_its_class_names(bake, tmp_path) -> None:
    """``dataset: imdb`` (the default) with stanfordnlp/imdb in the `datasets` cache in ./data, as a first
    online run leaves it: the project's load_dataset(..., cache_dir=data_path) finds it with the Hub offline and
    the network unreachable, and the run trains on it; the classes are its ClassLabel's (neg, pos); nothing is
    downloaded (./data gains only `datasets`' lock files and its caches of the tokenized splits)."""
    project = bake("text-classification")
    run_cmd([PYTHON, "-c", WRITE_IMDB, str(tmp_path), IMDB_COMMIT], cwd=project)
    data_path = project / "data"
    cached = f"data/stanfordnlp___imdb/plain_text/0.0.0/{IMDB_COMMIT}"  # where WRITE_IMDB put it
    before = {name: size for name, size in files_under(data_path).items() if not name.endswith(".lock")}
    settings = {"max_length": 32, **SHORT_RUN, **EVAL_RUN}
    config = make_offline(project, dataset="imdb", model=str(tmp_path / "model"), num_workers=0, **settings)
    assert config["data_path"] == "./data", "the test writes IMDB's cache where the default config looks for it"
    shutil.rmtree(tmp_path / "built")

    proc = train_offline(project)
    found = f"Found the latest cached dataset configuration 'plain_text' at {cached} "
    assert found in proc.stderr, f"`datasets` must say it read the cache in ./data:\n{proc.stderr[-3000:]}"
    (run_dir,) = run_dirs(project)
    log = read_log(run_dir)
    assert log["iterations"] == [1, 2], f"two training iterations on IMDB's cached train split:\n{log['text']}"
    assert log["evals"] and "accuracy" in log["evals"][-1], f"an evaluation on its test split:\n{log['text']}"
    classes = json.loads((run_dir / "classes.json").read_text())
    assert classes == ["neg", "pos"], f"classes.json must hold IMDB's label names, not {classes}"
    after = files_under(data_path)
    assert all(after.get(name) == size for name, size in before.items()), "the run changed IMDB's cached files"
    added = [name for name in after.keys() - before.keys() if not name.endswith(".lock")]
    assert all(Path(name).name.startswith("cache-") for name in added), f"files added to ./data: {added}"
