"""Registering the GenRM environment into NeMo-RL.

NeMo-RL starts an environment from two registries: ``ENV_REGISTRY`` (env name -> actor class
path, filled by ``nemo_rl.environments.utils.register_env``) and ``ACTOR_ENVIRONMENT_REGISTRY``
(actor class path -> Python executable the actor runs with). :func:`register` fills both, so a
NeMo-RL launcher (a copy of ``run_grpo.py`` or ``run_eval.py``) needs two lines before it builds
its environments::

    from nemo_genrm.integrations.nemo_rl import register
    register()            # env name "genrm": data.default.env_name: genrm, config under env.genrm

It also registers the data processor ``genrm_math_data_processor``
(:mod:`nemo_genrm.integrations.nemo_rl_processor`), which puts the raw question into
``extra_env_info``, and makes NeMo-RL's ``Logger`` log the ``genrm/*`` metrics with every
``train`` and ``validation`` log (:func:`nemo_genrm.integrations.nemo_rl_metrics.install_logger_hook`).
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

ACTOR_FQN = "nemo_genrm.environment.GenRMEnvironment"
"""Fully qualified name of the environment actor class."""

_MISSING = (
    "nemo_genrm.integrations.nemo_rl needs NeMo-RL (the 'nemo_rl' package), which is not "
    "importable here ({error}). Run inside a NeMo-RL environment (e.g. `uv run` in a NeMo-RL "
    "checkout with nemo-genrm installed into its venv), or use this package's own GRPO driver "
    "(examples/run_grpo_genrm.py), which needs no registration."
)


def register(name: str = "genrm", *, log_metrics: bool = True) -> str:
    """Register the GenRM environment actor and its data processor into NeMo-RL; idempotent.

    The actor runs with NeMo-RL's system executable (``PY_EXECUTABLES.SYSTEM``: the Python of
    the launching process, which has nemo-genrm installed).

    Args:
        name: The env name used in ``data.*.env_name`` and as the key of its config under ``env``.
        log_metrics: Make NeMo-RL's ``Logger`` add the ``genrm/*`` metrics of the GenRM
            environments this process starts to every ``train`` and ``validation`` log (NeMo-RL
            never asks an environment for its metrics); ``False`` leaves its ``Logger`` alone.

    Returns:
        The registered actor class path.

    Raises:
        ImportError: NeMo-RL is not importable (the message says how to fix it).
        ValueError: ``name`` is already registered for another actor class.
    """
    try:
        from nemo_rl.distributed.ray_actor_environment_registry import (
            ACTOR_ENVIRONMENT_REGISTRY,
        )
        from nemo_rl.distributed.virtual_cluster import PY_EXECUTABLES
        from nemo_rl.environments import utils as env_utils
    except ImportError as exc:
        raise ImportError(_MISSING.format(error=exc)) from exc

    current = ACTOR_ENVIRONMENT_REGISTRY.get(ACTOR_FQN)
    if current is None:
        ACTOR_ENVIRONMENT_REGISTRY[ACTOR_FQN] = PY_EXECUTABLES.SYSTEM
    elif current != PY_EXECUTABLES.SYSTEM:
        logger.info("%s already registered with executable %r; keeping it", ACTOR_FQN, current)

    registry = getattr(env_utils, "ENV_REGISTRY", None)
    entry = registry.get(name) if registry is not None else None
    if entry is None:
        try:
            env_utils.register_env(name, ACTOR_FQN)
        except ValueError:
            if registry is not None:
                raise
            # No readable registry: NeMo-RL says the name is taken, most likely by our own
            # earlier call; nothing to compare it with.
            logger.info("NeMo-RL env %r was already registered", name)
        else:
            logger.info("registered NeMo-RL env %r -> %s", name, ACTOR_FQN)
    else:
        existing = entry.get("actor_class_fqn") if isinstance(entry, dict) else entry
        if existing != ACTOR_FQN:
            raise ValueError(
                f"NeMo-RL env name {name!r} is already registered for {existing!r}: pick another "
                f"name, e.g. register(name='genrm_judge'), and use it in data.*.env_name and env.*"
            )
    _register_processor()
    if log_metrics:
        from nemo_genrm.integrations.nemo_rl_metrics import install_logger_hook

        if install_logger_hook():
            logger.info("NeMo-RL's Logger now logs genrm/* with every train and validation log")
    return ACTOR_FQN


def _register_processor() -> None:
    try:
        from nemo_genrm.integrations.nemo_rl_processor import register_processor

        register_processor()
    except ImportError as exc:  # a NeMo-RL without a processor registry: the env still works
        logger.info("NeMo-RL has no processor registry (%s); genrm_math_data_processor not registered", exc)
