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

logger = logging.getLogger(__name__)

JUDGED = "judged"
PARSE_FAILURE = "parse_failure"
NO_ANSWER = "no_answer"
TOO_LONG = "too_long"
JUDGE_ERROR = "judge_error"
MISSING_GROUND_TRUTH = "missing_ground_truth"
BAD_INPUT = "bad_input"
INCOMPLETE_GROUP = "incomplete_group"
MISSING_RUBRIC = "missing_rubric"

REASONS: tuple[str, ...] = (
    JUDGED,
    PARSE_FAILURE,
    NO_ANSWER,
    TOO_LONG,
    JUDGE_ERROR,
    MISSING_GROUND_TRUTH,
    BAD_INPUT,
    INCOMPLETE_GROUP,
    MISSING_RUBRIC,
)
"""Why a sample got its reward. ``judged``: the judge gave a verdict (the reward is that verdict
or its probability). ``parse_failure``: the judge replied but no verdict could be read.
``no_answer``: the response held no answer to judge (empty, or a marker followed by nothing).
``too_long``: the answer was past ``prompt.answer.max_chars``, or the prompt could not fit the
judge's context. ``judge_error``: the engine failed (timeout, dead worker past its restarts).
``missing_ground_truth``: no reference answer in the metadata. ``bad_input``: the sample was
malformed (no assistant message, content not text, metadata not a dict, ...).
``incomplete_group`` (``reward.mode: pairwise_group``): no other response of the sample's group
reached the judge call, so there was nothing to compare with; the sample is masked.
``missing_rubric`` (``reward.mode: rubric``): no rubric items for the sample. Every reason but
``judged`` gives reward 0."""

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
    "TOO_LONG",
    "EnvironmentInterface",
    "EnvironmentReturn",
]
