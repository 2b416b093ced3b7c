{% include "config/header.py" %}

    # Data: "cifar10" downloads CIFAR-10 into data_path (unless it is there); "folder" reads your images from
    # data_path/train/<class>/* and data_path/val/<class>/*; "synthetic" makes images of CIFAR-10's shapes
    # offline, each class a colour and stripe direction (for tests and demos: a short run learns them).
    dataset: str = "cifar10"
    data_path: str = "./data"
    # every image is resized to image_size x image_size (CIFAR-10's are 32 x 32); pretrained weights set their own
    image_size: int = 32
    batch_size: int = 32  # global batch size, split across processes
    accumulation_steps: int = 1  # batches whose gradients add up before each optimizer step (a larger batch)
    eval_batch_size: int = 64
    num_workers: int = 2

    # Model and optimisation
    model: str = "resnet18"  # any torchvision classification model (some need an image_size: see the README)
    # null: random initialisation; DEFAULT (or a name such as IMAGENET1K_V1): the model's pretrained weights,
    # downloaded once into torch's cache, with a new last layer for your classes and their own preprocessing
    weights: str | None = None
    lr: float = 0.001
