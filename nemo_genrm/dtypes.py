"""The one table from a config's precision name to a torch dtype.

Judge ``precision``, policy ``precision`` and tiny-model ``dtype`` all name dtypes this way;
each config model narrows the names it accepts with its own ``Literal``.
"""

from __future__ import annotations

import torch

DTYPES: dict[str, torch.dtype] = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
}
