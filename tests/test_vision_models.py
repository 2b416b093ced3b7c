"""Every torchvision classification model trains and predicts in a vision-classification project, at the smallest
image size it takes; pretrained weights bring their own preprocessing (both vision templates).

One process of the project's Python checks every model (``EVERY_MODEL``); another the special kinds' predict.py,
the weights' transforms and the refusal of a size a model cannot take (``KINDS_AND_WEIGHTS``). The tests read what
each wrote.
"""

import json

import pytest
from environments import PYTHON
from projects import NO_NETWORK, run_cmd
from scheduling import on_one_worker

pytestmark = pytest.mark.slow  # they run generated projects: not in the quick lane
# The tests that read one process's findings go to one worker (tests/scheduling.py), which runs it once.
EVERY_MODEL_RUN = [on_one_worker("vision-every-model", "vision-classification")]
KINDS_RUN = [on_one_worker("vision-kinds-and-weights", "vision-classification")]

# Run in a vision-classification project: each model that torchvision.models.list_models lists, built by the
# project's setup_model at the smallest image_size its check_model accepts, one training step (the loss of its
# train-mode output, as trainers.train_step computes it, backward, an optimizer step) and one eval forward pass
# (logits_of of its output: one logit per class). On the CPU for the models of fewer than REAL_BELOW parameters
# (52 of torchvision 0.24's 80) and the special kinds (auxiliary outputs, a size fixed when built); on the meta
# device for the larger ones, whose building alone costs seconds on 2 cores (regnet_y_128gf: 11 s and 2.5 GB,
# 20 s with its step): the meta device runs the same Python on tensors of shapes without values, so an output,
# a shape or a size that is wrong fails there as on the CPU (values are not checked there). And one size less
# than that smallest (where there is one) is refused by check_model and fails in the model itself (on the meta
# device). Writes {model: what held, or the error} as JSON (argv: the file). About 35 CPU seconds in all.
EVERY_MODEL = """
import json, sys, time, warnings
import torch
from torch import nn
from torchvision import models as tv
from torchvision.models import regnet
from data import prepare_batch
from models import image_size_problem, logits_of, setup_model

torch.set_num_threads(1)
torch.manual_seed(0)
warnings.filterwarnings("ignore", category=UserWarning)
REAL_BELOW = 60_000_000
SPECIAL = ("googlenet", "inception_v3", "vit_b_32", "maxvit_t")
# RegNet computes its widths with tensors and reads them back: on the CPU, or the meta device has no values.
widths = regnet.BlockParams.from_init_params.__func__


def widths_on_the_cpu(cls, *args, **kwargs):
    with torch.device("cpu"):
        return widths(cls, *args, **kwargs)


regnet.BlockParams.from_init_params = classmethod(widths_on_the_cpu)


def step(name, size, device):
    with torch.device(device):
        model = setup_model(name, num_classes=3, image_size=size)
    inputs, targets = prepare_batch((torch.rand(2, 3, size, size), torch.tensor([0, 2])), torch.device(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model.train()
    loss = nn.CrossEntropyLoss()(model(*inputs), targets)
    loss.backward()
    optimizer.step()
    model.eval()
    with torch.no_grad():
        logits = logits_of(model(*inputs))
    assert logits.shape == (2, 3), f"eval logits of shape {tuple(logits.shape)}"
    assert loss.shape == (), f"a loss of shape {tuple(loss.shape)}"
    if device == "cpu":
        assert torch.isfinite(loss), f"loss {loss}"


results = {}
for name in tv.list_models(module=tv):
    start = time.perf_counter()
    size = next(size for size in range(1, 2000) if image_size_problem(name, size) is None)
    try:
        parameters = tv.get_model_weights(name).DEFAULT.meta["num_params"]  # with ImageNet's 1000 classes
        real = parameters < REAL_BELOW or name in SPECIAL
        step(name, size, "cpu" if real else "meta")
        result = {"size": size, "parameters": parameters, "device": "cpu" if real else "meta"}
        if size > 1:
            below = time.perf_counter()
            result["refused_below"] = image_size_problem(name, size - 1)
            try:  # built, then a training forward pass: where a size fails
                with torch.device("meta"):
                    setup_model(name, num_classes=3, image_size=size - 1).train()(torch.rand(2, 3, size - 1, size - 1))
                result["fails_below"] = None
            except Exception as error:
                result["fails_below"] = repr(error)[:200]
            result["below_seconds"] = round(time.perf_counter() - below, 2)
    except Exception as error:
        result = {"size": size, "error": repr(error)[:2000]}
    result["seconds"] = round(time.perf_counter() - start, 2)
    results[name] = result
with open(sys.argv[1], "w") as f:
    json.dump(results, f)
"""


@pytest.fixture(scope="module")
def every_model(bake_for_a_shared_run, tmp_path_factory) -> dict:
    project = bake_for_a_shared_run("vision-classification")
    out = tmp_path_factory.mktemp("models") / "models.json"
    run_cmd([PYTHON, "-c", EVERY_MODEL, str(out)], cwd=project, timeout=600)
    return json.loads(out.read_text())


@pytest.mark.parametrize("template", EVERY_MODEL_RUN)
def test_every_torchvision_classification_model_trains_and_predicts_at_the_smallest_size_it_takes(
    every_model, template: str
) -> None:
    failed = {name: result["error"] for name, result in every_model.items() if "error" in result}
    assert not failed, f"{len(failed)} models do not train or predict at their smallest image_size: {failed}"
    on_the_cpu = [name for name, result in every_model.items() if result["device"] == "cpu"]
    assert {"resnet18", "googlenet", "inception_v3", "vit_b_32", "maxvit_t"} <= set(on_the_cpu), on_the_cpu
    sizes = {name: result["size"] for name, result in every_model.items()}
    assert (sizes["inception_v3"], sizes["vit_h_14"], sizes["vit_b_16"], sizes["maxvit_t"]) == (75, 14, 16, 221)


@pytest.mark.parametrize("template", EVERY_MODEL_RUN)
def test_a_size_under_a_models_smallest_is_refused_and_would_fail(every_model, template: str) -> None:
    """The smallest sizes check_model accepts are the models' own: one pixel less fails in the model too (the
    README's sizes are exact), and check_model says so first, with what to use."""
    for name, result in every_model.items():
        if result["size"] > 1:
            assert result["refused_below"], f"{name}: image_size {result['size'] - 1} is accepted and fails"
            assert result["fails_below"], f"{name}: image_size {result['size'] - 1} is refused, but it trains"


# Run in a vision-classification project: predict.py with a model of each special kind (auxiliary outputs:
# GoogLeNet, Inception-v3; a size fixed when built: ViT), saved as a run saves it, against the model on the
# evaluation's transform; the transforms with and without pretrained weights; predict.py, export.py and the data
# with pretrained weights (SqueezeNet 1.1's, random ones in torch's cache: TORCH_HOME); and the run's refusal of a
# size its model cannot take. Writes what it found as JSON (argv: a folder to work in).
KINDS_AND_WEIGHTS = """
import json, sys
from pathlib import Path
import onnx, torch, yaml
from torchvision import transforms as T
from config import Config
from data import MEAN, STD, SyntheticImages, get_datasets, image_transforms, input_size
from export import export
from machinery.data.files import read_image
from machinery.runs.directory import write_classes
from main import run
from models import check_model, pretrained_weights, setup_model
from predict import predict

torch.set_num_threads(1)
work = Path(sys.argv[1])
found = {}


def predicted_as_evaluated(name, size, weights=None):
    run_dir = work / name / "logs" / "run"
    run_dir.mkdir(parents=True)
    config = Config(model=name, image_size=size, weights=weights, output_dir=str(run_dir.parent))
    (run_dir / "config-lock.yaml").write_text(yaml.safe_dump(config.model_dump()))
    write_classes(run_dir, ["a", "b", "c"])
    torch.manual_seed(0)
    model = setup_model(name, 3, weights, size).eval()
    checkpoint = run_dir / "best_model_1_accuracy=0.5000.pt"
    torch.save(model.state_dict(), checkpoint)
    paths = []
    for index in range(3):
        image = SyntheticImages(3, seed=1, transform=lambda image: image)[index][0]
        paths.append(work / name / f"{index}.png")
        image.resize((40 + 20 * index, 30 + 10 * index)).save(paths[-1])
    rows = predict(paths, checkpoint, batch_size=2)
    _, transform = image_transforms(size, pretrained_weights(name, weights))
    with torch.no_grad():
        inputs = torch.stack([transform(read_image(str(path))) for path in paths])
        probabilities = torch.cat([model(inputs[:2]), model(inputs[2:])]).softmax(dim=1)
    expected = [["abc"[int(p.argmax())], float(p.max())] for p in probabilities]
    found = {"rows": [[label, score] for _, label, score in rows], "expected": expected, "shape": list(inputs.shape)}
    if weights is not None:  # export.py's ONNX file takes the weights' crops
        export(checkpoint, work / name / "exported")
        (images,) = onnx.load(str(work / name / "exported" / "model.onnx")).graph.input
        found["onnx_input"] = [dim.dim_value or "any" for dim in images.type.tensor_type.shape.dim]
    return found


for name, size in (("googlenet", 32), ("inception_v3", 75), ("vit_b_32", 64)):
    found[name] = predicted_as_evaluated(name, size)


def described(transform):
    return [repr(step) for step in transform.transforms]


found["null"] = [described(t) for t in image_transforms(48)]
found["null_expected"] = [
    described(T.Compose([T.Resize((48, 48)), T.RandomCrop((48, 48), padding=6), T.RandomHorizontalFlip(),
                         T.ToTensor(), T.Normalize(MEAN, STD)])),
    described(T.Compose([T.Resize((48, 48)), T.ToTensor(), T.Normalize(MEAN, STD)])),
]
found["cifar"] = [MEAN, STD]
found["weights"] = {}
image = SyntheticImages(1, seed=1, transform=lambda image: image)[0][0].resize((300, 200))
for name, weights in (("resnet18", "DEFAULT"), ("inception_v3", "DEFAULT"), ("vit_b_16", "IMAGENET1K_SWAG_E2E_V1")):
    chosen = pretrained_weights(name, weights)
    train, evaluation = image_transforms(32, chosen)
    preset = chosen.transforms()
    normalize = evaluation.transforms[-1]
    found["weights"][f"{name}.{weights}"] = {
        "eval": described(evaluation),
        "train": described(train),
        "normalize": [list(normalize.mean), list(normalize.std)],
        "preset": [list(preset.mean), list(preset.std), preset.resize_size, preset.crop_size],
        "same_as_preset": bool(torch.allclose(evaluation(image), preset(image), atol=1e-6)),
        "input_size": input_size(32, chosen),
        "train_shape": list(train(image).shape),
    }
train, evaluation = get_datasets("synthetic", str(work), 32, pretrained_weights("squeezenet1_1", "DEFAULT"))
found["dataset_shapes"] = [list(train[0][0].shape), list(evaluation[0][0].shape)]
found["squeezenet_weights"] = predicted_as_evaluated("squeezenet1_1", 32, "DEFAULT")

refused = work / "refused"
try:
    run(0, Config(model="alexnet", image_size=32, output_dir=str(refused), dataset="synthetic"))
    found["refusal"] = None
except SystemExit as stop:
    found["refusal"] = str(stop)
found["written"] = refused.exists()
check_model("alexnet", 32, "DEFAULT")  # pretrained weights set their own size: nothing to refuse
with open(work / "found.json", "w") as f:
    json.dump(found, f)
"""

CACHE_WEIGHTS = """
import sys
from pathlib import Path
import torch
from torchvision import models

Path(sys.argv[1]).parent.mkdir(parents=True)
torch.save(models.squeezenet1_1().state_dict(), sys.argv[1])
"""


@pytest.fixture(scope="module")
def kinds_and_weights(bake_for_a_shared_run, tmp_path_factory) -> dict:
    project = bake_for_a_shared_run("vision-classification")
    work = tmp_path_factory.mktemp("kinds")
    cached = work / "torch" / "hub" / "checkpoints" / "squeezenet1_1-b8a52dc0.pth"
    run_cmd([PYTHON, "-c", CACHE_WEIGHTS, str(cached)], cwd=project)
    env = {**NO_NETWORK, "TORCH_HOME": str(work / "torch")}
    run_cmd([PYTHON, "-c", KINDS_AND_WEIGHTS, str(work)], cwd=project, env=env, timeout=300)
    return json.loads((work / "found.json").read_text())


@pytest.mark.parametrize(
    "name",
    [
        on_one_worker("vision-kinds-and-weights", name)
        for name in ("googlenet", "inception_v3", "vit_b_32", "squeezenet_weights")
    ],
)
def test_predict_py_gives_what_the_model_gives_each_image_in_the_evaluations_transform(
    kinds_and_weights, name: str
) -> None:
    """GoogLeNet and Inception-v3 (auxiliary classifiers in training), ViT (its size fixed when built, here 64),
    and SqueezeNet from pretrained weights (in their 224-pixel crops, which export.py's ONNX file takes too):
    predict.py's class and probability of each image are the model's on the evaluation's transform."""
    found = kinds_and_weights[name]
    assert [label for label, _ in found["rows"]] == [label for label, _ in found["expected"]], found
    for (_, score), (_, expected) in zip(found["rows"], found["expected"], strict=True):
        assert score == pytest.approx(expected, abs=1e-5), found
    if name == "squeezenet_weights":
        assert found["shape"] == [3, 3, 224, 224], "the weights' crop size, not image_size (32)"
        assert found["onnx_input"] == ["any", 3, 224, 224], "export.py's input: batches of the weights' crops"


@pytest.mark.parametrize("template", KINDS_RUN)
def test_pretrained_weights_bring_their_resize_crop_mean_and_std_and_random_ones_keep_cifars(
    kinds_and_weights, template: str
) -> None:
    """With weights: the eval transform is torchvision's ``weights.transforms()`` (its Normalize the weights' mean
    and std, its Resize and CenterCrop their sizes; the same tensor for an image), training crops at random to
    the same size, and export.py's input is that crop. With weights null: as before, CIFAR-10's statistics at
    image_size."""
    assert kinds_and_weights["null"] == kinds_and_weights["null_expected"]
    assert kinds_and_weights["cifar"] == [[0.4914, 0.4822, 0.4465], [0.2470, 0.2435, 0.2616]]
    sizes = {"resnet18.DEFAULT": (256, 224), "inception_v3.DEFAULT": (342, 299)}
    sizes["vit_b_16.IMAGENET1K_SWAG_E2E_V1"] = (384, 384)
    for key, (resize, crop) in sizes.items():
        found = kinds_and_weights["weights"][key]
        mean, std, resize_size, crop_size = found["preset"]
        assert (resize_size, crop_size) == ([resize], [crop]), found
        assert found["normalize"] == [mean, std], f"{key}: normalised with {found['normalize']}, not the weights'"
        assert f"Resize(size=[{resize}]" in found["eval"][0], found["eval"]
        assert found["eval"][1] == f"CenterCrop(size=({crop}, {crop}))", found["eval"]
        assert found["train"][1] == f"RandomCrop(size=({crop}, {crop}), padding=None)", found["train"]
        assert found["same_as_preset"], f"{key}: the eval transform gives another tensor than weights.transforms()"
        assert found["input_size"] == crop and found["train_shape"] == [3, crop, crop], found
    assert kinds_and_weights["dataset_shapes"] == [[3, 224, 224], [3, 224, 224]]


@pytest.mark.parametrize("template", KINDS_RUN)
def test_a_run_whose_model_cannot_take_its_image_size_stops_before_writing_anything(
    kinds_and_weights, template: str
) -> None:
    refusal = kinds_and_weights["refusal"]
    assert refusal is not None, "alexnet at image_size 32 must be refused"
    assert "image_size=32" in refusal and "model='alexnet'" in refusal and "use 63 or more" in refusal, refusal
    assert not kinds_and_weights["written"], "the refused run wrote its output folder"


# Run in a vision-segmentation project: the statistics images are normalised with, for random and pretrained
# backbone weights (torchvision's all have ImageNet's, MEAN and STD: weights of other statistics are made up
# here, to tell where they come from), in the training and evaluation transforms; and the backbone weights'
# names resolved. Writes what it found as JSON.
SEGMENTATION_STATISTICS = """
import json
from types import SimpleNamespace
from torchvision.models import MobileNet_V3_Large_Weights, ResNet50_Weights
from data import MEAN, STD, joint_transforms
from models import backbone_weights, statistics


class MadeUpWeights:
    def transforms(self):
        return SimpleNamespace(mean=[0.1, 0.2, 0.3], std=[0.4, 0.5, 0.6])


def normalised_with(weights):
    return [[list(step.mean), list(step.std)] for train in (True, False)
            for step in [joint_transforms(64, train, statistics(weights)).transforms[-1]]]


try:
    backbone_weights("fcn_resnet50", "IMAGENET1K_V9")
    unknown = None
except ValueError as error:
    unknown = str(error)
print(json.dumps({
    "null": normalised_with(None),
    "default": [[list(step.mean), list(step.std)] for step in [joint_transforms(64, False).transforms[-1]]],
    "made_up": normalised_with(MadeUpWeights()),
    "imagenet": [list(MEAN), list(STD)],
    "resnet50": [list(values) for values in statistics(ResNet50_Weights.IMAGENET1K_V2)],
    "resolved": [
        backbone_weights("deeplabv3_resnet50", "DEFAULT") is ResNet50_Weights.DEFAULT,
        backbone_weights("lraspp_mobilenet_v3_large", "IMAGENET1K_V1") is MobileNet_V3_Large_Weights.IMAGENET1K_V1,
        backbone_weights("fcn_resnet50", None) is None,
    ],
    "unknown": unknown,
}))
"""


def test_segmentation_images_are_normalised_with_the_backbone_weights_statistics(baked) -> None:
    """``weights_backbone`` set: the images are normalised with the statistics its weights' transforms() give
    (training and evaluation alike; main.py, predict.py and the pictures take ``models.statistics`` of
    ``models.backbone_weights``); null: with ImageNet's, as before."""
    project = baked("vision-segmentation")
    proc = run_cmd([PYTHON, "-c", SEGMENTATION_STATISTICS], cwd=project)
    found = json.loads(proc.stdout.splitlines()[-1])
    imagenet = found["imagenet"]
    assert imagenet == [[0.485, 0.456, 0.406], [0.229, 0.224, 0.225]]
    assert found["null"] == [imagenet, imagenet], "random weights: ImageNet's statistics, in training and evaluation"
    assert found["default"] == [imagenet], "the transforms' default: ImageNet's statistics"
    made_up = [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]
    assert found["made_up"] == [made_up, made_up], "the weights' own statistics, in training and evaluation"
    assert found["resnet50"] == imagenet, "ResNet-50's ImageNet weights: ImageNet's statistics, from the weights"
    assert found["resolved"] == [True, True, True]
    unknown = found["unknown"]
    assert "weights_backbone='IMAGENET1K_V9' is not one of fcn_resnet50's backbone's" in unknown, unknown
    assert "IMAGENET1K_V2" in unknown, unknown
