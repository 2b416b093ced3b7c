"""The TPU: torch_xla's replicas, their launch and device loaders, and the XLA counters of each epoch."""
