{% import "flags.j2" as flags with context %}
{#- A batch is (images, labels). -#}
{% set batch_type = "tuple[torch.Tensor, torch.Tensor]" %}
{% set batch_helpers = "" %}
{% set unpack_batch = "x, y = (t.to(device, non_blocking=True) for t in batch)" %}
{% set forward = "model(x)" %}
{% set targets = "y" %}
{% include "trainers/classifier.py" %}
