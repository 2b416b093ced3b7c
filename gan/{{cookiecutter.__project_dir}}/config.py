{% include "config/header.py" %}

    # Data: "cifar10" and "mnist" download into data_path; "folder" reads every image under data_path
    # (in sub-folders: torchvision's ImageFolder layout); "synthetic" draws discs of random colours on a
    # dark ground, offline, in the same shapes (for tests and demos: a short run learns to imitate them).
    dataset: str = "cifar10"
    data_path: str = "./data"
    image_size: int = 32  # images are resized and cropped to this: a power of 2, at least 8 (the paper used 64)
    channels: int = 3  # 3 for colour, 1 for grey (mnist); images are converted to it
    batch_size: int = 64  # global batch size, split across processes
    num_workers: int = 2

    # Networks and optimisation (the DCGAN paper's values)
    z_dim: int = 100  # length of the generator's input noise vector
    g_filters: int = 64  # width of the generator's last hidden layer; each earlier layer doubles it
    d_filters: int = 64  # width of the discriminator's first layer; each later layer doubles it
    lr: float = 0.0002
    beta1: float = 0.5  # Adam's first momentum coefficient
    num_samples: int = 64  # images in each epoch's sample grid, generated from the same fixed noise
