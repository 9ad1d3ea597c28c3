"""The package's error types and the per-sample outcome reasons, in one place.

This module imports nothing from ``nemo_genrm``: every other module may import it.

- :class:`ConfigError`: a configuration is invalid (every problem listed at once);
- :class:`JudgeClosedError`: a judge (or the environment holding it) was used after shutdown;
- :class:`JudgeUnavailableError`: the judge cannot answer any more and will not recover
  (training stops instead of running on zero rewards);
- :class:`JudgeStartupError`: the judge's workers did not start (which, and why);
- :class:`RewardHackingSuspected`: the reward watchdog's alarm fired with ``action: stop``;
- :func:`is_fatal`: whether a judge exception stops training rather than becoming ``judge_error``;
- :class:`Reason`: why a sample got its reward;
- :data:`PROMPT_TOO_LONG`, :data:`TIMEOUT`, :data:`ENGINE_ERROR`: engine error codes that are
  not sample reasons themselves (the environment maps them to ``too_long`` and ``judge_error``).

The exceptions cross Ray's boundaries whole: each pickles with the arguments it was built from
(``__reduce__``), so an error raised in an actor reaches the driver with the same message and
attributes, and Ray's ``RayTaskError`` wrapper is still an instance of its class.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any


class ConfigError(ValueError):
    """A configuration is invalid. ``problems`` lists every problem found, one line each."""

    def __init__(self, problems: Sequence[str] | str, *, source: str | None = None):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.source = source
        where = f" in {source}" if source else ""
        count = len(self.problems)
        header = f"{count} configuration problem{'s' if count != 1 else ''}{where}:"
        super().__init__("\n".join([header, *(f"  - {p}" for p in self.problems)]))

    def __reduce__(self) -> tuple:
        return _rebuild_config_error, (type(self), self.problems, self.source)


class JudgeClosedError(RuntimeError):
    """A judge, or the environment holding it, was used after ``shutdown()``."""


class JudgeUnavailableError(RuntimeError):
    """The judge has had no live worker for longer than its grace period.

    Raised by ``step`` so training stops rather than trains on zero rewards. ``why`` says what
    was seen (for example the restart budget being spent), ``down_s`` how long it has been down.
    """

    def __init__(self, why: str, down_s: float):
        self.why = why
        self.down_s = down_s
        super().__init__(f"the judge has been unavailable for {down_s:.1f} s: {why}")

    def __reduce__(self) -> tuple:
        return type(self), (self.why, self.down_s)


class JudgeStartupError(RuntimeError):
    """Judge worker actors that did not start; ``problems`` says which and why, one line each."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("judge workers did not start:\n  - " + "\n  - ".join(self.problems))

    def __reduce__(self) -> tuple:
        return type(self), (self.problems,)


class RewardHackingSuspected(RuntimeError):
    """The reward watchdog's alarm fired under ``reward.watchdog.action: stop``.

    Raised by the GRPO driver after the step's checkpoint, and by the environment's next ``step``
    elsewhere (:mod:`nemo_genrm.watchdog`). ``evidence`` holds what fired: the signal, its value
    and threshold, the metric names to read and a few examples.
    """

    def __init__(self, evidence: dict[str, Any]):
        self.evidence = dict(evidence)
        signals = ", ".join(str(alarm.get("signal")) for alarm in self.evidence.get("alarms", ()))
        super().__init__(
            f"the reward watchdog suspects reward hacking ({signals or 'see evidence'}): "
            f"{self.evidence.get('summary', '')}".rstrip(": ")
        )

    def __reduce__(self) -> tuple:
        return type(self), (self.evidence,)


def _rebuild_config_error(cls: type[ConfigError], problems: list[str], source: str | None) -> ConfigError:
    return cls(problems, source=source)


def is_fatal(exc: BaseException) -> bool:
    """Whether a judge exception must stop training rather than become ``judge_error`` rewards.

    A misconfiguration fails again on every step, a judge that was shut down cannot answer any
    more, and a judge that stayed unavailable past its grace period will not come back.
    """
    return isinstance(exc, (ConfigError, JudgeClosedError, JudgeUnavailableError))


class Reason(StrEnum):
    """Why a sample got its reward (the ``genrm/<reason>`` metric counts each).

    ``judged``: the judge gave a verdict (the reward is that verdict or its probability).
    ``parse_failure``: the judge replied but no verdict could be read. ``no_answer``: the
    response held no answer to judge (empty, or a marker followed by nothing). ``too_long``:
    the prompt could not fit the judge's context even with the answer shortened (an over-long
    answer is cut to ``prompt.answer.max_chars``, never refused). ``judge_error``: the engine failed (timeout, dead worker past its restarts).
    ``missing_ground_truth``: no reference answer in the metadata. ``bad_input``: the sample was
    malformed (no assistant message, content not text, metadata not a dict, ...).
    ``incomplete_group`` (``reward.mode: pairwise_group``): the sample could not be ranked within
    a whole group (no other response of its group was judged with it, or, with ``group_size``,
    its group was still short when its wait ended, or it came after that); it is masked.
    ``missing_rubric`` (``reward.mode: rubric``): no rubric items for the sample. ``hedged``:
    the response states more distinct final values than the reference holds (``\\boxed{41}
    \\boxed{42}``, ``41 or 42``); it is not judged. Every reason but ``judged`` gives reward 0.
    """

    JUDGED = "judged"
    PARSE_FAILURE = "parse_failure"
    NO_ANSWER = "no_answer"
    TOO_LONG = "too_long"
    JUDGE_ERROR = "judge_error"
    MISSING_GROUND_TRUTH = "missing_ground_truth"
    BAD_INPUT = "bad_input"
    INCOMPLETE_GROUP = "incomplete_group"
    MISSING_RUBRIC = "missing_rubric"
    HEDGED = "hedged"


PROMPT_TOO_LONG = "prompt_too_long"
"""Engine error: the prompt cannot fit the judge's context even shortened (sample: ``too_long``)."""

TIMEOUT = "timeout"
"""Engine error: the call passed its deadline (sample: ``judge_error``)."""

ENGINE_ERROR = "engine_error"
"""Engine error: the engine failed without a more precise code (sample: ``judge_error``; the
judge service answers it with a 500)."""
