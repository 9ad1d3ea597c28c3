"""The ``genrm/*`` metrics of a NeMo-RL run, logged through NeMo-RL's own ``Logger``.

NeMo-RL's GRPO never calls an environment's ``global_post_process_and_metrics``, and its async
rollouts call ``step`` once per sample, so no single step sees the whole batch. The GenRM actor
sums every step since the previous ``global_post_process_and_metrics`` call; fetching that once
per training step gives the whole step's metrics, whichever rollout path ran.

Two routes, both through NeMo-RL's ``Logger.log_metrics``:

- :func:`log_genrm_metrics`: one call in a launcher's own loop;
- :class:`GenRMMetricsLogger`: wraps NeMo-RL's logger; each ``train`` (or ``validation``) log
  also carries the GenRM metrics gathered since the previous one, as ``train/genrm/*``. The
  ``--engine nemo_rl`` driver hands it to ``grpo_train``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import ray

logger = logging.getLogger(__name__)

GENRM_CLASS_NAME = "GenRMEnvironmentActor"
"""Ray's class name of the ``GenRMEnvironment`` actor (its body, :class:`~nemo_genrm.env.environment.GenRMEnvironmentActor`)."""
_LOGGED_PREFIXES = ("train", "validation")


def _class_name(actor: Any) -> str | None:
    descriptor = getattr(actor, "_ray_actor_creation_function_descriptor", None)
    return getattr(descriptor, "class_name", None)


def genrm_envs(task_to_env: Mapping[str, Any]) -> list[Any]:
    """The distinct GenRM environment actors among NeMo-RL's ``task_to_env`` values."""
    found: list[Any] = []
    for actor in task_to_env.values():
        if _class_name(actor) == GENRM_CLASS_NAME and all(actor is not seen for seen in found):
            found.append(actor)
    return found


def collect_genrm_metrics(envs: Iterable[Any], batch: Any = None) -> dict[str, float]:
    """Each actor's ``genrm/*`` metrics since its previous call, merged.

    With several GenRM envs, the second one's keys become ``genrm_1/*`` and so on, so none is
    overwritten.

    Args:
        envs: GenRM environment actors (see :func:`genrm_envs`).
        batch: Passed to ``global_post_process_and_metrics`` (the GenRM env returns it unchanged).

    Returns:
        The metrics, keys starting with ``genrm``.
    """
    merged: dict[str, float] = {}
    results = ray.get([env.global_post_process_and_metrics.remote(batch) for env in envs])
    for index, (_batch, metrics) in enumerate(results):
        for key, value in metrics.items():
            name = key if index == 0 else key.replace("genrm/", f"genrm_{index}/", 1)
            merged[name] = value
    return merged


def log_genrm_metrics(
    nemo_logger: Any, task_to_env: Mapping[str, Any], step: int, *, prefix: str = "train"
) -> dict[str, float]:
    """Log the GenRM metrics gathered since the previous call through NeMo-RL's ``Logger``.

    Call it once per training step, e.g. right after ``grpo_train`` logs its own ``train``
    metrics, or from a launcher's loop: ``log_genrm_metrics(logger, task_to_env, step)``.

    Args:
        nemo_logger: NeMo-RL's ``Logger`` (anything with ``log_metrics(metrics, step, prefix=)``).
        task_to_env: NeMo-RL's ``task_to_env`` dict (``setup_response_data``'s result).
        step: The step to log at.
        prefix: NeMo-RL's metric prefix: keys land as ``{prefix}/genrm/...``.

    Returns:
        The metrics logged (empty when there is no GenRM env).
    """
    metrics = collect_genrm_metrics(genrm_envs(task_to_env))
    if metrics:
        nemo_logger.log_metrics(metrics, step, prefix=prefix)
    return metrics


class GenRMMetricsLogger:
    """NeMo-RL's ``Logger`` whose ``train`` and ``validation`` logs carry the GenRM metrics.

    A ``train`` (or ``validation``) log gets the ``genrm/*`` metrics of every ``step`` since the
    previous such log, when there were any. Every other call goes to the wrapped logger unchanged.

    Args:
        nemo_logger: NeMo-RL's ``Logger``.
        task_to_env: The environments of training (and validation, when they differ).
    """

    def __init__(self, nemo_logger: Any, *task_to_envs: Mapping[str, Any]) -> None:
        self._logger = nemo_logger
        envs: list[Any] = []
        for mapping in task_to_envs:
            envs.extend(e for e in genrm_envs(mapping) if all(e is not seen for seen in envs))
        self._envs = envs

    def log_metrics(self, metrics: dict[str, Any], step: int, prefix: str | None = "", *args: Any, **kwargs: Any) -> None:
        """NeMo-RL's ``log_metrics``; a ``train``/``validation`` call gets ``genrm/*`` added."""
        if prefix in _LOGGED_PREFIXES and self._envs:
            try:
                genrm = collect_genrm_metrics(self._envs)
            except Exception:  # metrics must never stop training
                logger.exception("could not fetch the GenRM metrics; logging without them")
                genrm = {}
            # grpo_train logs `train` more than once a step; only the first call after the
            # step's rollout finds samples, and an empty window must not overwrite it.
            if any(v for k, v in genrm.items() if k.endswith("/num_samples")):
                metrics = {**metrics, **genrm}
        self._logger.log_metrics(metrics, step, prefix, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)
