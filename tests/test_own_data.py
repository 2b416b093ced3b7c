"""Your own data in: image folders and VOC on disk train, and bad or missing data stops the run naming it.

The data layouts and configs the READMEs show are trained, predicted with and exported exactly as shown in
tests/test_readme_examples.py; here are what they do not show: every rule broken, VOC's own layout, failures.

Real runs of generated projects, on CPU, offline: the folders hold images of the synthetic sets' learnable
patterns, written to disk in the formats users have (JPEG, PNG, RGBA, other sizes; VOC's own layout).
"""

import json
from pathlib import Path

import pytest
import torch
import yaml
from environments import PYTHON
from PIL import Image
from projects import NO_NETWORK, SAVE_TINY_MODEL, make_offline, read_log, readme_train_command, run_cmd, run_dirs

pytestmark = pytest.mark.slow  # they train generated projects: not in the quick lane

# Run in a vision project: an ImageFolder tree of the synthetic images of three well-apart classes, in several
# formats and sizes (argv: the root, images per class in train; val gets a quarter).
WRITE_FOLDERS = """
import sys
from pathlib import Path
from data import SyntheticImages

root, per_class = Path(sys.argv[1]), int(sys.argv[2])
names = {0: "red", 3: "green", 6: "blue"}  # classes whose colours are far apart
for split, seed, count in (("train", 0, per_class), ("val", 1, max(per_class // 4, 2))):
    images = SyntheticImages(100_000, seed=seed, transform=lambda image: image)
    written = dict.fromkeys(names, 0)
    for index in range(len(images)):
        image, label = images[index]
        if label not in names or written[label] == count:
            continue
        folder = root / split / names[label]
        folder.mkdir(parents=True, exist_ok=True)
        n = written[label]
        if n % 3 == 0:
            image.resize((40, 40)).save(folder / f"{n}.jpg", quality=95)
        elif n % 3 == 1:
            image.convert("RGBA").resize((24, 24)).save(folder / f"{n}.png")
        else:
            image.save(folder / f"{n}.png")
        written[label] += 1
        if min(written.values()) == count:
            break
"""
# Settings of the folder runs: a few iterations of whole epochs over the folders.
FOLDER_RUN = {"batch_size": 12, "eval_batch_size": 12, "train_epoch_length": None, "eval_epoch_length": None}


def image_folders(project: Path, root: Path, per_class: int) -> Path:
    run_cmd([PYTHON, "-c", WRITE_FOLDERS, str(root), str(per_class)], cwd=project)
    return root


def train(project: Path, returncode: int = 0):
    """Train with the README's command, the network unreachable."""
    argv, readme_env = readme_train_command(project)
    return run_cmd(argv, cwd=project, env={**readme_env, **NO_NETWORK}, timeout=180, returncode=returncode)


def test_bad_image_folders_are_refused_before_training_naming_the_folder(bake, tmp_path) -> None:
    """Each layout rule the README states, broken one at a time, gives an error that names the folder."""
    project = bake("vision-classification")
    good = image_folders(project, tmp_path / "good", per_class=4)
    cases = {
        "no val": "rm -r {root}/val",
        "a class folder with no image": "rm {root}/train/green/*",
        "other classes in val": "mv {root}/val/blue {root}/val/cyan",
        "one class": "rm -r {root}/train/green {root}/train/blue {root}/val/green {root}/val/blue",
    }
    roots = {}
    for name, command in cases.items():
        roots[name] = tmp_path / name.replace(" ", "_")
        run_cmd(["bash", "-c", f"cp -r {good} {roots[name]} && " + command.format(root=roots[name])], cwd=tmp_path)
    script = (
        "import json, sys\nfrom data import get_datasets\nerrors = {}\n"
        "for name, root in json.loads(sys.argv[1]).items():\n"
        "    try:\n        get_datasets('folder', root)\n        errors[name] = None\n"
        "    except (ValueError, FileNotFoundError) as error:\n        errors[name] = str(error)\n"
        "print(json.dumps(errors))"
    )
    proc = run_cmd([PYTHON, "-c", script, json.dumps({k: str(v) for k, v in roots.items()})], cwd=project)
    errors = json.loads(proc.stdout.splitlines()[-1])
    expected = {
        "no val": [f"{roots['no val']}/val is not a folder", "<data_path>/val/<class>/*"],
        "a class folder with no image": [f"{roots['a class folder with no image']}/train", "green"],
        "other classes in val": ["must hold the same class folders", "'cyan'", "'blue'"],
        "one class": [f"{roots['one class']}/train", "two at least", "['red']"],
    }
    for name, parts in expected.items():
        assert errors[name] is not None, f"{name}: get_datasets('folder') accepted it"
        missing = [part for part in parts if part not in errors[name]]
        assert not missing, f"{name}: the error lacks {missing}: {errors[name]}"


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_unreadable_image_ends_the_run_naming_it_and_once_fixed_the_run_continues(
    bake, tmp_path, num_workers: int
) -> None:
    """A truncated JPEG in the eval set, met after a checkpoint (iteration 1): the run ends (with DataLoader
    workers too, which used to hang it for ever), the error names the file in the console, training.log and
    status.yaml; with the file replaced, the same command continues from the checkpoint and finishes."""
    project = bake("vision-classification")
    root = image_folders(project, tmp_path / "images", per_class=8)
    make_offline(
        project, dataset="folder", data_path=str(root), num_workers=num_workers, save_every_iters=1, **FOLDER_RUN
    )
    bad = root / "val" / "red" / "0.jpg"
    whole = bad.read_bytes()
    bad.write_bytes(whole[: len(whole) // 2])
    proc = train(project, returncode=1)
    assert f"cannot read the image {bad}" in proc.stderr, proc.stderr[-3000:]
    (run_dir,) = run_dirs(project)
    status = yaml.safe_load((run_dir / "status.yaml").read_text())
    assert status["status"] == "failed" and str(bad) in status["reason"], status
    log = (run_dir / "training.log").read_text()
    assert f"The run failed: ValueError: cannot read the image {bad}" in log, log[-3000:]
    # An epoch's last checkpoint follows its evaluation: the one of iteration 1 (of 2) is the newest.
    assert (run_dir / "training_checkpoint_1.pt").is_file(), "the first iteration's checkpoint was saved"

    bad.write_bytes(whole)
    train(project)
    assert run_dirs(project) == [run_dir], "the same command must continue the failed run, not start another"
    log = (run_dir / "training.log").read_text()
    assert "Continuing the run" in log and "training_checkpoint_1.pt" in log, log[-3000:]
    assert yaml.safe_load((run_dir / "status.yaml").read_text())["status"] == "finished"


# Run in a vision project: SqueezeNet 1.1's ImageNet weights file where torchvision caches it (argv: the path),
# holding random weights (the real ones are a download).
CACHE_WEIGHTS = """
import sys
from pathlib import Path
import torch
from torchvision import models

Path(sys.argv[1]).parent.mkdir(parents=True)
torch.save(models.squeezenet1_1().state_dict(), sys.argv[1])
"""
# Run in a vision project: setup_model's errors for weights the model has none of, then for weights neither in
# torch's cache nor downloadable, as JSON.
BAD_WEIGHTS = """
import json
from models import setup_model

errors = []
for weights in ("IMAGENET1K_V9", "DEFAULT"):
    try:
        setup_model("squeezenet1_1", 3, weights)
    except (ValueError, RuntimeError) as error:
        errors.append(str(error))
print(json.dumps(errors))
"""


def test_pretrained_weights_come_from_torchs_cache_with_a_new_head_and_bad_ones_say_what_to_do(bake, tmp_path) -> None:
    """``weights: DEFAULT``: the run starts from the model's pretrained weights, read from torch's cache (offline,
    the file there), with a new last layer of one output per class; a weights name the model lacks is refused
    naming the ones it has, and weights neither cached nor downloadable name the file to put where."""
    project = bake("vision-classification")
    cached = tmp_path / "torch" / "hub" / "checkpoints" / "squeezenet1_1-b8a52dc0.pth"
    run_cmd([PYTHON, "-c", CACHE_WEIGHTS, str(cached)], cwd=project)
    make_offline(project, model="squeezenet1_1", weights="DEFAULT", image_size=64, lr=1e-4, max_epochs=1)
    argv, readme_env = readme_train_command(project)
    run_cmd(argv, cwd=project, env={**readme_env, **NO_NETWORK, "TORCH_HOME": str(tmp_path / "torch")}, timeout=180)
    (run_dir,) = run_dirs(project)
    trained = torch.load(sorted(run_dir.glob("training_checkpoint_*.pt"))[-1], weights_only=True)["model"]
    pretrained = torch.load(cached, weights_only=True)
    moved = float((trained["features.0.weight"] - pretrained["features.0.weight"]).abs().max())
    assert moved < 0.01, f"the first layer is {moved} from the cached weights: the run did not start from them"
    assert trained["classifier.1.weight"].shape[0] == 10, "a new last layer, one output per class (10, not 1000)"

    empty_cache = {**NO_NETWORK, "TORCH_HOME": str(tmp_path / "empty")}
    proc = run_cmd([PYTHON, "-c", BAD_WEIGHTS], cwd=project, env=empty_cache)
    errors = json.loads(proc.stdout.splitlines()[-1])  # after torch.hub's "Downloading: ..."
    assert len(errors) == 2, f"each bad weights must stop setup_model with its error: {errors}"
    unknown, offline = errors
    assert "weights='IMAGENET1K_V9' is not one of squeezenet1_1's" in unknown and "IMAGENET1K_V1" in unknown, unknown
    expected = f"Put that file at {tmp_path / 'empty' / 'hub' / 'checkpoints' / cached.name}"
    assert expected in offline and "set `weights: null`" in offline, offline


def test_a_missing_dataset_with_no_network_says_where_its_files_go(bake) -> None:
    """CIFAR-10 not in data_path and no network: the error names the folder the files go in and the offline
    dataset, instead of a traceback from deep in torchvision; the run is recorded as failed."""
    project = bake("vision-classification")
    make_offline(project, dataset="cifar10", num_workers=0)
    proc = train(project, returncode=1)
    expected = "dataset='cifar10': its files are not in data/cifar-10-batches-py"
    assert expected in proc.stderr and "set `dataset: synthetic` to train offline" in proc.stderr, proc.stderr[-3000:]
    (run_dir,) = run_dirs(project)
    assert f"The run failed: RuntimeError: {expected}" in (run_dir / "training.log").read_text()
    assert yaml.safe_load((run_dir / "status.yaml").read_text())["status"] == "failed"


def test_the_gans_image_folder_is_checked_by_the_same_rules(bake, tmp_path) -> None:
    """The GAN's ``dataset: folder`` (the images in data_path's sub-folders): a missing folder, a sub-folder
    with no image and an image that cannot be read are named, as the classifier's are."""
    project = bake("gan")
    root = tmp_path / "images"
    for folder in ("train/green", "train/red", "val/blue"):
        (root / folder).mkdir(parents=True)
    Image.new("RGB", (20, 20), (200, 30, 30)).save(root / "train" / "red" / "0.png")
    (root / "train" / "green" / "0.jpg").write_bytes(b"not a JPEG")
    script = (
        "import json, sys\nfrom data import get_dataset\nerrors = []\n"
        "for root in sys.argv[1:]:\n"
        "    try:\n        dataset = get_dataset('folder', root, 16, 3)\n"
        "        [dataset[index] for index in range(len(dataset))]\n        errors.append(None)\n"
        "    except (ValueError, FileNotFoundError) as error:\n        errors.append(str(error))\n"
        "print(json.dumps(errors))"
    )
    folders = [root / "nowhere", root / "val", root / "train"]
    proc = run_cmd([PYTHON, "-c", script, *map(str, folders)], cwd=project)
    missing, empty, unreadable = json.loads(proc.stdout.splitlines()[-1])
    assert missing and f"{root / 'nowhere'} is not a folder" in missing, missing
    assert empty and str(root / "val") in empty and "blue" in empty, empty
    assert unreadable and f"cannot read the image {root / 'train' / 'green' / '0.jpg'}" in unreadable, unreadable


# Run in a segmentation project: a VOC 2012 tree as torchvision reads it (JPEG images, palette PNG masks,
# the split lists), of synthetic scenes of 48 x 40 pixels (argv: data_path, train and val scenes).
WRITE_VOC = """
import sys
from pathlib import Path
from data import SyntheticScenes

voc = Path(sys.argv[1]) / "VOCdevkit" / "VOC2012"
splits = {"train": (0, int(sys.argv[2])), "val": (1, int(sys.argv[3]))}
for folder in ("JPEGImages", "SegmentationClass", "ImageSets/Segmentation"):
    (voc / folder).mkdir(parents=True)
palette = [value for index in range(256) for value in (index * 40 % 256, index * 90 % 256, index * 150 % 256)]
for split, (seed, count) in splits.items():
    names = [f"{split}_{index}" for index in range(count)]
    for name, index in zip(names, range(count)):
        image, mask = SyntheticScenes(count, seed, image_size=48)[index]
        image.crop((0, 0, 48, 40)).save(voc / "JPEGImages" / f"{name}.jpg", quality=95)
        mask = mask.crop((0, 0, 48, 40)).convert("P")
        mask.putpalette(palette)
        mask.save(voc / "SegmentationClass" / f"{name}.png")
    (voc / "ImageSets" / "Segmentation" / f"{split}.txt").write_text("".join(f"{name}\\n" for name in names))
"""
# Run in a segmentation project: each wrong mask (argv: data_path) and a VOC that is not there and cannot be
# downloaded, read through get_datasets: prints each case's error.
BAD_MASKS = """
import json, sys
from pathlib import Path
from PIL import Image
from data import get_datasets

data_path = sys.argv[1]
masks = Path(data_path) / "VOCdevkit" / "VOC2012" / "SegmentationClass"


def with_label_128(mask):
    mask.putpixel((0, 0), 128)
    return mask


cases = {
    "another size": lambda mask: mask.resize((24, 20)),
    "RGB colours": lambda mask: mask.convert("RGB"),
    "a label no class has": with_label_128,
}
errors = {}
for case, change in cases.items():
    path = masks / "val_0.png"
    whole = path.read_bytes()
    change(Image.open(path)).save(path)
    try:
        get_datasets("voc", data_path, 32)[1][0]
        errors[case] = None
    except ValueError as error:
        errors[case] = str(error)
    path.write_bytes(whole)
try:
    get_datasets("voc", str(Path(data_path) / "elsewhere"), 32)
except RuntimeError as error:
    errors["not there"] = str(error)
print(json.dumps(errors))
"""


def test_voc_on_disk_trains_with_no_download_and_a_wrong_mask_is_named(bake, tmp_path) -> None:
    """VOC 2012 in data_path, in its on-disk format: the run trains with the network unreachable (torchvision
    alone would download the 2 GB archive at every run); a mask of another size than its image, in RGB
    colours, or with a label no class has is refused naming the file; no VOC and no network says where it goes."""
    project = bake("vision-segmentation")
    data_path = tmp_path / "voc"
    run_cmd([PYTHON, "-c", WRITE_VOC, str(data_path), "4", "2"], cwd=project)
    make_offline(
        project, dataset="voc", data_path=str(data_path), model="lraspp_mobilenet_v3_large", batch_size=2,
        eval_batch_size=2, max_epochs=1, train_epoch_length=None, eval_epoch_length=None,
    )  # fmt: skip
    train(project)
    (run_dir,) = run_dirs(project)
    log = read_log(run_dir)
    assert log["iterations"][-1] == 2 and "mIoU" in log["evals"][-1], f"one epoch of the 4 scenes:\n{log['text']}"
    assert sorted(path.name for path in data_path.iterdir()) == ["VOCdevkit"], "nothing was downloaded"

    proc = run_cmd([PYTHON, "-c", BAD_MASKS, str(data_path)], cwd=project, env=NO_NETWORK)
    errors = json.loads(proc.stdout.splitlines()[-1])
    mask = data_path / "VOCdevkit" / "VOC2012" / "SegmentationClass" / "val_0.png"
    expected = {
        "another size": [str(mask), "the mask is 24x20 pixels, its image 48x40"],
        "RGB colours": [str(mask), "a palette or greyscale PNG", "not RGB"],
        "a label no class has": [str(mask), "128", "a class index below 21, or 255"],
        "not there": [f"{data_path}/elsewhere/VOCdevkit/VOC2012", "set `dataset: synthetic` to train offline"],
    }
    for case, parts in expected.items():
        assert errors.get(case), f"{case}: accepted, with no error"
        missing = [part for part in parts if part not in errors[case]]
        assert not missing, f"{case}: the error lacks {missing}: {errors[case]}"


# Run in a text project (argv: a folder): a tiny BERT and its tokenizer saved as a Hugging Face model folder
# (model/), read with from_pretrained as a Hub model is; three classes of reviews as your files (a JSON Lines
# train split, a CSV test split, with columns of other names than the defaults); and the synthetic reviews as
# a dataset folder of Parquet files whose label column is a ClassLabel of its own names (hub/).
WRITE_TEXTS = (
    """
import csv, json, random, sys
from pathlib import Path
from datasets import ClassLabel
from data import FILLER, SENTIMENT, synthetic_reviews

root = Path(sys.argv[1])
"""
    + SAVE_TINY_MODEL
    + """
rng = random.Random(0)
for split, size in (("train", 240), ("test", 60)):
    rows = []
    for _ in range(size):
        label = rng.choice(["negative", "neutral", "positive"])
        words = rng.choices(FILLER, k=12)
        if label != "neutral":
            words += rng.choices(SENTIMENT[label == "positive"], k=3)
        rng.shuffle(words)
        rows.append({"review": " ".join(words), "sentiment": label})
    if split == "train":
        (root / "files" / "train.jsonl").parent.mkdir(parents=True)
        (root / "files" / "train.jsonl").write_text("".join(json.dumps(row) + "\\n" for row in rows))
    else:
        with open(root / "files" / "test.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, ["review", "sentiment"])
            writer.writeheader()
            writer.writerows(rows)
for split, seed in (("train", 0), ("test", 1)):
    reviews = synthetic_reviews(16, seed, max_words=20).cast_column("label", ClassLabel(names=["bad", "good"]))
    reviews.to_parquet(root / "hub" / f"{split}.parquet")
"""
)


# Run in a text project: each bad dataset (argv: the folder WRITE_TEXTS wrote), read through get_datasets; prints
# each case's error, and the classes of the Parquet dataset folder read by name.
BAD_TEXTS = """
import json, shutil, sys
from pathlib import Path
from config import Config
from data import get_datasets, setup_tokenizer

root = Path(sys.argv[1])
files = root / "files"
config = Config(dataset="files", data_path=str(files), text_column="review", label_column="sentiment", max_length=32)
tokenizer = setup_tokenizer(config.model_copy(update={"model": str(root / "model")}))
test_csv = (files / "test.csv").read_text()
cases = {
    "no test file": lambda: (files / "test.csv").unlink(),
    "two test files": lambda: (files / "test.parquet").write_bytes(b"not Parquet"),
    "an unreadable file": lambda: ((files / "test.csv").unlink(), (files / "test.parquet").write_bytes(b"not Parquet")),
    "no label column": lambda: (files / "test.csv").write_text(test_csv.replace("sentiment", "mood")),
    "a label no class has": lambda: (files / "test.csv").write_text(test_csv.replace(",neutral", ",meh", 1)),
    "a row with no text": lambda: (files / "test.csv").write_text(test_csv.replace("\\n", "\\n,neutral\\n", 1)),
}
errors = {}
for case, change in cases.items():
    change()
    try:
        get_datasets(config, tokenizer)
        errors[case] = None
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        errors[case] = str(error)
    for path in files.glob("test.*"):
        path.unlink()
    (files / "test.csv").write_text(test_csv)
hub = config.model_copy(
    update={"dataset": str(root / "hub"), "text_column": "text", "label_column": "label", "data_path": str(root / "c")}
)
errors["classes of a dataset by name"] = get_datasets(hub, tokenizer)[2]
hub_cases = {"a split it has not": {"eval_split": "validation"}, "not on the Hub": {"dataset": "no/such"}}
for case, settings in hub_cases.items():
    try:
        get_datasets(hub.model_copy(update=settings), tokenizer)
        errors[case] = None
    except (ValueError, RuntimeError) as error:
        errors[case] = str(error)
print(json.dumps(errors))
"""


def test_bad_text_data_is_refused_before_training_naming_the_file_and_row(bake, tmp_path) -> None:
    """Each rule of the README's "Train on your data", broken one at a time, gives an error that names the file
    (or split) and the row; a dataset by name whose labels have names (a ClassLabel) gives those as the classes."""
    project = bake("text-classification")
    # One process writes the data, then reads each bad case (two would import torch and transformers twice).
    proc = run_cmd([PYTHON, "-c", WRITE_TEXTS + BAD_TEXTS, str(tmp_path)], cwd=project, env=NO_NETWORK)
    errors = json.loads(proc.stdout.splitlines()[-1])
    files = tmp_path / "files"
    assert errors.pop("classes of a dataset by name") == ["bad", "good"], "a ClassLabel's names are the classes"
    expected = {
        "no test file": [str(files), "test.csv, test.jsonl, test.json, test.parquet (none)"],
        "two test files": [str(files), "2 of them: ['test.csv', 'test.parquet']"],
        "an unreadable file": [f"cannot read {files / 'test.parquet'} as parquet"],
        "no label column": [str(files / "test.csv"), "no column 'sentiment' (label_column)", "'mood'"],
        "a label no class has": [str(files / "test.csv"), "label 'meh' is not one of the classes"],
        "a row with no text": [str(files / "test.csv"), "row 1: 'review' holds None, not a text"],
        "a split it has not": ["eval_split='validation'", "its splits are ['train', 'test']"],
        "not on the Hub": ["dataset='no/such' could not be loaded", "set `dataset: synthetic` to train offline"],
    }
    for case, parts in expected.items():
        assert errors.get(case), f"{case}: accepted, with no error"
        missing = [part for part in parts if part not in errors[case]]
        assert not missing, f"{case}: the error lacks {missing}: {errors[case]}"


# Run anywhere (argv: data_path, train and val scenes): a segmentation folder of 3 classes, label 0 the grey
# ground, 1 a red and 2 a blue rectangle, 255 their outlines (as VOC's borders); JPEG images of 32 x 32 and
# 28 x 24 pixels (both whole in a crop of 32), masks as greyscale PNGs and, every third, palette PNGs.
WRITE_SEGMENTATION_FOLDER = """
import random, sys
from pathlib import Path
from PIL import Image, ImageDraw

root, colours = Path(sys.argv[1]), {1: (220, 40, 40), 2: (40, 60, 220)}
palette = [value for index in range(256) for value in (index * 40 % 256, index * 90 % 256, index * 150 % 256)]
for split, seed, count in (("train", 0, int(sys.argv[2])), ("val", 1, int(sys.argv[3]))):
    rng = random.Random(seed)
    for kind in ("images", "masks"):
        (root / split / kind).mkdir(parents=True)
    for index in range(count):
        size = (32, 32) if index % 2 == 0 else (28, 24)
        image, mask = Image.new("RGB", size, (128, 128, 128)), Image.new("L", size, 0)
        for label, colour in colours.items():
            width, height = rng.randint(12, 20), rng.randint(12, 20)
            left, top = rng.randint(0, size[0] - width), rng.randint(0, size[1] - height)
            box = (left, top, left + width - 1, top + height - 1)
            ImageDraw.Draw(image).rectangle(box, fill=colour)
            ImageDraw.Draw(mask).rectangle(box, fill=label, outline=255)
        image.save(root / split / "images" / f"{split}_{index}.jpg", quality=95)
        if index % 3 == 0:
            mask = mask.convert("P")
            mask.putpalette(palette)
        mask.save(root / split / "masks" / f"{split}_{index}.png")
"""


# Run in a segmentation project (argv: a folder of cases, each a data_path): get_datasets on each, and a mask
# of each case read; prints each case's error (or the classes it found) as JSON.
BAD_SEGMENTATION_FOLDERS = """
import json, sys
from pathlib import Path
from data import get_datasets

errors = {}
for root in sorted(Path(sys.argv[1]).iterdir()):
    classes = ["ground", "red"] if root.name == "two_classes_given" else None
    try:
        train, evaluation, found = get_datasets("folder", str(root), 32, classes)
        evaluation[0]
        errors[root.name] = found
    except (ValueError, FileNotFoundError) as error:
        errors[root.name] = str(error)
print(json.dumps(errors))
"""


def test_bad_segmentation_folders_are_refused_naming_the_folder_or_file(bake, tmp_path) -> None:
    """Each rule of the README's "Train on your data", broken one at a time: a missing folder, an image with no
    mask, a mask with no image or no image are refused before training naming them; a mask of another size, in
    RGB, or with a label no class has is refused when read, naming it. With no ``classes``, the classes are
    named up to the train masks' top label; a label above the given ``classes`` is refused."""
    project = bake("vision-segmentation")
    good = tmp_path / "good"
    run_cmd([PYTHON, "-c", WRITE_SEGMENTATION_FOLDER, str(good), "3", "2"], cwd=project)
    val_mask = "{root}/val/masks/val_0.png"
    resave = f"from PIL import Image; m = Image.open('{val_mask}'); "
    cases = {
        "classes_from_masks": "true",
        "no_val_masks": "rm -r {root}/val/masks",
        "an_image_with_no_mask": "rm {root}/train/masks/train_1.png",
        "a_mask_with_no_image": "rm {root}/val/images/val_1.jpg",
        "no_image": "rm {root}/train/images/* {root}/train/masks/*",
        "another_size": f'python -c "{resave}m.resize((20, 20)).save(m.filename)"',
        "rgb": f"python -c \"{resave}m.convert('RGB').save(m.filename)\"",
        "two_classes_given": "true",  # the masks hold label 2
    }
    (tmp_path / "cases").mkdir()
    for name, command in cases.items():
        root = tmp_path / "cases" / name
        command = command.format(root=root).replace("python ", f"{PYTHON} ")
        run_cmd(["bash", "-c", f"cp -r {good} {root} && {command}"], cwd=tmp_path)
    proc = run_cmd([PYTHON, "-c", BAD_SEGMENTATION_FOLDERS, str(tmp_path / "cases")], cwd=project)
    errors = json.loads(proc.stdout.splitlines()[-1])
    assert errors.pop("classes_from_masks") == ["class_0", "class_1", "class_2"], "class_<label> to the top label"
    cases = tmp_path / "cases"
    expected = {
        "no_val_masks": [f"{cases}/no_val_masks/val/masks is not a folder", "<data_path>/{train,val}/images"],
        "an_image_with_no_mask": ["1 image(s) with no mask", f"{cases}/an_image_with_no_mask/train/images/train_1.jpg"],
        "a_mask_with_no_image": ["1 mask(s) with no image", f"{cases}/a_mask_with_no_image/val/masks/val_1.png"],
        "no_image": [f"{cases}/no_image/train/images holds no image file"],
        "another_size": [f"{cases}/another_size/val/masks/val_0.png", "the mask is 20x20 pixels, its image 32x32"],
        "rgb": [f"{cases}/rgb/val/masks/val_0.png", "a palette or greyscale PNG", "not RGB"],
        "two_classes_given": [f"{cases}/two_classes_given/val/masks/val_0.png", "a class index below 2, or 255"],
    }
    for case, parts in expected.items():
        assert isinstance(errors.get(case), str), f"{case}: accepted, with no error ({errors.get(case)})"
        missing = [part for part in parts if part not in errors[case]]
        assert not missing, f"{case}: the error lacks {missing}: {errors[case]}"
