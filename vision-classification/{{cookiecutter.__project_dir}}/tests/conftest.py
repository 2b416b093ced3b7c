{#- The vision classifier's own keys of config.yaml, made small: the size image folders are resized to. -#}
{% set tiny_extras %}
    "image_size": 16,
{% endset %}
{% include "pytest/conftest.py" %}
