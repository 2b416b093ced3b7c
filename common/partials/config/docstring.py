{#- The start of every template's config.py, up to the class body's first key. -#}
{% import "flags.j2" as flags with context %}
"""The training configuration: config.yaml's keys, their types, and the values this project was generated with.

A run reads config.yaml and the command line's overrides into a ``Config`` (machinery/settings.py): a key that
is missing, undeclared here or of another type stops it, naming the key. To add a key, declare it here
(name, type, default value) and give it a value in config.yaml; read it as ``config.<name>``.
"""

from dataclasses import dataclass
{% if flags.amp %}
from typing import Literal
{% endif %}


@dataclass
class Config:
    """config.yaml's keys, in its order, each with its type and the value this project was generated with."""

    seed: int = 666
