{#- The standard-library and third-party imports of a classifier's main.py (vision and text). -#}
from types import SimpleNamespace

import ignite.distributed as idist
{% if cookiecutter.deterministic or flags.cuda_amp %}
import torch
{% endif %}
from ignite.engine import Engine, Events
from ignite.handlers import PiecewiseLinear
from ignite.metrics import Accuracy, Loss
from ignite.utils import manual_seed
from torch import nn, optim
