"""``reward.mode: reference``: the answer against the reference, once or more.

Plain reference mode (the default) is one vote of one judge: one prompt per distinct (question,
reference, answer) (``reward.dedup``), its verdict the reward (``reward.kind: probability``: the
positive label's probability). ``reward.votes`` and ``reward.judges`` put each prompt to a vote
(:mod:`nemo_genrm.modes.ballot`). ``swap: true`` judges each distinct (question,
reference, answer) twice: as configured, and with the answer in the reference's place and the
reference in the answer's (the answer is neutralised in either place). The verdict is positive only
when both orders say so; orders that disagree give 0 and count in ``swap/disagreements``.

Counters: ``swap/pairs`` (samples judged in both orders), ``swap/disagreements``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nemo_genrm.samples.inputs import PreparedSample
from nemo_genrm.samples.types import JUDGE_ERROR, JUDGED, SampleResult
from nemo_genrm.judges.base import JudgeRequest
from nemo_genrm.modes.ballot import Ballot, Panel
from nemo_genrm.modes.base import Ask, Counters, Mode
from nemo_genrm.prompts import PromptBuilder


class ReferenceMode(Mode):
    """Reference mode: one vote, or majority votes, in one order or both.

    Args:
        builder: The environment's prompt builder (template, neutralisation).
        panel: The voting judges and how they vote (binary labels and parser).
        swap: Also judge with answer and reference swapped.
        dedup: Judge identical (question, reference, answer) once.
        probability: Reward P(positive) (mean over votes, both orders) instead of the verdict.
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
    ) -> None:
        self._builder, self._panel, self._swap = builder, panel, swap
        self._dedup, self._probability = dedup, probability

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
        slots: list[int | None] = []
        requests: list[JudgeRequest] = []
        seen: dict[tuple[str, str, str], int] = {}
        per_sample = 2 if self._swap else 1
        if self._swap:
            counters.declare("swap/pairs", "swap/disagreements")
        for sample in samples:
            if sample.reason is not None:
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
        for sample, slot in zip(samples, slots, strict=True):
            if slot is None:
                results.append(SampleResult(sample.reason or JUDGE_ERROR))
                continue
            if slot not in decided:
                decided[slot] = self._result(ballots[slot : slot + per_sample], counters)
            results.append(decided[slot])
        return results

    def _result(self, ballots: list[Ballot], counters: Counters) -> SampleResult:
        failed = [b for b in ballots if not b.judged]
        if failed:
            return SampleResult(failed[0].reason, why=failed[0].why)
        positive = [b.value == 1 for b in ballots]
        if self._swap:
            counters.bump("swap/pairs")
            if positive[0] != positive[1]:
                counters.bump("swap/disagreements")
        verdict = int(all(positive))
        probs = [b.prob for b in ballots if b.prob is not None]
        prob = sum(probs) / len(probs) if len(probs) == len(ballots) else None
        reward = prob if self._probability and prob is not None else float(verdict)
        info: dict[str, Any] = {}
        if len(ballots) > 1 or self._panel.polls:
            info["agreement"] = min(b.agreement for b in ballots)
        if self._swap:
            info["orders_agree"] = positive[0] == positive[1]
        return SampleResult(JUDGED, reward=reward, verdict=verdict, prob=prob, info=info)
