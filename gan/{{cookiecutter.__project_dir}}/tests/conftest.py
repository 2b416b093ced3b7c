{#- The GAN's own keys of config.yaml, made small: images and networks. -#}
{% set tiny_extras %}
    "image_size": 16,
    "z_dim": 16,
    "g_filters": 8,
    "d_filters": 8,
    "num_samples": 16,
{% endset %}
{% include "pytest/conftest.py" %}
