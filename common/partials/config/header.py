{#- The start of every template's config.py, up to the class body's first key. -#}
"""The training configuration: this project's own keys (data, model, optimisation) on ``RunSettings``, the run's
(machinery/settings.py). A run reads config.yaml and the command line's overrides into a ``Config``: a key that is
missing, undeclared, of another type or out of its range stops it, naming the key. To add a key, declare it here
(name, type, default value) and give it a value in config.yaml; read it as ``config.<name>``.
"""

from machinery.settings import RunSettings


class Config(RunSettings):
    """config.yaml's keys that are this project's own, in its order, each with its type and generated value."""
