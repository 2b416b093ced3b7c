{% import "flags.j2" as flags with context %}
{#- A batch is a dict of token ids, attention mask and labels. -#}
{% set batch_type = "Batch" %}
{% set batch_helpers %}
Batch = dict[str, torch.Tensor]


def unpack(batch: Batch, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The token ids, attention mask and labels of a batch, on the device."""
    return tuple(batch[key].to(device, non_blocking=True) for key in ("input_ids", "attention_mask", "label"))
{% endset %}
{% set unpack_batch = "input_ids, attention_mask, labels = unpack(batch, device)" %}
{% set forward = "model(input_ids, attention_mask)" %}
{% set targets = "labels" %}
{% include "trainers/classifier.py" %}
