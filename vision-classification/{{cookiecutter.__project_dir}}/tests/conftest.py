{#- The vision classifier's own keys of config.yaml: image_size kept at the synthetic images' own 32 (the
    learning test's bounds were measured there). -#}
{% set tiny_extras %}
    "image_size": 32,
{% endset %}
{% include "pytest/conftest.py" %}
