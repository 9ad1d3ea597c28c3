"""What every reward mode shares: reading judge replies as votes, the per-sample result, the tally.

A mode turns a judge call's prepared samples into judge requests, has them judged through an
:data:`Ask` (the environment's batched judge call, with wake/sleep and counters), and turns the
verdicts into one :class:`~nemo_genrm.samples.types.SampleResult` per sample. Verdicts are read as in reference mode: from
the reply text with a :class:`~nemo_genrm.verdicts.VerdictParser`, or from the label logprobs
when the judge's ``verdict_from`` is ``logprobs``.
"""

from __future__ import annotations

import abc
import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from nemo_genrm.guard.injection import Fenced, fence, keyed_nonce, neutralise
from nemo_genrm.judges.base import Generation, Judge, JudgeRequest
from nemo_genrm.samples.inputs import PreparedSample
from nemo_genrm.samples.types import (
    JUDGE_ERROR,
    JUDGED,
    NO_LABEL_PROBS,
    PARSE_FAILURE,
    TOO_LONG,
    SampleResult,
)
from nemo_genrm.verdicts import TRUNCATED, VerdictParser

_LENGTH_ERRORS = frozenset({"prompt_too_long"})


@dataclass(frozen=True)
class Reader:
    """How one kind of judge reply becomes a vote.

    Attributes:
        labels: The two labels scored from logprobs, first the one meaning ``values[0]``.
        values: The vote each label stands for (``(1, 0)`` or ``("A", "B")``).
        parser: Reads a vote from reply text (its values are ``values``).
    """

    labels: tuple[str, str]
    values: tuple[Hashable, Hashable]
    parser: VerdictParser


@dataclass(frozen=True)
class Vote:
    """One judge reply read as a vote.

    Attributes:
        reason: ``judged``, ``parse_failure``, ``too_long`` or ``judge_error``.
        value: The vote (one of the reader's values) when judged, else ``None``.
        prob: P(first label) when read from logprobs, else ``None``.
        why: For a parse failure, why no verdict could be read
            (:data:`~nemo_genrm.samples.types.PARSE_FAILURE_WHYS`).
    """

    reason: str
    value: Hashable | None = None
    prob: float | None = None
    why: str | None = None


Ask = Callable[[int, list[JudgeRequest], Reader], list[Vote]]
"""``ask(member, requests, reader)``: one batched call to voting judge ``member`` (0: ``judge``),
one vote per request, in order; engine failures come back as votes with their reason."""


def read_replies(
    judge: Judge,
    requests: list[JudgeRequest],
    reader: Reader,
    verdict_from: str,
    *,
    max_new_tokens: int | None = None,
) -> list[Vote]:
    """Judge ``requests`` with ``judge`` and read each reply as a vote.

    Args:
        judge: The engine.
        requests: The prompts.
        reader: Labels, values and parser of this kind of prompt.
        verdict_from: ``text`` (generate, then parse) or ``logprobs`` (score the two labels).
        max_new_tokens: The judge's token budget: a reply that used all of it without a verdict
            is a truncated parse failure.

    Returns:
        One vote per request.

    Raises:
        RuntimeError: The engine returned a different number of results.
    """
    if verdict_from == "logprobs":
        scores = judge.score(requests, list(reader.labels))
        _check_count(scores, requests)
        return [_from_probs(s.probs, s.error, reader) for s in scores]
    generations = judge.generate(requests)
    _check_count(generations, requests)
    return [_from_text(g, r.shrinkable, reader, max_new_tokens) for g, r in zip(generations, requests, strict=True)]


def _from_text(generation: Generation, candidate: str | None, reader: Reader, max_new_tokens: int | None) -> Vote:
    if generation.error is not None or generation.text is None:
        return Vote(error_reason(generation.error))
    # A copy of the candidate quoted in the reply is not read (it may hold a verdict).
    verdict = reader.parser.parse(generation.text, candidate=candidate)
    if verdict.value is None:
        out_of_tokens = max_new_tokens is not None and generation.output_tokens >= max_new_tokens
        return Vote(PARSE_FAILURE, why=TRUNCATED if out_of_tokens else verdict.reason)
    return Vote(JUDGED, verdict.value)


def _from_probs(probs: dict[str, float] | None, error: str | None, reader: Reader) -> Vote:
    if error is not None or probs is None:
        return Vote(error_reason(error))
    first, second = (probs.get(label) for label in reader.labels)
    if first is None or second is None or math.isnan(first) or math.isnan(second):
        return Vote(PARSE_FAILURE, why=NO_LABEL_PROBS)
    # The argmax label; an exact tie goes to the second value (for binary verdicts: not positive).
    return Vote(JUDGED, reader.values[0] if first > second else reader.values[1], float(first))


def error_reason(error: str | None) -> str:
    """``too_long`` for a prompt the judge's context cannot hold, else ``judge_error``."""
    return TOO_LONG if error in _LENGTH_ERRORS else JUDGE_ERROR


def _check_count(results: Sequence[Any], requests: Sequence[Any]) -> None:
    if len(results) != len(requests):
        raise RuntimeError(f"judge returned {len(results)} results for {len(requests)} prompts")


def worst_reason(reasons: Iterable[str]) -> str:
    """The reason to report for a sample none of whose judgements succeeded: the most frequent."""
    counts = Counter(reasons)
    return counts.most_common(1)[0][0] if counts else JUDGE_ERROR


class Counters(dict):
    """Mode counters (name -> float) that add up across judge calls."""

    def bump(self, name: str, amount: float = 1.0) -> None:
        """Add ``amount`` to counter ``name``."""
        self[name] = self.get(name, 0.0) + amount

    def declare(self, *names: str) -> None:
        """Start counters at 0, so a mode's metric keys are there in every step."""
        for name in names:
            self.setdefault(name, 0.0)


class Mode(abc.ABC):
    """One reward mode: samples in, judge requests out, verdicts back in, results out.

    ``shows_response``: the judge is shown each whole response (pairwise, rubric), not the
    answer extracted from it (reference); the environment prepares the samples accordingly.
    """

    name: str = ""
    needs_reference: bool = False
    shows_response: bool = False

    @abc.abstractmethod
    def judge(
        self,
        samples: list[PreparedSample],
        metas: list[Any],
        ask: Ask,
        counters: Counters,
        groups: Sequence[Any] | None = None,
    ) -> list[SampleResult]:
        """Judge one judge call's samples (all step calls coalesced into it).

        Args:
            samples: The prepared samples; those with a ``reason`` are not sent.
            metas: Their metadata, same order.
            ask: The batched judge call (see :data:`Ask`).
            counters: Where the mode adds its metric counters.
            groups: Per sample, the GRPO group the environment placed it in
                (:class:`~nemo_genrm.samples.groups.GroupTag`), for the modes that rank within a
                group; ``None``: the samples are one step call's.

        Returns:
            One result per sample, in order.
        """

    @abc.abstractmethod
    def fixed_request(self) -> JudgeRequest:
        """The mode's judge prompt with every field empty (fences included): its fixed part,
        which the start-up check measures against the judge's context."""


@dataclass(frozen=True)
class Presenter:
    """How a mode shows policy text to the judge: neutralised, then fenced.

    The fence's tags carry a nonce keyed on the prompt's fields (``prompt.fence_seed``), so the
    text inside cannot know it and cannot close the fence; a template tells the judge that what
    sits between the tags is data (see :func:`nemo_genrm.guard.injection.fence`).

    Attributes:
        neutral: The neutralisation of :func:`neutraliser`.
        key: The nonce key (:func:`nemo_genrm.guard.injection.nonce_key`).
    """

    neutral: Callable[[str], str]
    key: bytes

    def fenced(self, shown: str, *context: str) -> Fenced:
        """``shown`` (already neutralised) between fence tags whose nonce is keyed on ``context``
        (the prompt's other fields) and ``shown``."""
        return fence(shown, keyed_nonce(self.key, *context, shown))


def neutraliser(prompt_cfg: Any, verdict_cfg: Any, special_tokens: Iterable[str] = ()) -> Callable[[str], str]:
    """The neutralisation :class:`~nemo_genrm.prompts.PromptBuilder` applies to a candidate.

    Policy text shown to the judge in any mode goes through it, so labels, choice markers and
    chat tokens inside a response cannot steer the verdict.
    """
    if not prompt_cfg.neutralise:
        return lambda text: text
    synonyms = [s for words in verdict_cfg.synonyms.values() for s in words]
    options = {
        "labels": (verdict_cfg.positive, verdict_cfg.negative, *synonyms),
        "markers": tuple(verdict_cfg.choice_markers),
        "special_tokens": tuple(special_tokens),
    }
    return lambda text: neutralise(text, **options) if text else text
