{#- The GAN's own keys of config.yaml, made small: images and networks; the learning test's batch size in
    every test: on a TPU, the tests then share the compiled programs. -#}
{% set tiny_batch_size = 32 %}
{% set tiny_extras %}
    "image_size": 16,
    "z_dim": 16,
    "g_filters": 8,
    "d_filters": 8,
    "num_samples": 16,
{% endset %}
{% include "pytest/conftest.py" %}
