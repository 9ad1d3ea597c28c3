"""The ``genrm/*`` metrics of a NeMo-RL run, logged through NeMo-RL's own ``Logger``.

NeMo-RL's GRPO never calls an environment's ``global_post_process_and_metrics``, and its async
rollouts call ``step`` once per sample, so no single step sees the whole batch. The GenRM actor
sums every step since the previous ``global_post_process_and_metrics`` call; fetching that once
per training step gives the whole step's metrics, whichever rollout path ran.

Three routes, all through NeMo-RL's ``Logger.log_metrics``:

- :func:`install_logger_hook` (what :func:`nemo_genrm.integrations.nemo_rl.register` does):
  every ``train`` (or ``validation``) log of NeMo-RL's ``Logger`` also carries the metrics of
  the GenRM environments this process started, gathered since the previous such log, as
  ``train/genrm/*``. A copy of NeMo-RL's ``run_grpo.py`` needs only ``register()``;
- :class:`GenRMMetricsLogger`: the same as a wrapper around any logger, for given environments;
- :func:`log_genrm_metrics`: one call in a launcher's own loop.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import ray

from nemo_genrm.env.launch import forget_environment, started_environments

logger = logging.getLogger(__name__)

GENRM_CLASS_NAME = "GenRMEnvironmentActor"
"""Ray's class name of the ``GenRMEnvironment`` actor (its body, :class:`~nemo_genrm.env.environment.GenRMEnvironmentActor`)."""
_LOGGED_PREFIXES = ("train", "validation")
NUM_SAMPLES = "genrm/num_samples"


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
    """The ``genrm/*`` metrics of each actor that judged samples since its previous call, merged.

    Every actor's window is emptied; those without samples are left out. With several that
    judged, the first one's keys stay ``genrm/*``, the next one's become ``genrm_1/*`` and so on,
    so none is overwritten. An actor that has died is skipped (and forgotten), with a warning.

    Args:
        envs: GenRM environment actors (see :func:`genrm_envs`), oldest first.
        batch: Passed to ``global_post_process_and_metrics`` (the GenRM env returns it unchanged).

    Returns:
        The metrics, keys starting with ``genrm``; empty when no actor judged anything.
    """
    envs = list(envs)
    refs = [env.global_post_process_and_metrics.remote(batch) for env in envs]
    active: list[dict[str, float]] = []
    for env, ref in zip(envs, refs, strict=True):
        try:
            _batch, metrics = ray.get(ref)
        except ray.exceptions.RayActorError:
            logger.warning("a GenRM environment actor is gone; its metrics are left out from now on")
            forget_environment(env)
            continue
        if metrics.get(NUM_SAMPLES):
            active.append(metrics)
    merged: dict[str, float] = {}
    for index, metrics in enumerate(active):
        for key, value in metrics.items():
            merged[key if index == 0 else key.replace("genrm/", f"genrm_{index}/", 1)] = value
    return merged


def with_genrm_metrics(metrics: dict[str, Any], prefix: str | None, envs: list[Any]) -> dict[str, Any]:
    """``metrics`` with the GenRM metrics of ``envs`` added, for a ``train``/``validation`` log.

    Other prefixes, no envs, or no samples judged since the previous fetch (``grpo_train`` logs
    ``train`` more than once a step; only the first call after the step's rollout finds
    samples, and an empty window must not overwrite it) leave ``metrics`` as they are. A
    failure to fetch is logged, never raised: metrics must never stop training.
    """
    if prefix not in _LOGGED_PREFIXES or not envs:
        return metrics
    try:
        genrm = collect_genrm_metrics(envs)
    except Exception:  # metrics must never stop training
        logger.exception("could not fetch the GenRM metrics; logging without them")
        return metrics
    return {**metrics, **genrm} if genrm else metrics


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
        The metrics logged (empty, and nothing logged, when no GenRM env judged anything).
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

    def log_metrics(
        self, metrics: dict[str, Any], step: int, prefix: str | None = "", *args: Any, **kwargs: Any
    ) -> None:
        """NeMo-RL's ``log_metrics``; a ``train``/``validation`` call gets ``genrm/*`` added."""
        self._logger.log_metrics(with_genrm_metrics(metrics, prefix, self._envs), step, prefix, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)


_HOOK_MARK = "_genrm_metrics_hook"


def install_logger_hook() -> bool:
    """Make NeMo-RL's ``Logger`` add the GenRM metrics to every ``train``/``validation`` log.

    Wraps ``nemo_rl.utils.logger.Logger.log_metrics`` (every instance, subclasses that do not
    override it included) so that such a log also carries the ``genrm/*`` metrics of the GenRM
    environments this process started (:func:`~nemo_genrm.env.launch.started_environments`),
    gathered since the previous such log. Idempotent. A log that already carries them (through
    :class:`GenRMMetricsLogger` or :func:`log_genrm_metrics`) finds an empty window and is left
    as it is.

    Returns:
        Whether this call installed it (``False``: it already was).
    """
    from nemo_rl.utils.logger import Logger

    original = Logger.log_metrics
    if getattr(original, _HOOK_MARK, False):
        return False

    @functools.wraps(original)
    def log_metrics(
        self: Any, metrics: dict[str, Any], step: int, prefix: str | None = "", *args: Any, **kwargs: Any
    ) -> None:
        envs = started_environments() if ray.is_initialized() else []  # none to ask after ray.shutdown()
        metrics = with_genrm_metrics(metrics, prefix, envs)
        original(self, metrics, step, prefix, *args, **kwargs)

    setattr(log_metrics, _HOOK_MARK, True)
    Logger.log_metrics = log_metrics  # type: ignore[method-assign]
    return True
