"""The README examples are the tests: every block a README shows (a command, a config, a data layout) is run by
a test exactly as shown, with only the sizes made small, and read from the README itself (tests/readme_examples.py
holds the map of which test runs which block).
"""

import ast
import csv
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from answers import REPO, TEMPLATES, pairwise, template_options, valid
from environments import PYTHON, TRACKERS_PYTHON, XLA_PYTHON
from PIL import Image
from projects import NO_NETWORK, SAVE_TINY_MODEL, make_offline, read_log, readme_train_command, run_cmd, run_dirs
from readme_examples import EXAMPLES, Block, Example, blocks, commands, example, layout, settings
from rendering import render
from test_project_tooling import fresh_venv, offline_env

# --- The map: every block of every README names the test that runs it.


def readme_grid(template: str) -> list[str]:
    """The template's README for every answer set of its pairwise grid (every answer's value at least once)."""
    return [render(template, valid(combo), "README.md")[0] for combo in pairwise(template_options(template))]


def covering(block: Block) -> list[Example]:
    """The entries of EXAMPLES that take ``block``, the first of them the one that does."""
    return [
        entry
        for entry in EXAMPLES
        if entry.heading == block.heading and entry.lang == block.lang and re.search(entry.pattern, block.text)
    ]


def test_every_readme_example_names_the_test_that_runs_it() -> None:
    """Every fenced block of every generated README (each template, each answer at least once) and of the
    repository's README is covered by an entry of EXAMPLES, and each entry names a test that exists (or why no
    test can run it here); an entry that covers no block is stale."""
    readmes = [("README.md", (REPO / "README.md").read_text())]
    readmes += [(template, readme) for template in TEMPLATES for readme in readme_grid(template)]
    uncovered, used = set(), set()
    for name, readme in readmes:
        for block in blocks(readme):
            entries = covering(block)
            if not entries:
                uncovered.add(f"{name}: {block.heading} ({block.lang}): {block.text.splitlines()[0]!r}")
            used.update(id(entry) for entry in entries[:1])
    assert not uncovered, "README blocks no test runs (add each to EXAMPLES with its test):\n" + "\n".join(
        sorted(uncovered)
    )
    stale = [entry for entry in EXAMPLES if id(entry) not in used]
    assert not stale, f"EXAMPLES entries that no README block takes: {stale}"
    missing = []
    for entry in EXAMPLES:
        assert entry.runs or entry.not_run, f"{entry}: name the tests that run it, or why none can"
        for runs in entry.runs:
            path, _, test = runs.partition("::")
            tree = ast.parse((REPO / path).read_text())
            if test not in {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}:
                missing.append(runs)
    assert not missing, f"EXAMPLES names tests that do not exist: {missing}"


# --- "Train on your data" and "Use the model", for each template: the layout's files and folders written under
# the names shown, the config block set in config.yaml as shown, the README's train, predict and export commands
# run as written. Only sizes shrink (SMALLER), and the model of a text project is a tiny local one (no download).

# Run in a text project (argv: the project, then the layout as JSON): the files of the README's layout, each with
# the rows it shows, then reviews in the same columns of the classes shown (the i-th class, sorted, gets the
# synthetic reviews' sentiment words of label i: two classes to learn).
WRITE_TEXT_FILES = """
import csv, io, json, random, sys
from pathlib import Path
from data import FILLER, SENTIMENT

project, shown = Path(sys.argv[1]), json.loads(sys.argv[2])
files = {}
for path, lines in shown.items():
    given = "\\n".join(line for line in lines if line != "...")
    if path.endswith(".csv"):
        files[path] = list(csv.DictReader(io.StringIO(given)))
    elif not path.endswith("/"):
        files[path] = [json.loads(line) for line in given.splitlines()]
text, label = list(next(iter(files.values()))[0])
classes = sorted({row[label] for rows in files.values() for row in rows})
assert len(classes) == 2, classes
rng = random.Random(0)
for path, rows in files.items():
    for index in range(160 if "train" in path else 32):
        words = rng.choices(FILLER, k=8) + rng.choices(SENTIMENT[index % 2], k=3)
        rng.shuffle(words)
        rows.append({text: " ".join(words), label: classes[index % 2]})
    file = project / path
    file.parent.mkdir(parents=True, exist_ok=True)
    if file.suffix == ".csv":
        with open(file, "w", newline="") as f:
            writer = csv.DictWriter(f, [text, label])
            writer.writeheader()
            writer.writerows(rows)
    else:
        file.write_text("".join(json.dumps(row) + "\\n" for row in rows))
print(json.dumps(classes))
"""

# Run in a vision project (argv: the project, the layout as JSON): each class folder of the layout holds images of
# one synthetic class (classes far apart in colour), named as the layout shows (0001.jpg, 0002.png, ...), of 24 to
# 40 pixels, RGB, RGBA and greyscale.
WRITE_IMAGE_FOLDERS = """
import json, sys
from pathlib import Path
from data import SyntheticImages

project, shown = Path(sys.argv[1]), json.loads(sys.argv[2])
named = [words for words in shown.values() if len(words) > 1]
extensions = [Path(name).suffix for name in named[0] if name != "..."]
classes = sorted({Path(path).name for path in shown if path.count("/") == 3})
labels = {name: 5 * index for index, name in enumerate(classes)}  # colours half the hue circle apart
for path in (path for path in shown if path.count("/") == 3):
    split, name = Path(path).parent.name, Path(path).name
    images = SyntheticImages(100_000, seed=split == "val", transform=lambda image: image)
    wanted, found = (24 if split == "train" else 6), 0
    for index in range(len(images)):
        image, label = images[index]
        if label != labels[name]:
            continue
        found += 1
        extension = extensions[found % len(extensions)]
        if found % 3 == 1:
            image = image.resize((40, 40))  # other sizes and modes, as a user's folders hold
        elif found % 3 == 2:
            image = image.convert("RGBA").resize((24, 24)) if extension == ".png" else image.convert("L")
        image.save(project / path / f"{found:04d}{extension}")
        if found == wanted:
            break
print(json.dumps(classes))
"""
# Run in a segmentation project (argv: the project, the layout as JSON, the number of classes): scenes of a grey
# ground (label 0) and a rectangle of each other class in its colour (255 its outline), images named as the
# layout shows (0001.jpg, 0002.png, ...) and a PNG mask of the same name beside each.
WRITE_SEGMENTATION_FOLDERS = """
import json, random, sys
from pathlib import Path
from PIL import Image, ImageDraw

project, shown, count = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
extensions = [Path(name).suffix for name in shown["data/train/images/"] if name != "..."]
colours = {label: (60 * label % 256, 200 - 50 * label % 200, 40 * label % 256) for label in range(1, count)}
for split, scenes in (("train", 16), ("val", 4)):
    rng = random.Random(split)
    for index in range(1, scenes + 1):
        image, mask = Image.new("RGB", (32, 28), (128, 128, 128)), Image.new("L", (32, 28), 0)
        for label, colour in colours.items():
            left, top = rng.randint(0, 16), rng.randint(0, 12)
            box = (left, top, left + 14, top + 14)
            ImageDraw.Draw(image).rectangle(box, fill=colour)
            ImageDraw.Draw(mask).rectangle(box, fill=label, outline=255)
        image.save(project / "data" / split / "images" / f"{index:04d}{extensions[index % len(extensions)]}")
        mask.save(project / "data" / split / "masks" / f"{index:04d}.png")
"""
# Run in a GAN project (argv: the project, the image paths the config's comment shows): the GAN's synthetic
# images, named as shown (data/faces/0001.jpg, data/faces/0002.png, ...).
WRITE_GAN_FOLDER = """
import sys
from pathlib import Path
from data import SyntheticImages

project, shown = Path(sys.argv[1]), [Path(path) for path in sys.argv[2:]]
images = SyntheticImages(32, transform=lambda image: image)
for index in range(1, len(images) + 1):
    path = project / shown[0].parent / f"{index:04d}{shown[index % len(shown)].suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    images[index - 1][0].save(path)
"""
# The classifiers learn the README's data in these short runs (chance is 0.5): their eval accuracy.
LEARNS = {"vision-classification": "accuracy", "text-classification": "accuracy"}
# Only the sizes of the README's config blocks shrink: segmentation's crop (256 pixels).
SMALLER = {"vision-segmentation": {"crop_size": 32}}
# The rest of a short run of each template (sizes and epochs, the README's num_workers kept).
SHORT_RUN = {
    "vision-classification": {"batch_size": 12, "eval_batch_size": 12, "max_epochs": 2},
    "text-classification": {
        "max_length": 32, "lr": 0.003, "dropout": 0.0, "batch_size": 16, "eval_batch_size": 32, "max_epochs": 2,
    },
    "gan": {"batch_size": 8, "max_epochs": 1},
    "vision-segmentation": {
        "model": "lraspp_mobilenet_v3_large", "batch_size": 8, "eval_batch_size": 4, "max_epochs": 2, "lr": 0.05,
    },
}  # fmt: skip


def shell_words(command: str, project: Path) -> list[str]:
    """A README command line as argv, its ``python`` this venv's."""
    argv = shlex.split(command)
    assert argv[0] == "python", f"a README command of python: {command}"
    return [PYTHON, *argv[1:]]


# Run in a text project once ``root`` is set: the tiny model folder of SAVE_TINY_MODEL, its weights drawn from a seed
# (unseeded, a run's learning would depend on its draw: 0.5 to 0.97 accuracy seen in this test's short run).
SAVE_SEEDED_TINY_MODEL = "import torch\ntorch.manual_seed(0)\n" + SAVE_TINY_MODEL


def write_readme_data(template: str, project: Path, readme: str, tmp_path: Path) -> list[str] | None:
    """Write the data the README's "Train on your data" shows, under the names it shows; the classes, if any."""
    if template == "gan":
        line = next(line for line in example(readme, "## Train on your data", "yaml").text.splitlines() if "#" in line)
        comment = line.split("#", 1)[1]  # data_path's: the image files it shows
        shown = [word.strip(",") for word in comment.split() if "/" in word and "." in word]
        run_cmd([PYTHON, "-c", WRITE_GAN_FOLDER, str(project), *shown], cwd=project)
        return None
    shown = layout(example(readme, "## Train on your data", "text"))
    for path in shown:
        if path.endswith("/"):
            (project / path).mkdir(parents=True, exist_ok=True)
    if template == "text-classification":
        run_cmd(
            [PYTHON, "-c", f"from pathlib import Path\nroot = Path({str(tmp_path)!r})\n{SAVE_SEEDED_TINY_MODEL}"],
            cwd=project,
        )
        script = WRITE_TEXT_FILES
    elif template == "vision-classification":
        script = WRITE_IMAGE_FOLDERS
    else:
        classes = settings(example(readme, "## Train on your data", "yaml"))["classes"]
        run_cmd(
            [PYTHON, "-c", WRITE_SEGMENTATION_FOLDERS, str(project), json.dumps(shown), str(len(classes))], cwd=project
        )
        return classes
    return json.loads(run_cmd([PYTHON, "-c", script, str(project), json.dumps(shown)], cwd=project).stdout)


def confusion(predicted: Path, true: Path, count: int) -> torch.Tensor:
    """The confusion matrix (true class, predicted class) of a predicted mask PNG, 255 pixels left out."""
    with Image.open(predicted) as p, Image.open(true) as t:
        assert p.size == t.size, f"{predicted}: {p.size}, its image {t.size}"
        guess, truth = (torch.frombuffer(bytearray(mask.tobytes()), dtype=torch.uint8).long() for mask in (p, t))
    assert int(guess.max()) < count, f"{predicted}: labels {guess.unique().tolist()}, the model has {count} classes"
    scored = truth != 255
    return torch.bincount(count * truth[scored] + guess[scored], minlength=count**2).view(count, count)


def predict_inputs(template: str, project: Path, argv: list[str]) -> None:
    """The inputs the README's predict command names, made of the eval data: ``path/to/image.jpg`` and
    ``path/to/folder`` (the val images), or ``reviews.txt`` and ``more_reviews.csv`` (the test texts)."""
    if template == "text-classification":
        (test,) = (project / "data").glob("test.*")
        rows = [json.loads(line) for line in test.read_text().splitlines()] if test.suffix == ".jsonl" else None
        assert rows, f"the README's layout has a JSON Lines test split: {test}"
        text, label = list(rows[0])
        named = [arg for arg in argv if arg.endswith((".txt", ".csv")) and arg != "predictions.csv"]
        (project / named[0]).write_text(rows[0][text] + "\n")
        with open(project / named[1], "w", newline="") as f:
            writer = csv.DictWriter(f, [text, label])
            writer.writeheader()
            writer.writerows(rows[1:])
        return
    image, folder = (arg for arg in argv if arg.startswith("path/to/"))
    val = project / "data" / "val"
    images = sorted(p for p in val.rglob("*") if p.suffix in (".jpg", ".png") and "masks" not in p.parts)
    (project / image).parent.mkdir(parents=True)
    (project / image).write_bytes(images[0].read_bytes())
    for path in images[1:]:
        target = project / folder / path.relative_to(val)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())


@pytest.mark.slow  # trains, predicts with and exports each template's project
@pytest.mark.parametrize("template", TEMPLATES)
def test_train_on_your_data_as_the_readme_shows(bake, tmp_path: Path, template: str) -> None:
    """The README's "Train on your data" and "Use the model", as written: the data under the layout's names (file
    names, columns, label values, folders), config.yaml set to its config block (sizes shrunk: SMALLER), the
    README's train command, then its predict and export commands. The run trains on that data, with one output
    per class shown, at the generated num_workers; predict.py labels the eval data as the best evaluation did
    (classifiers) or writes what the README says; export.py writes the ONNX file and the class names."""
    project = bake(template)
    readme = (project / "README.md").read_text()
    classes = write_readme_data(template, project, readme, tmp_path)
    config = settings(example(readme, "## Train on your data", "yaml", r"dataset: f"))
    small = {**SHORT_RUN[template], **config, **SMALLER.get(template, {})}
    if template == "text-classification":
        small["model"] = str(tmp_path / "model")
    generated = yaml.safe_load((project / "config.yaml").read_text())
    # Whole epochs over the data, at the generated num_workers.
    whole = {key: None for key in ("train_epoch_length", "eval_epoch_length") if key in generated}
    make_offline(project, light=False, num_workers=generated["num_workers"], **whole, **small)
    data = sorted((project / "data").rglob("*"))
    argv, env = readme_train_command(project)
    run_cmd(argv, cwd=project, env={**env, **NO_NETWORK}, timeout=300)
    (run_dir,) = run_dirs(project)
    log = read_log(run_dir)
    assert sorted((project / "data").rglob("*")) == data, "nothing downloaded (or written) into data_path"
    if classes is not None:
        assert json.loads((run_dir / "classes.json").read_text()) == classes, "the classes the README's data shows"
        outputs = torch.load(sorted(run_dir.glob("training_checkpoint_*.pt"))[-1], weights_only=True)["model"]
        head = list(outputs.values())[-1]  # the last layer's bias: an output per class
        assert head.shape == (len(classes),), f"{head.shape[0]} outputs: one per class ({len(classes)})"
    if template in LEARNS:
        best = max(float(scores[LEARNS[template]]) for scores in log["evals"])
        assert best >= 0.8, f"eval {LEARNS[template]} per epoch {log['evals']}: the README's data is learnt"

    (predict,) = commands(example(readme, "## Use the model", "bash", r"predict\.py"))
    argv = shell_words(predict, project)
    predict_inputs(template, project, argv) if template != "gan" else None
    run_cmd(argv, cwd=project, env=NO_NETWORK)
    output = project / argv[argv.index("--output") + 1]
    if template in ("vision-classification", "text-classification"):
        with open(output) as f:
            rows = list(csv.DictReader(f))
        assert {row["label"] for row in rows} <= set(classes), rows
        best = max(float(scores["accuracy"]) for scores in log["evals"])
        if template == "vision-classification":
            scored = [row for row in rows if "path/to/folder" in row["input"]]
            right = sum(Path(row["input"]).parent.name == row["label"] for row in scored)
        else:
            scored = rows[1:-1]  # the CSV's rows: the eval texts but the first (in the .txt file) and the --text
            with open(project / [arg for arg in argv if arg.endswith(".csv") and arg != "predictions.csv"][0]) as f:
                truth = [row["label"] for row in csv.DictReader(f)]
            right = sum(row["label"] == label for row, label in zip(scored, truth, strict=True))
        # The eval data less one item: predict.py's accuracy is the best evaluation's within that item.
        assert abs(right / len(scored) - best) <= 1 / len(scored) + 5e-5, (
            f"predict.py {right}/{len(scored)}, eval {best}"
        )
    elif template == "gan":
        names = sorted(path.name for path in output.iterdir())
        count = int(argv[2])
        assert names == [f"{index:04d}.png" for index in range(count)] + ["grid.png"], names
    else:
        written = sorted(str(path.relative_to(output)) for path in output.rglob("*.png"))
        assert "image.png" in written and len(written) == 4, written
        assert {f"IoU_{name}" for name in classes} <= set(log["evals"][-1]), f"an IoU per class: {log['evals']}"
        # Every val image is whole in a crop: predict.py pads it as the evaluation does, and scores the same.
        val = sorted((project / "data" / "val" / "masks").glob("*.png"))
        by_name = {path.name: path for path in output.rglob("*.png") if path.name != "image.png"}
        masks = [output / "image.png", *(by_name[mask.name] for mask in val[1:])]
        matrix = sum(confusion(mask, truth, len(classes)) for mask, truth in zip(masks, val, strict=True))
        correct = matrix.diag().double()
        iou = correct / (matrix.sum(dim=0) + matrix.sum(dim=1) - correct).clamp(min=1)
        best = max(log["evals"], key=lambda scores: float(scores["mIoU"]))
        scores = {"mIoU": float(iou.mean()), "pixel_accuracy": float(correct.sum() / matrix.sum())}
        for name, value in scores.items():
            assert value == pytest.approx(float(best[name]), abs=2e-4), f"predict.py {name}={value}; the eval {best}"

    export = [
        line for line in commands(example(readme, "## Use the model", "bash", r"export\.py")) if "export.py" in line
    ]
    (command,) = export
    argv = shell_words(command, project)
    run_cmd(argv, cwd=project, env=NO_NETWORK)
    exported = project / argv[argv.index("--output") + 1]
    assert (exported / "model.onnx").is_file(), sorted(exported.iterdir())
    if classes is not None:
        assert json.loads((exported / "classes.json").read_text()) == classes


# Run in a text project (argv: the dataset's name, then its configuration): a dataset folder at that name (where
# `load_dataset` looks before the Hub) with two configurations, the README's and another, each a Parquet file per
# split of the synthetic reviews in the README's columns, labels as numbers; then the errors of a configuration
# left out, one it does not have, and one given to `dataset: files`.
WRITE_HUB_DATASET = """
import json, sys
from pathlib import Path
import yaml
from config import Config
from datasets import Value
from data import get_datasets, setup_tokenizer, synthetic_reviews


def replace(config, **changes):
    return config.model_copy(update=changes)

name, chosen, settings = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
configurations = sorted({chosen, "other"})
cards = []
for configuration in configurations:
    files = []
    for seed, split in enumerate((settings["train_split"], settings["eval_split"])):
        reviews = synthetic_reviews(64, seed, max_words=20).cast_column("label", Value("int64"))
        reviews = reviews.rename_columns({"text": settings["text_column"], "label": settings["label_column"]})
        reviews.to_parquet(Path(name) / configuration / f"{split}.parquet")
        files.append({"split": split, "path": f"{configuration}/{split}.parquet"})
    cards.append({"config_name": configuration, "data_files": files})
(Path(name) / "README.md").write_text("---\\n" + yaml.safe_dump({"configs": cards}) + "---\\n")
config = replace(Config(), **settings, dataset=name, dataset_config=chosen)
tokenizer = setup_tokenizer(replace(config, dataset="synthetic"))
errors = {}
for case, changes in {"none": {"dataset_config": None}, "unknown": {"dataset_config": "nope"},
                      "files": {"dataset": "files"}}.items():
    try:
        get_datasets(replace(config, **changes), tokenizer)
    except ValueError as error:
        errors[case] = str(error)
# The file formats the README names besides CSV and JSON Lines, labels as numbers: Parquet and JSON.
files = Path("other_formats")
for seed, (split, write) in enumerate(((config.train_split, "to_parquet"), (config.eval_split, "to_json"))):
    reviews = synthetic_reviews(16, seed, max_words=20).cast_column("label", Value("int64"))
    suffix = ".parquet" if write == "to_parquet" else ".json"
    getattr(reviews, write)(files / f"{split}{suffix}", **({"lines": False} if suffix == ".json" else {}))
read = get_datasets(replace(config, dataset="files", dataset_config=None, data_path=str(files),
                            text_column="text", label_column="label"), tokenizer)
errors["other formats"] = [len(read[0]), len(read[1]), read[2]]
print(json.dumps(errors))
"""


@pytest.mark.slow  # trains a text project
def test_a_hub_dataset_by_name_and_configuration_trains_as_the_readme_shows(bake, tmp_path: Path) -> None:
    """The README's Hub example (a dataset by name with a configuration, ``dataset_config``), its config block set
    in config.yaml as shown: the dataset at that name, with two configurations and labels as numbers, trains on
    the one named (its classes, '0' and '1'). A configuration left out where there are several, one the dataset
    lacks, and one given to files are refused naming the key, the value and the configurations there are. And
    `dataset: files` reads the other formats the README names, Parquet and JSON."""
    project = bake("text-classification")
    readme = (project / "README.md").read_text()
    config = settings(example(readme, "## Train on your data", "yaml", r"dataset_config"))
    run_cmd(
        [PYTHON, "-c", f"from pathlib import Path\nroot = Path({str(tmp_path)!r})\n{SAVE_SEEDED_TINY_MODEL}"],
        cwd=project,
    )
    written = {key: value for key, value in config.items() if key not in ("dataset", "dataset_config")}
    argv = [PYTHON, "-c", WRITE_HUB_DATASET, config["dataset"], config["dataset_config"], json.dumps(written)]
    errors = json.loads(run_cmd(argv, cwd=project).stdout.splitlines()[-1])
    configurations = str(sorted({config["dataset_config"], "other"}))
    assert f"dataset_config=None: {config['dataset']} has the configurations {configurations}" in errors["none"]
    assert "dataset_config='nope'" in errors["unknown"] and configurations in errors["unknown"], errors
    assert "dataset='files' has no configurations; set `dataset_config: null`" in errors["files"], errors
    # `dataset: files` in the README's other formats, Parquet and JSON (an array), labels as numbers.
    assert errors["other formats"] == [16, 16, ["0", "1"]], errors["other formats"]

    small = {**SHORT_RUN["text-classification"], "max_epochs": 1, "train_epoch_length": 2, "eval_epoch_length": 1}
    make_offline(project, **small, model=str(tmp_path / "model"), **config)
    argv, env = readme_train_command(project)
    run_cmd(argv, cwd=project, env={**env, **NO_NETWORK})
    (run_dir,) = run_dirs(project)
    assert json.loads((run_dir / "classes.json").read_text()) == ["0", "1"], "labels as numbers: their values"
    assert read_log(run_dir)["evals"], "the run trained and evaluated on the configuration named"


# One project per template, among them a TPU one (its pins on the XLA venv) and a visdom one (its two install
# commands, on the trackers venv): the venvs the README's installs are checked against.
INSTALLS = [
    ("vision-classification", {"backend": "xla-tpu", "launcher": "spawn", "nproc_per_node": "8"}, [XLA_PYTHON]),
    ("text-classification", {"logger": "visdom"}, [TRACKERS_PYTHON]),
    ("gan", {}, []),
    ("vision-segmentation", {}, []),
]


@pytest.mark.slow  # makes a venv per project and runs pip in it
def test_install_commands_of_every_readme(bake, tmp_path: Path) -> None:
    """Every ``pip install`` the READMEs show (Install, Tests, Pre-commit hooks, the export's requirements), run
    as written in a fresh venv layered on the pinned test venvs, with pip's index off: each finds what it asks
    for already satisfied by the tested releases (a requirement they do not satisfy would fail here). A command
    of pip whose text and files are another project's already run is not run again. Then the README's ``pre-commit
    install`` in the project made a git repository: the hook is in place. (`pytest` itself runs in
    tests/test_project_tooling.py, as the project's CI runs it.)"""
    done = set()
    for template, answers, bases in INSTALLS:
        project = bake(template, **answers)
        readme = (project / "README.md").read_text()
        lines = [
            line
            for heading in ("## Install", "## Tests", "## Pre-commit hooks", "## Use the model")
            for block in blocks(readme)
            if block.heading == heading and block.lang == "bash"
            for line in commands(block)
            if line.startswith(("pip install", "pre-commit "))
        ]
        assert sum(line.startswith("pip install") for line in lines) >= 4, lines
        venv = fresh_venv(tmp_path / template, *bases, PYTHON)
        # pip finds pre-commit installed in the base venv, so puts no command of it in the fresh one: the base's.
        (venv / "bin" / "pre-commit").symlink_to(Path(PYTHON).parent / "pre-commit")
        subprocess.run(["git", "init", "-q"], cwd=project, check=True)
        for line in lines:
            named = [project / word for word in shlex.split(line) if word.endswith(".txt")]
            key = (line, *(path.read_text() for path in named))
            if key in done and line.startswith("pip "):
                continue
            done.add(key)
            proc = subprocess.run(
                ["bash", "-eo", "pipefail", "-c", line],
                cwd=project,
                env=offline_env(venv),
                capture_output=True,
                text=True,
            )
            assert proc.returncode == 0, f"{template}: `{line}` failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        assert (project / ".git" / "hooks" / "pre-commit").is_file(), "pre-commit install puts the git hook in place"


@pytest.mark.slow  # generates six projects with cookiecutter's command line
def test_generate_a_project_as_the_readme_shows(tmp_path: Path) -> None:
    """The repository README's "Generate a project" block, each line as written from a local clone (the README's
    own advice: its path for `gh:<org>/<repo>`), Enter at every question: the menu's first choice, then each
    template named, then the answers given after --no-input. `pip install cookiecutter` finds it installed."""
    block = example((REPO / "README.md").read_text(), "## Generate a project", "bash")
    env = {**os.environ, "PATH": f"{Path(PYTHON).parent}{os.pathsep}{os.environ['PATH']}", "PIP_NO_INDEX": "1"}
    made = []
    for index, line in enumerate(commands(block)):
        out = tmp_path / str(index)
        out.mkdir()
        command = line.replace("gh:<org>/<repo>", shlex.quote(str(REPO)))
        proc = subprocess.run(
            ["bash", "-c", command], cwd=out, env=env, input="\n" * 100, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, f"the README's `{line}` failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        if line.startswith("cookiecutter"):
            (project,) = out.iterdir()
            made.append(re.search(r"Generated from the `([\w-]+)` template", (project / "README.md").read_text())[1])
            if "--no-input" in line:
                answers = (project / "README.md").read_text()
                assert "backend `gloo`, launcher `spawn`" in answers, "the answers given after --no-input"
    assert made == [TEMPLATES[0], "vision-classification", "gan", "text-classification", "vision-segmentation"] + [
        "vision-classification"
    ], made
