"""The engines and their handlers: training, evaluation, logging, checkpoints, stopping rules, tracking."""
