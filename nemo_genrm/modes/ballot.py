"""Voting, an option of every mode: ``reward.votes`` samples from each of the voting judges.

Every request is sent ``votes`` times to each judge (``judge`` and ``reward.judges``), in one
batched call per judge, each time as another sample (``JudgeRequest.vote``, which engines sample
with seed ``sampling.seed + vote``); the majority of the votes is the request's verdict, by the rule the
RewardBench ensembles use (:func:`nemo_genrm.verdicts.voting.majority`, ties abstain). A judge that gave
no verdict votes ``None``: when failures outnumber every verdict, the request failed, with the
most frequent failure reason. A tie between verdicts (``tie``, e.g. a 1, a 0 and a failed vote)
is no verdict: it is undecided, and no mode trains on it (reference: the sample is masked;
pairwise: the pair is left out; rubric: the item is left out; a sample left with nothing decided
is masked with its reason).

Counters: ``votes/requests`` (requests put to more than one vote), ``votes/agreement_sum`` (their
share of votes for the winner, summed) and ``votes/ties``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass

from nemo_genrm.judges.base import JudgeRequest
from nemo_genrm.modes.base import Ask, Counters, Reader, Vote, worst_reason
from nemo_genrm.samples.types import JUDGED
from nemo_genrm.verdicts.voting import majority


@dataclass(frozen=True)
class Ballot:
    """The outcome of one request's vote.

    Attributes:
        reason: ``judged`` when a verdict (or a tie) won, else why the request failed.
        value: The winning vote; ``None`` when failed or tied.
        tie: The top verdicts drew (``reason`` is ``judged``, ``value`` is ``None``).
        prob: Mean P(first label) over the votes read from logprobs, else ``None``.
        agreement: Share of the votes that went to the winner.
        why: For a failed parse, why no verdict could be read (the most frequent among its votes).
        failure: For a tie that failed votes are part of, their most frequent reason (a failed
            vote could have broken it), else ``None``.
    """

    reason: str
    value: Hashable | None = None
    tie: bool = False
    prob: float | None = None
    agreement: float = 1.0
    why: str | None = None
    failure: str | None = None

    @property
    def judged(self) -> bool:
        """Whether a verdict (or a tie) came out."""
        return self.reason == JUDGED

    @property
    def decided(self) -> bool:
        """Whether a verdict came out: judged, and no tie."""
        return self.reason == JUDGED and not self.tie

    @property
    def undecided_reason(self) -> str:
        """Why a ballot gave no verdict: its failure, the failure inside its tie, else ``judged``
        (an even split of verdicts)."""
        if not self.judged:
            return self.reason
        return self.failure or JUDGED


@dataclass(frozen=True)
class Panel:
    """Who judges each request of a mode, and how their replies are read.

    Attributes:
        reader: How a reply becomes a vote.
        votes: Samples per judge and request (``reward.votes``).
        members: Voting judges (1: ``judge`` alone; more with ``reward.judges``).
    """

    reader: Reader
    votes: int = 1
    members: int = 1

    @property
    def polls(self) -> bool:
        """Whether each request gets more than one vote."""
        return self.votes * self.members > 1

    def cast(self, requests: list[JudgeRequest], ask: Ask, counters: Counters) -> list[Ballot]:
        """Put every request to the vote; one ballot per request, in order.

        Args:
            requests: The distinct prompts.
            ask: The batched judge call.
            counters: Where the voting counters go.

        Returns:
            The ballots.
        """
        if self.polls:
            counters.declare("votes/requests", "votes/agreement_sum", "votes/ties")
        if not requests:
            return []
        polled: list[list[Vote]] = [[] for _ in requests]
        # Each vote is its own draw: its own seed (seed + vote), never a copy of the first.
        expanded = [dataclasses.replace(r, vote=v) if v else r for r in requests for v in range(self.votes)]
        for member in range(self.members):
            replies = ask(member, expanded, self.reader)
            for index in range(len(requests)):
                polled[index].extend(replies[index * self.votes : (index + 1) * self.votes])
        return [_count(ballot, counters) for ballot in polled]


def _count(polled: list[Vote], counters: Counters) -> Ballot:
    probs = [v.prob for v in polled if v.prob is not None]
    prob = sum(probs) / len(probs) if probs else None
    if len(polled) == 1:
        vote = polled[0]
        return Ballot(vote.reason, vote.value, prob=vote.prob, why=vote.why)
    result = majority([v.value if v.reason == JUDGED else None for v in polled], ties="abstain")
    counters.bump("votes/requests")
    counters.bump("votes/agreement_sum", result.agreement)
    if result.tie:
        counters.bump("votes/ties")
        failed = [v.reason for v in polled if v.reason != JUDGED]
        failure = worst_reason(failed) if failed else None
        return Ballot(JUDGED, None, tie=True, prob=prob, agreement=result.agreement, failure=failure)
    if result.verdict is None:  # failures outvoted every verdict
        reason = worst_reason(v.reason for v in polled if v.reason != JUDGED)
        whys = Counter(v.why for v in polled if v.reason == reason and v.why is not None)
        why = whys.most_common(1)[0][0] if whys else None
        return Ballot(reason, agreement=result.agreement, why=why)
    return Ballot(JUDGED, result.verdict, prob=prob, agreement=result.agreement)
