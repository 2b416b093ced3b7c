{#- The segmentation template's own keys of config.yaml, made small: crops, a light model (LR-ASPP on
    MobileNetV3: the default DeepLabV3 is built and checked in test_training.py), two pictures; gradients
    added up over 2 batches, in every test: on a TPU, the tests then share the compiled programs. -#}
{% set tiny_extras %}
    "crop_size": 64,
    "model": "lraspp_mobilenet_v3_large",
    "accumulation_steps": 2,
    "num_pictures": 2,
{% endset %}
{% include "pytest/conftest.py" %}
