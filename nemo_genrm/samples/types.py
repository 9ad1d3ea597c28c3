"""The environment's return type and interface: NeMo-RL's when it is installed, else our own.

With ``nemo_rl`` importable, :class:`EnvironmentReturn` and :class:`EnvironmentInterface` *are*
NeMo-RL's classes, so NeMo-RL's rollout code receives exactly its own type. Without it, this
module defines classes with the same names, fields and field order.

It also holds what the environment decides per sample: :class:`SampleResult` (reason, parse
failure detail, verdict, probability, reward, mask), which every reward mode produces and
:func:`nemo_genrm.modes.assemble` turns into ``EnvironmentReturn``. The returned
``metadata[i]["genrm"]`` is a :class:`GenRMInfo`: the plain dict users log, carrying the typed
result for callers that read it (:func:`sample_results`).
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from nemo_genrm.errors import Reason
from nemo_genrm.verdicts import REASONS as VERDICT_REASONS
from nemo_genrm.verdicts import TRUNCATED

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
HEDGED = Reason.HEDGED

REASONS: tuple[str, ...] = tuple(Reason)
"""Why a sample got its reward, in reporting order (see :class:`nemo_genrm.errors.Reason`)."""

NO_LABEL_PROBS = "no_label_probs"
"""Parse failure from logprobs: the judge gave no usable probability for one of the two labels."""

PARSE_FAILURE_WHYS: tuple[str, ...] = (
    TRUNCATED,
    *(why for why in VERDICT_REASONS if why != "ok"),
    NO_LABEL_PROBS,
)
"""Why a judge reply held no verdict (``genrm/parse_failure/<why>``): ``truncated`` (the judge ran
out of tokens, or stopped inside ``<think>``), the :class:`~nemo_genrm.verdicts.VerdictParser`
reasons, and :data:`NO_LABEL_PROBS`."""

METADATA_NOT_DICT = "metadata_not_dict"
NOT_MESSAGES = "not_messages"
NO_ASSISTANT_MESSAGE = "no_assistant_message"
CONTENT_NOT_TEXT = "content_not_text"
NO_TEXT_PART = "no_text_part"
BAD_GROUND_TRUTH = "bad_ground_truth"
BAD_RUBRIC = "bad_rubric"

BAD_INPUT_WHYS: tuple[str, ...] = (
    METADATA_NOT_DICT,
    NOT_MESSAGES,
    NO_ASSISTANT_MESSAGE,
    CONTENT_NOT_TEXT,
    NO_TEXT_PART,
    BAD_GROUND_TRUTH,
    BAD_RUBRIC,
)
"""What was wrong with a ``bad_input`` sample (``genrm/bad_input/<why>``), in the order it is checked:
``metadata_not_dict`` (its metadata entry is neither a dict nor ``None``), ``not_messages`` (its
message log is not a list of message dicts), ``no_assistant_message``, ``content_not_text`` (the
response's content is neither a string nor a list of content parts, or a part is malformed),
``no_text_part`` (content parts, none of them text: e.g. an image alone), ``bad_ground_truth``
(neither text nor a finite real number), ``bad_rubric`` (rubric items that are not a list of
criteria with finite positive weights)."""


@dataclass(frozen=True)
class SampleResult:
    """What the environment decided for one sample.

    Attributes:
        reason: Why the sample got its reward (:class:`~nemo_genrm.errors.Reason`).
        reward: The reward; 0.0 unless ``reason`` is ``judged``.
        verdict: The binary verdict (1 or 0) when the mode has one (reference mode), else ``None``.
        masked: Left out of training's baselines and of ``genrm/mean_reward``.
        prob: P(positive label) when the verdict came from logprobs (reference mode), else ``None``.
        why: The detail of the reason: for a ``parse_failure``, why no verdict could be read
            (one of :data:`PARSE_FAILURE_WHYS`; ``None`` where failures of several judge replies
            were combined: pairwise and rubric modes); for a ``bad_input``, what was wrong (one of
            :data:`BAD_INPUT_WHYS`); ``None`` otherwise.
        info: Mode-specific details, shown in ``metadata["genrm"]`` (e.g. ``win_rate``).
    """

    reason: str
    reward: float = 0.0
    verdict: int | None = None
    masked: bool = False
    prob: float | None = None
    why: str | None = None
    info: Mapping[str, Any] = field(default_factory=dict)

    def metadata(self) -> GenRMInfo:
        """The ``metadata[i]["genrm"]`` entry of this sample."""
        return GenRMInfo(self)


class GenRMInfo(dict):
    """``metadata[i]["genrm"]``: a :class:`SampleResult` as the plain dict users log.

    Its items are ``reason``, ``why``, ``verdict``, ``masked`` and the mode's ``info``; :attr:`result` is
    the typed result itself. Both survive pickling (a step's return crosses Ray), and the dict
    part is what JSON writers and loggers see.
    """

    __slots__ = ("result",)

    def __init__(self, result: SampleResult) -> None:
        super().__init__(
            {"reason": result.reason, "why": result.why, "verdict": result.verdict, "masked": result.masked}
        )
        self.update(result.info)
        self.result = result


def sample_results(metadata: Sequence[Any] | None, size: int) -> list[SampleResult | None]:
    """The typed result of each sample of an ``EnvironmentReturn``'s ``metadata``.

    Args:
        metadata: The returned metadata (``None`` when the environment returned none).
        size: The batch size.

    Returns:
        Per sample, its :class:`SampleResult`; ``None`` where the environment gave none (an
        environment other than this package's: this one returns every entry as a dict holding it).
    """
    out: list[SampleResult | None] = [None] * size
    for i, meta in enumerate(list(metadata or [])[:size]):
        info = meta.get("genrm") if isinstance(meta, dict) else None
        out[i] = info.result if isinstance(info, GenRMInfo) else None
    return out


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
    "BAD_INPUT_WHYS",
    "GenRMInfo",
    "HAVE_NEMO_RL",
    "HEDGED",
    "INCOMPLETE_GROUP",
    "JUDGED",
    "JUDGE_ERROR",
    "MISSING_GROUND_TRUTH",
    "MISSING_RUBRIC",
    "NO_ANSWER",
    "NO_LABEL_PROBS",
    "PARSE_FAILURE",
    "PARSE_FAILURE_WHYS",
    "REASONS",
    "Reason",
    "SampleResult",
    "TOO_LONG",
    "EnvironmentInterface",
    "EnvironmentReturn",
    "sample_results",
]
