"""The runtime environment of every Ray actor this package starts.

Ray starts an actor's worker process with the job's runtime environment unless the actor names
its own. When the driver runs under ``uv run``, Ray's ``uv run`` hook makes the job's
``py_executable`` a fresh ``uv run`` in a packaged copy of the working directory: each worker
then builds its own virtual environment before it can start (slow at best; it fails where that
environment cannot be built). The package's actors instead run on the interpreter the driver
runs, ``sys.executable``, as NeMo-RL starts its own actors, so a user's script needs no
environment variable.

Ray replaces an actor's ``runtime_env`` as a whole when ``.options(runtime_env=...)`` names one
(it does not merge it with the class default), so code that passes its own runtime environment
builds it with :func:`actor_runtime_env`.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping
from typing import Any


def actor_runtime_env(runtime_env: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A runtime environment that runs the actor on the driver's interpreter.

    Args:
        runtime_env: The caller's runtime environment, if any; its keys win (a caller that names
            its own ``py_executable`` keeps it), its ``env_vars`` are kept.

    Returns:
        A new dict: ``{"py_executable": sys.executable, **runtime_env}``.
    """
    merged: dict[str, Any] = {"py_executable": sys.executable}
    merged.update(copy.deepcopy(dict(runtime_env or {})))
    return merged


def actor_options(options: Mapping[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    """Ray actor options with :func:`actor_runtime_env` merged into their ``runtime_env``.

    Args:
        options: Actor options (``num_cpus``, ``scheduling_strategy``, ``runtime_env`` ...).
        **more: Further options, winning over ``options``.

    Returns:
        A new dict for ``ActorClass.options(**...)`` (or ``ray_actor_options`` of a Serve
        deployment).
    """
    merged = {**dict(options or {}), **more}
    merged["runtime_env"] = actor_runtime_env(merged.get("runtime_env"))
    return merged
