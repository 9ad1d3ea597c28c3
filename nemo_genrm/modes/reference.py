"""``reward.mode: reference``: the answer against the reference, once or more.

Plain reference mode (the default) is one vote of one judge: one prompt per distinct (question,
reference, answer) (``reward.dedup``), its verdict the reward (``reward.kind: probability``: the
positive label's probability). ``reward.votes`` and ``reward.judges`` put each prompt to a vote
(:mod:`nemo_genrm.modes.ballot`). ``swap: true`` judges each distinct (question,
reference, answer) twice: as configured, and with the answer in the reference's place and the
reference in the answer's (the answer is neutralised in either place). The verdict is positive only
when both orders say so; orders that disagree give 0 and count in ``swap/disagreements``.

``reward.verifier`` puts a value-level verifier beside the judge (:mod:`nemo_genrm.verifier`): it
reads the bare value the response states (``PreparedSample.value``) against the reference and
decides ``equal``, ``different`` or ``undecided``:

- ``rule_first``: a decided sample gets the verifier's verdict (1 or 0) and no judge prompt; the
  judge is asked only what the verifier cannot decide, and whatever the response says after its
  final value (``\\boxed{42} I mistyped; I meant 41``): the verifier reads the value alone, so
  an ``equal`` there is the judge's to confirm (the lower of the two, as under ``both``);
- ``both``: every sample is judged as without a verifier, and the reward is the lower of the two
  (a ``different`` value makes it 0 whatever the judge said; ``equal`` or ``undecided`` leave the
  judge's). A judge that failed stays a failure.

Counters: ``swap/pairs`` (samples judged in both orders), ``swap/disagreements``; with a
verifier ``verifier/checked`` (samples it was asked about), ``verifier/equal``,
``verifier/different``, ``verifier/undecided`` and ``verifier/undecided/<side>`` (the side it
could not read: ``reference`` or ``answer``), ``verifier/disagreements`` (judged samples where
the judge's verdict differs from a decided verifier), under ``both`` ``verifier/vetoes`` (of
those, the judge said 1 and the value differs: the reward was lowered) and under ``rule_first``
``verifier/words_after`` (equal values the judge was asked about for the words after them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from nemo_genrm.judges.base import JudgeRequest
from nemo_genrm.modes.ballot import Ballot, Panel
from nemo_genrm.modes.base import Ask, Counters, Mode
from nemo_genrm.prompts import PromptBuilder
from nemo_genrm.samples.inputs import PreparedSample
from nemo_genrm.samples.types import JUDGED, SampleResult
from nemo_genrm.verifier import UNDECIDED_WHYS, Check, Decision, ValueVerifier

VERIFIER_SETTINGS = ("none", "rule_first", "both")
"""``reward.verifier``: no verifier, the verifier first (the judge asked only when it cannot
decide), or both (the lower of the two)."""


class ReferenceMode(Mode):
    """Reference mode: one vote, or majority votes, in one order or both.

    Args:
        builder: The environment's prompt builder (template, neutralisation).
        panel: The voting judges and how they vote (binary labels and parser).
        swap: Also judge with answer and reference swapped.
        dedup: Judge identical (question, reference, answer) once.
        probability: Reward P(positive) (mean over votes, both orders) instead of the verdict.
        verifier: ``reward.verifier`` (:data:`VERIFIER_SETTINGS`).
    """

    name = "reference"
    needs_reference = True

    def __init__(
        self,
        builder: PromptBuilder,
        panel: Panel,
        *,
        swap: bool,
        dedup: bool,
        probability: bool,
        verifier: str = "none",
    ) -> None:
        if verifier not in VERIFIER_SETTINGS:
            raise ValueError(f"verifier must be one of {VERIFIER_SETTINGS}, got {verifier!r}")
        self._builder, self._panel, self._swap = builder, panel, swap
        self._dedup, self._probability = dedup, probability
        self._setting = verifier
        self._verifier = ValueVerifier() if verifier != "none" else None

    def _requests(self, sample: PreparedSample) -> list[JudgeRequest]:
        question, reference = sample.question, sample.reference
        prompt = self._builder.build(question=question, reference=reference, candidate=sample.answer or "")
        requests = [prompt.request]
        if self._swap:
            # The answer as placed (neutralised) goes in the reference slot; it stays the part
            # an engine may shorten.
            swapped = self._builder.build(question=question, reference=prompt.candidate, candidate=reference)
            requests.append(JudgeRequest(swapped.messages, shrinkable=prompt.candidate or None))
        return requests

    def fixed_request(self) -> JudgeRequest:
        """See :meth:`Mode.fixed_request`."""
        return self._builder.build(question="", reference="", candidate="").request

    def judge(
        self,
        samples: list[PreparedSample],
        metas: list[Any],
        ask: Ask,
        counters: Counters,
        groups: Sequence[Any] | None = None,
    ) -> list[SampleResult]:
        """See :meth:`Mode.judge` (``groups`` is not read: each sample is judged on its own)."""
        checks = self._checks(samples, counters)
        slots: list[int | None] = []
        requests: list[JudgeRequest] = []
        seen: dict[tuple[str, str, str], int] = {}
        per_sample = 2 if self._swap else 1
        if self._swap:
            counters.declare("swap/pairs", "swap/disagreements")
        for sample, check in zip(samples, checks, strict=True):
            if sample.reason is not None or self._decides_alone(sample, check):
                slots.append(None)
            elif self._dedup and sample.key in seen:
                slots.append(seen[sample.key])
            else:
                seen[sample.key] = len(requests)
                slots.append(len(requests))
                requests.extend(self._requests(sample))
        ballots = self._panel.cast(requests, ask, counters)
        results: list[SampleResult] = []
        decided: dict[int, SampleResult] = {}
        for sample, slot, check in zip(samples, slots, checks, strict=True):
            if sample.reason is not None:
                results.append(sample.result())
            elif slot is None:  # rule_first: the verifier decided
                results.append(_verified(check))
            else:
                if slot not in decided:
                    decided[slot] = self._result(ballots[slot : slot + per_sample], counters)
                results.append(self._with_check(decided[slot], check, counters))
        return results

    def _decides_alone(self, sample: PreparedSample, check: Check | None) -> bool:
        """Whether the verifier's decision is the sample's reward with no judge asked (``rule_first``):
        a ``different`` value, or an ``equal`` one the response says nothing more after."""
        if self._setting != "rule_first" or check is None or not check.decided:
            return False
        return check.decision is Decision.DIFFERENT or not sample.words_after

    def _checks(self, samples: list[PreparedSample], counters: Counters) -> list[Check | None]:
        """The verifier's decision per sample sent (``None``: no verifier, or not sent)."""
        if self._verifier is None:
            return [None] * len(samples)
        names = ["checked", *(d.value for d in Decision), *(f"undecided/{why}" for why in UNDECIDED_WHYS)]
        if self._setting == "both":
            names += ["disagreements", "vetoes"]
        elif self._setting == "rule_first":
            names += ["disagreements", "words_after"]
        counters.declare(*(f"verifier/{name}" for name in names))
        checks: list[Check | None] = []
        for sample in samples:
            if sample.reason is not None:
                checks.append(None)
                continue
            check = self._verifier.check(sample.reference, sample.value, sample.question)
            counters.bump("verifier/checked")
            counters.bump(f"verifier/{check.decision.value}")
            if check.why is not None:
                counters.bump(f"verifier/undecided/{check.why}")
            if self._setting == "rule_first" and check.decision is Decision.EQUAL and sample.words_after:
                counters.bump("verifier/words_after")
            checks.append(check)
        return checks

    def _with_check(self, result: SampleResult, check: Check | None, counters: Counters) -> SampleResult:
        """A judged sample's result beside the verifier's decision: the lower of the two (a
        judge failure stays one). Under ``rule_first`` only an ``equal`` with words after it is
        judged, so the judge's verdict stands."""
        if check is None:
            return result
        info = {**result.info, "verifier": check.decision.value}
        if self._setting == "none" or result.reason != JUDGED or result.masked or not check.decided:
            return dataclasses.replace(result, info=info)
        equal = check.decision is Decision.EQUAL
        if result.verdict != int(equal):
            counters.bump("verifier/disagreements")
        if equal:
            return dataclasses.replace(result, info=info)
        counters.bump("verifier/vetoes", float(result.verdict == 1))
        return dataclasses.replace(result, reward=0.0, verdict=0, info=info)

    def _result(self, ballots: list[Ballot], counters: Counters) -> SampleResult:
        """One sample's result from its ballots (one, or one per order with ``swap``).

        A failed ballot fails the sample. A tie is undecided: the sample is masked (with the
        reason of the failed votes inside the tie, if any), unless another order said no, which
        decides a verdict of 0 whatever the tie would have said.
        """
        failed = [b for b in ballots if not b.judged]
        if failed:
            return SampleResult(failed[0].reason, why=failed[0].why)
        info: dict[str, Any] = {}
        if len(ballots) > 1 or self._panel.polls:
            info["agreement"] = min(b.agreement for b in ballots)
        ties = [b for b in ballots if b.tie]
        if ties and not any(b.value != 1 for b in ballots if b.decided):
            return SampleResult(ties[0].undecided_reason, masked=True, info={**info, "undecided": True})
        positive = [b.value == 1 for b in ballots]
        if self._swap and not ties:
            counters.bump("swap/pairs")
            if positive[0] != positive[1]:
                counters.bump("swap/disagreements")
        verdict = int(all(positive))
        probs = [b.prob for b in ballots if b.prob is not None]
        prob = sum(probs) / len(probs) if len(probs) == len(ballots) else None
        reward = prob if self._probability and prob is not None else float(verdict)
        if self._swap:
            info["orders_agree"] = positive[0] == positive[1]
        return SampleResult(JUDGED, reward=reward, verdict=verdict, prob=prob, info=info)


def _verified(check: Check | None) -> SampleResult:
    """The result of a sample the verifier decided on its own (``rule_first``)."""
    if check is None or not check.decided:
        raise RuntimeError("a sample left out of the judge call has no verifier decision")
    equal = int(check.decision is Decision.EQUAL)
    return SampleResult(JUDGED, float(equal), equal, info={"verifier": check.decision.value})
