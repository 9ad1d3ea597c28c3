"""Stand-in judges whose verdict is a known function of the prompt, for the reward-mode tests.

:class:`RuleJudge` applies a rule to the last user message of each request and answers with the
rule's reply, as text (``generate``) or as label probabilities (``score``: the rule's label gets
``confidence``, the others share the rest). It records every prompt it was shown.

The rules read tagged values: a response or reference holds ``ans-<n>`` (e.g. ``ans-7``), a
rubric criterion names a keyword as ``kw:<word>``. Everything else in the prompt is ignored, so
the rules do not depend on the wording or the delimiters of the templates.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence

from nemo_genrm.judges.base import Generation, Judge, JudgeRequest, JudgeStats, LabelScores, RequestLike

__all__ = [
    "RuleJudge",
    "first_at_least_second",
    "keyword_met",
    "larger_wins",
    "position_biased",
    "same_value",
    "tagged_values",
]

_TAG = re.compile(r"ans-(\d+)")
_KEYWORD = re.compile(r"kw:(\w+)")


def tagged_values(text: str) -> list[int]:
    """The ``ans-<n>`` values in ``text``, in order."""
    return [int(n) for n in _TAG.findall(text)]


def larger_wins(text: str) -> str:
    """Pairwise: the response with the larger value wins; equal values go to the first shown."""
    a, b = tagged_values(text)[-2:]
    return "[[B]]" if b > a else "[[A]]"


def position_biased(text: str) -> str:
    """Pairwise: always the first response shown (pure position bias)."""
    return "[[A]]"


def same_value(text: str) -> str:
    """Reference: ``1`` when the reference and the candidate hold the same value."""
    a, b = tagged_values(text)[-2:]
    return "1" if a == b else "0"


def first_at_least_second(text: str) -> str:
    """Reference, order-dependent: ``1`` when the first value shown is at least the second."""
    a, b = tagged_values(text)[-2:]
    return "1" if a >= b else "0"


def keyword_met(text: str) -> str:
    """Rubric: ``1`` when the criterion's ``kw:<word>`` appears in the response as ``<word>``."""
    found = _KEYWORD.findall(text)
    if not found:
        return "0"
    word = found[-1]
    return "1" if len(re.findall(rf"(?<!kw:)\b{re.escape(word)}\b", text)) > 0 else "0"


class RuleJudge(Judge):
    """A judge answering ``rule(last user message)`` (see the module docstring).

    Args:
        rule: Prompt text -> reply text.
        confidence: Probability ``score`` gives the rule's reply among the labels.
        fail_when: Prompt text -> True for the requests that come back as engine errors.
    """

    def __init__(
        self,
        rule: Callable[[str], str],
        *,
        confidence: float = 0.9,
        fail_when: Callable[[str], bool] | None = None,
    ) -> None:
        self.rule, self.confidence, self.fail_when = rule, confidence, fail_when
        self.seen: list[str] = []
        self._stats = JudgeStats()
        self._lock = threading.Lock()

    def _texts(self, batch: Sequence[RequestLike]) -> list[str]:
        texts = [JudgeRequest.of(item).messages[-1]["content"] for item in batch]
        with self._lock:
            self.seen.extend(texts)
        return texts

    def _failed(self, text: str) -> bool:
        return self.fail_when is not None and self.fail_when(text)

    def generate(self, batch: Sequence[RequestLike]) -> list[Generation]:
        texts = self._texts(batch)
        with self._lock:
            self._stats.generate_calls += 1
            self._stats.prompts_generated += len(texts)
        return [
            Generation(None, error="stand_in_failure") if self._failed(t) else Generation(self.rule(t)) for t in texts
        ]

    def score(self, batch: Sequence[RequestLike], labels: Sequence[str]) -> list[LabelScores]:
        texts = self._texts(batch)
        with self._lock:
            self._stats.score_calls += 1
            self._stats.prompts_scored += len(texts)
        out = []
        for text in texts:
            if self._failed(text):
                out.append(LabelScores(None, error="stand_in_failure"))
                continue
            reply = self.rule(text)
            rest = (1.0 - self.confidence) / max(1, len(labels) - 1)
            out.append(LabelScores({label: self.confidence if label == reply else rest for label in labels}))
        return out

    def sleep(self) -> None:
        pass

    def wake(self) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def stats(self) -> JudgeStats:
        with self._lock:
            return JudgeStats(**{k: v for k, v in vars(self._stats).items() if k != "extra"})

    def reset_stats(self) -> None:
        with self._lock:
            self._stats = JudgeStats()
