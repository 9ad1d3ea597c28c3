"""The environment's return type and interface: NeMo-RL's when it is installed, else our own.

With ``nemo_rl`` importable, :class:`EnvironmentReturn` and :class:`EnvironmentInterface` *are*
NeMo-RL's classes, so NeMo-RL's rollout code receives exactly its own type. Without it, this
module defines classes with the same names, fields and field order.

It also names the per-sample outcome reasons the environment reports (see :data:`REASONS`).
"""

from __future__ import annotations

import abc
import logging
from typing import Any, NamedTuple

from nemo_genrm.errors import Reason

logger = logging.getLogger(__name__)

JUDGED = Reason.JUDGED
PARSE_FAILURE = Reason.PARSE_FAILURE
NO_ANSWER = Reason.NO_ANSWER
TOO_LONG = Reason.TOO_LONG
JUDGE_ERROR = Reason.JUDGE_ERROR
MISSING_GROUND_TRUTH = Reason.MISSING_GROUND_TRUTH
BAD_INPUT = Reason.BAD_INPUT
INCOMPLETE_GROUP = Reason.INCOMPLETE_GROUP
MISSING_RUBRIC = Reason.MISSING_RUBRIC

REASONS: tuple[str, ...] = tuple(Reason)
"""Why a sample got its reward, in reporting order (see :class:`nemo_genrm.errors.Reason`)."""

try:  # pragma: no cover - exercised only where NeMo-RL is installed
    from nemo_rl.environments.interfaces import EnvironmentInterface, EnvironmentReturn

    HAVE_NEMO_RL = True
except ImportError:
    HAVE_NEMO_RL = False

    class EnvironmentReturn(NamedTuple):  # type: ignore[no-redef]
        """What one environment step returns; every field is batched.

        Attributes:
            observations: One ``{"role": "environment", "content": ...}`` message per sample.
            metadata: Per-sample metadata after the step.
            next_stop_strings: Stop strings for a next turn (``None``: single turn).
            rewards: ``[B]`` float32 rewards.
            terminateds: ``[B]`` bool, whether each episode ended.
            answers: The answers that were judged (``None`` where none was).
        """

        observations: list[dict[str, str]]
        metadata: list[Any]
        next_stop_strings: list[list[str] | None] | list[None]
        rewards: Any
        terminateds: Any
        answers: list[str | None] | None = None

    class EnvironmentInterface(abc.ABC):  # type: ignore[no-redef]
        """The two methods a GRPO loop calls on an environment (NeMo-RL's shape)."""

        @abc.abstractmethod
        def step(self, message_log_batch: list[Any], metadata: list[Any]) -> EnvironmentReturn:
            """Score one batch of conversations."""

        @abc.abstractmethod
        def global_post_process_and_metrics(self, batch: Any) -> tuple[Any, dict[str, Any]]:
            """Post-process a finished rollout batch and return metrics."""


__all__ = [
    "BAD_INPUT",
    "HAVE_NEMO_RL",
    "INCOMPLETE_GROUP",
    "JUDGED",
    "JUDGE_ERROR",
    "MISSING_GROUND_TRUTH",
    "MISSING_RUBRIC",
    "NO_ANSWER",
    "PARSE_FAILURE",
    "REASONS",
    "Reason",
    "TOO_LONG",
    "EnvironmentInterface",
    "EnvironmentReturn",
]
