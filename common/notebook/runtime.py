{#- The set-up cell of a GPU (nccl) or CPU (gloo) notebook: which torch, how many GPUs. -#}
import torch

{% if cookiecutter.backend == "nccl" %}
# nccl needs CUDA GPUs: in Colab, Runtime > Change runtime type > GPU.
{% endif %}
print("torch", torch.__version__, "- GPUs visible:", torch.cuda.device_count())
