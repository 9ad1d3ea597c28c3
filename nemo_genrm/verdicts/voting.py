"""Majority vote over several verdicts: one rule for judge ensembles and voting rewards.

A vote is any hashable verdict (``"A"``, ``"B"``, ``1``, ``0``) or ``None`` for a judge that gave
no verdict. ``None`` is a vote like the others, as in reward-bench's ensembles (PoLL), where a
judge's ``"error"`` enters the count: when failures outnumber every verdict, the majority is no
verdict.

Ties between the most frequent votes are resolved by ``ties``:

- ``reference``: reward-bench's rule, ``max(set(votes), key=votes.count)`` in
  ``scripts/run_generative.py``: the first most-voted value in Python's set order. For string
  verdicts that order follows the interpreter's string hashing, which is randomised per process
  unless ``PYTHONHASHSEED`` is fixed, so a tie there can go either way from one run to the
  next; here it goes the way the reference's expression goes in the same process.
- ``abstain``: no verdict (``None``) on a tie; deterministic, for rewards.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

TieRule = Literal["reference", "abstain"]
TIE_RULES: tuple[str, ...] = ("reference", "abstain")
REFERENCE_ERROR = "error"  # reward-bench's vote for a judge that gave no verdict


@dataclass(frozen=True)
class Majority:
    """The outcome of one vote.

    Attributes:
        verdict: The winning vote (``None``: no verdict won, or a tie under ``abstain``).
        votes: How many votes were cast.
        top: How many votes the most frequent value got.
        tie: Several values shared the top count.
    """

    verdict: Hashable | None
    votes: int
    top: int
    tie: bool

    @property
    def agreement(self) -> float:
        """Share of the votes that went to the most frequent value (1.0: unanimous)."""
        return self.top / self.votes


def majority(votes: Sequence[Hashable | None], ties: TieRule = "abstain") -> Majority:
    """The majority of ``votes``.

    Args:
        votes: One verdict per judge or sample; ``None`` for no verdict.
        ties: How a tie between the most frequent values is resolved (see the module docstring).

    Returns:
        The :class:`Majority`.

    Raises:
        ValueError: No votes, or an unknown tie rule.
    """
    if not votes:
        raise ValueError("majority of no votes")
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}, got {ties!r}")
    counts = Counter(votes)
    top = max(counts.values())
    leaders = [value for value, count in counts.items() if count == top]
    if len(leaders) == 1:
        return Majority(leaders[0], len(votes), top, tie=False)
    if ties == "abstain":
        return Majority(None, len(votes), top, tie=True)
    # reward-bench's expression, on its own vote values (a failed judge votes the string "error").
    as_reference = [REFERENCE_ERROR if v is None else v for v in votes]
    winner = max(set(as_reference), key=as_reference.count)
    return Majority(None if winner == REFERENCE_ERROR else winner, len(votes), top, tie=True)
