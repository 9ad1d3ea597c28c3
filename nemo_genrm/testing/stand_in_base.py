"""Stand-in judges for tests: the judge interface without an engine behind it."""

from __future__ import annotations

from collections.abc import Sequence

from nemo_genrm.judges.base import Judge, JudgeStats, LabelScores, RequestLike

__all__ = ["GenerateOnlyJudge"]


class GenerateOnlyJudge(Judge):
    """Base for a stand-in judge that only writes replies: subclasses define ``generate``.

    ``score`` is not offered (verdicts from logprobs need a model) and the counters stay empty.
    """

    def score(self, batch: Sequence[RequestLike], labels: Sequence[str]) -> list[LabelScores]:
        raise NotImplementedError(f"{type(self).__name__} writes replies only; it has no label scores")

    def stats(self) -> JudgeStats:
        return JudgeStats()

    def reset_stats(self) -> None:
        pass
