"""nemo-genrm: generative reward models (LLM as judge) for GRPO, NeMo-RL style.

``import nemo_genrm`` stays light: the Ray-backed environment is imported on first access of
``nemo_genrm.GenRMEnvironment`` or ``nemo_genrm.GenRMEnvironmentImpl``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "GenRMEnvironment": "nemo_genrm.env.environment",
    "GenRMEnvironmentImpl": "nemo_genrm.env.environment",
}

__all__ = ["GenRMEnvironment", "GenRMEnvironmentImpl", "__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nemo_genrm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
