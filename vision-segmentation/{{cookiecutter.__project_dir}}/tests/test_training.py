"""Fast checks of the data, the model and short training runs, on CPU with synthetic data."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image
from torchvision.transforms.v2 import functional as F

from config import Config
from data import CLASSES, IGNORE_INDEX, MEAN, NUM_CLASSES, STD, SyntheticScenes, get_datasets, joint_transforms
from machinery.inference.trained import inference_device, newest_model
from machinery.runs.directory import write_classes
from main import run
from models import SegmentationLoss, logits_of, setup_model
from pictures import GAP, PALETTE
from predict import images_in, predict


def test_synthetic_scenes_have_the_shapes_of_voc_batches(tmp_path: Path) -> None:
    train, evaluation, classes = get_datasets("synthetic", str(tmp_path), crop_size=64)
    assert classes == list(CLASSES), "the synthetic scenes have VOC's classes"
    for image, mask in (train[0], evaluation[0]):
        assert image.shape == (3, 64, 64) and image.dtype == torch.float32
        assert mask.shape == (64, 64) and mask.dtype == torch.int64
        labels = set(mask.unique().tolist())
        assert labels <= set(range(NUM_CLASSES)) | {IGNORE_INDEX}, f"labels outside VOC's: {labels}"
    # Whole (evaluation takes all of a scene; a training crop may miss its objects): at least one object.
    assert set(evaluation[0][1].unique().tolist()) - {0, IGNORE_INDEX}, "every scene has at least one object"


def test_synthetic_eval_scenes_are_not_training_scenes() -> None:
    """Eval mIoU measures what the model learned, not what it memorised."""
    train = [SyntheticScenes(512, seed=0, image_size=32)[index][1].tobytes() for index in range(512)]
    evaluation = [SyntheticScenes(64, seed=1, image_size=32)[index][1].tobytes() for index in range(64)]
    assert not set(evaluation) & set(train)


@pytest.mark.parametrize("size", [(300, 500), (500, 375), (80, 60)])
def test_images_of_any_size_become_one_crop_with_the_padding_ignored(size: tuple[int, int]) -> None:
    """VOC's images differ in size; every batch has one shape. Padding is ignored, never background."""
    width, height = size
    image, mask = Image.new("RGB", size, (200, 10, 10)), Image.new("L", size, 7)
    for train in (True, False):
        image_out, mask_out = joint_transforms(256, train=train)(image, mask)
        assert image_out.shape == (3, 256, 256) and mask_out.shape == (256, 256)
        assert set(mask_out.unique().tolist()) <= {7, IGNORE_INDEX}, "a mask's labels stay labels (no interpolation)"
    # Evaluation pads on the right and at the bottom, then takes the centre: the whole image when it fits.
    _, mask_out = joint_transforms(512, train=False)(image, mask)
    assert int((mask_out == 7).sum()) == width * height, "evaluation must score every pixel of the image"


@pytest.mark.parametrize("name", ["deeplabv3_resnet50", "lraspp_mobilenet_v3_large", "fcn_resnet50"])
def test_models_give_logits_per_pixel_and_the_loss_adds_the_auxiliary_head(name: str) -> None:
    model = setup_model(name, NUM_CLASSES)
    outputs = model(torch.rand(2, 3, 64, 64))
    assert outputs["out"].shape == (2, NUM_CLASSES, 64, 64)
    targets = torch.randint(0, NUM_CLASSES, (2, 64, 64))
    targets[:, :4] = IGNORE_INDEX
    main_loss = SegmentationLoss(aux_weight=0.0)(outputs, targets)
    loss = SegmentationLoss(aux_weight=0.5)(outputs, targets)
    if name == "lraspp_mobilenet_v3_large":
        assert "aux" not in outputs and loss == main_loss, "LR-ASPP has no auxiliary head"
    else:
        assert outputs["aux"].shape == outputs["out"].shape, f"{name} is built with its auxiliary head"
        assert loss > main_loss, "the auxiliary head's loss is added"


def test_short_run_trains_logs_metrics_draws_predictions_and_saves_the_asked_checkpoints(
    config: Config,
) -> None:
    run(0, config)
    # The run's directory (an MLflow project also keeps its mlflow.db store there).
    (run_dir,) = (path for path in Path(config.output_dir).iterdir() if path.is_dir())
    log = (run_dir / "training.log").read_text()
    assert "train_loss=" in log, log
    assert "eval: mIoU=" in log and " pixel_accuracy=" in log and " IoU_aeroplane=" in log, log
    assert (run_dir / "config-lock.yaml").is_file()
    # One picture per epoch: a row per eval image, its true mask and its prediction beside it.
    pictures = sorted(path.name for path in (run_dir / "predictions").iterdir())
    assert pictures == [f"epoch_{epoch:04d}.png" for epoch in range(1, config.max_epochs + 1)]
    side, rows = config.crop_size, config.num_pictures
    with Image.open(run_dir / "predictions" / pictures[-1]) as picture:
        picture.load()  # the whole file decodes
        assert picture.size == (3 * side + 2 * GAP, rows * side + (rows - 1) * GAP)
{% include "pytest/short_run_checkpoints.py" %}


def test_an_optimizer_step_follows_every_accumulation_steps_batches(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = []
    step = torch.optim.SGD.step

    def counted_step(optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        steps.append(optimizer)
        return step(optimizer, *args, **kwargs)

    monkeypatch.setattr(torch.optim.SGD, "step", counted_step)
    run(0, config.model_copy(update={"max_epochs": 2, "train_epoch_length": 3}))
    assert config.accumulation_steps == 2
    # Steps after batches 2, 4 (its gradients from both epochs) and 6.
    assert len(steps) == 3, f"6 batches, accumulation_steps 2: 3 optimizer steps, not {len(steps)}"


def test_a_short_run_learns_the_synthetic_data(train_for_eval_scores: Callable[..., list[float]]) -> None:
    """Eval mIoU well above what a constant prediction scores after seconds of training: data, masks, loss,
    optimizer, gradient accumulation and learning-rate schedule work together. Predicting background
    everywhere scores 0.037 on these eval scenes (78% of their pixels: IoU 0.78 for it, 0 for the 20 other
    classes). Over seeds 0-9 the final eval mIoU was 0.13 to 0.22 (a learning rate above VOC's, for a run of
    seconds)."""
    scores = train_for_eval_scores(max_epochs=3, train_epoch_length=48, eval_epoch_length=8, lr=0.05)
    assert scores[-1] >= 0.1, f"eval mIoU per epoch {scores}; a constant prediction scores 0.037"


def test_predict_writes_each_image_the_mask_its_model_gives_it(config: Config, run_dir: Path, tmp_path: Path) -> None:
    """predict.py on image files (synthetic scenes saved as PNG: smaller than crop_size, its size, larger) with
    the newest run's best model: each mask is a palette PNG of its image's size, in the pictures' colours, whose
    pixels are the model's argmax. An image evaluation sees whole gets evaluation's mask (its transform: padded,
    normalised); a larger one is seen whole, not cropped. The model runs on predict.py's device (a GPU's
    convolutions round otherwise than the CPU's). (The model is saved as a run saves it, untrained.)"""
    write_classes(run_dir, CLASSES)
    model = setup_model(config.model, NUM_CLASSES).eval()
    torch.save(model.state_dict(), run_dir / "best_model_1_mIoU=0.5000.pt")
    torch.save({"model": model.state_dict()}, run_dir / "training_checkpoint_4.pt")
    checkpoint = newest_model(config.output_dir)
    assert checkpoint.name == "best_model_1_mIoU=0.5000.pt", "a run's best model comes before its checkpoints"
    side = config.crop_size
    sizes = [(side - 16, side - 24), (side, side), (side + 16, side + 8)]  # (width, height)
    scenes = SyntheticScenes(3, seed=1, image_size=side + 16)
    images = [scenes[index][0].crop((0, 0, *size)) for index, size in enumerate(sizes)]
    for index, image in enumerate(images):
        image.save(tmp_path / f"{index}.png")
    pairs = images_in([str(tmp_path / f"{index}.png") for index in range(3)], tmp_path / "masks")
    assert [mask for _, mask in pairs] == [tmp_path / "masks" / f"{index}.png" for index in range(3)]
    predict(pairs, checkpoint)

    evaluation = joint_transforms(side, train=False)
    device = inference_device()
    model.to(device)
    for index, image in enumerate(images):
        width, height = image.size
        if width <= side and height <= side:
            inputs, _ = evaluation(image, Image.new("L", image.size))
        else:
            inputs = F.normalize(F.to_dtype(F.pil_to_tensor(image), torch.float32, scale=True), MEAN, STD)
        with torch.inference_mode():
            expected = logits_of(model(inputs[None].to(device)))[0, :, :height, :width].argmax(dim=0).cpu()
        with Image.open(tmp_path / "masks" / f"{index}.png") as mask:
            assert mask.mode == "P" and mask.size == image.size, f"{index}.png: {mask.mode} {mask.size}"
            assert mask.getpalette()[: 3 * NUM_CLASSES] == PALETTE[: 3 * NUM_CLASSES], "the pictures' colours"
            labels = F.pil_to_tensor(mask)[0].long()
        assert torch.equal(labels, expected), f"{index}.png: {int((labels != expected).sum())} pixels differ"
