"""Make pytorch-ignite 0.5.5 work with torch_xla 2.7 and newer.

ignite's ``xla-tpu`` backend still calls ``xm.xrt_world_size()``, ``xm.get_ordinal()`` and
``xm.get_local_ordinal()``, which torch_xla 2.7 removed in favour of ``torch_xla.runtime``. Without
these names every ``idist`` call on a TPU fails with ``AttributeError``. ``apply()`` adds them back,
only where they are missing, so an older torch_xla (or a fixed ignite) is left untouched.
"""

import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

# Removed name in torch_xla.core.xla_model -> its replacement in torch_xla.runtime.
REPLACEMENTS = {
    "xrt_world_size": xr.world_size,
    "get_ordinal": xr.global_ordinal,
    "get_local_ordinal": xr.local_ordinal,
}


def apply() -> list[str]:
    """Add the missing names to ``torch_xla.core.xla_model``; return the names that were added."""
    added = [name for name in REPLACEMENTS if not hasattr(xm, name)]
    for name in added:
        setattr(xm, name, REPLACEMENTS[name])
    return added
