{#- The vision classifier's own keys of config.yaml: image_size kept at the synthetic images' own 32 (the
    learning test's bounds were measured there); the learning test's batch sizes in every test: on a TPU,
    the tests then share the compiled programs. -#}
{% set tiny_batch_size = 16 %}
{% set tiny_eval_batch_size = 16 %}
{% set tiny_extras %}
    "image_size": 32,
{% endset %}
{% include "pytest/conftest.py" %}
