{#- The learning test's batch sizes, text length and dropout (the tiny encoder learns fastest without) in
    every test: on a TPU, the tests then share the compiled programs. -#}
{% set tiny_batch_size = 32 %}
{% set tiny_eval_batch_size = 16 %}
{% set tiny_extras %}
    "max_length": 64,
    "dropout": 0.0,
{% endset %}
{% include "pytest/conftest.py" %}
