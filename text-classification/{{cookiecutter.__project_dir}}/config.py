{% include "config/header.py" %}

    # Data: "imdb" (the IMDB reviews), or any Hugging Face dataset by name, downloaded into data_path;
    # "files": your CSV, JSON Lines or Parquet files, <data_path>/<train_split>.csv (or .jsonl, .json,
    # .parquet) and the same for eval_split; "synthetic" makes random reviews, a tokenizer and a tiny
    # randomly initialised encoder offline (for tests and demos: `model` is then not used).
    # The classes come from the train split's labels (their names, if the dataset has them).
    dataset: str = "imdb"
    dataset_config: str | None = None  # a Hub dataset's configuration (glue's sst2); null: its only one
    data_path: str = "./data"
    train_split: str = "train"
    eval_split: str = "test"
    text_column: str = "text"
    label_column: str = "label"  # class names or numbers
    max_length: int = 256  # tokens per text: shorter texts are padded, longer ones truncated (fixed shapes)
    batch_size: int = 32  # global batch size, split across processes
    accumulation_steps: int = 1  # batches whose gradients add up before each optimizer step (a larger batch)
    eval_batch_size: int = 64
    num_workers: int = 2

    # Model and optimisation
    model: str = "bert-base-uncased"  # any Hugging Face encoder, with its tokenizer
    dropout: float = 0.3  # before the classifier
    classifier_hidden: int = 0  # 0: the classifier is one linear layer; N: N hidden units (GELU) first
    lr: float | None = None  # null: 5e-5 to fine-tune a pretrained model; 3e-3 for synthetic's tiny random one
    weight_decay: float = 0.01  # AdamW, on every weight but biases and normalisation layers
    warmup_ratio: float = 0.1  # share of the iterations with a linear warm-up; then linear decay to zero
