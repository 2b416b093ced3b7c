{% include "config/header.py" %}

    # Data: "voc" downloads Pascal VOC 2012 (segmentation: 21 classes) into data_path; "synthetic" makes
    # scenes of the same shapes offline, coloured shapes of the 20 object classes on a grey background
    # (for tests and demos: a short run learns them); "folder" reads your images and masks in data_path
    # (train/images, train/masks, val/images, val/masks: see the README). Images and masks are cropped
    # (or padded) to crop_size x crop_size: one shape for every batch.
    dataset: str = "voc"
    data_path: str = "./data"
    classes: list[str] | None = None  # folder: class names by label (0, 1, ...); null: class_0... up to the top label
    crop_size: int = 512
    batch_size: int = 16  # global batch size, split across processes
    accumulation_steps: int = 1  # batches whose gradients add up before each optimizer step (a larger batch)
    eval_batch_size: int = 8
    num_workers: int = 2

    # Model and optimisation
    model: str = "deeplabv3_resnet50"  # any torchvision segmentation model, e.g. lraspp_mobilenet_v3_large
    # null: random initialisation; DEFAULT: the backbone's ImageNet weights (images normalised with their statistics)
    weights_backbone: str | None = None
    aux_loss_weight: float = 0.5  # weight of the auxiliary head's loss, where the model has one
    lr: float = 0.02
    momentum: float = 0.9
    weight_decay: float = 0.0001
    num_pictures: int = 4  # eval images drawn with their true and predicted masks after each epoch
