"""The majority vote shared by judge ensembles and voting rewards (table-driven)."""

from __future__ import annotations

import pytest

from nemo_genrm.verdicts.voting import REFERENCE_ERROR, majority


@pytest.mark.parametrize(
    ("votes", "verdict", "agreement", "tie"),
    [
        (["A", "A", "B"], "A", 2 / 3, False),  # plain majority
        (["B"], "B", 1.0, False),  # one vote
        ([1, 1, 1, 0, 0], 1, 0.6, False),  # binary verdicts, as a voting reward casts them
        ([None, None, "A"], None, 2 / 3, False),  # failures outvote the verdict: no verdict
        (["A", None, "B"], None, 1 / 3, True),  # three-way tie, abstain
        (["A", "A", "B", "B", None], None, 0.4, True),  # two-way tie among five, abstain
    ],
)
def test_majority_abstain(votes, verdict, agreement, tie) -> None:
    result = majority(votes, ties="abstain")
    assert (result.verdict, result.tie, result.votes) == (verdict, tie, len(votes))
    assert result.agreement == pytest.approx(agreement)


@pytest.mark.parametrize("votes", [["A", None, "B"], ["A", "A", "B", "B", None], ["B", "A"], [None, "A"]])
def test_reference_tie_rule_matches_the_reference_expression(votes) -> None:
    # reward-bench resolves a tie with max(set(votes), key=votes.count) on its own vote values,
    # where a judge without a verdict votes "error"; the pick follows this process's set order.
    as_reference = [REFERENCE_ERROR if v is None else v for v in votes]
    expected = max(set(as_reference), key=as_reference.count)
    result = majority(votes, ties="reference")
    assert result.tie and result.verdict == (None if expected == REFERENCE_ERROR else expected)


def test_no_tie_is_the_same_under_both_rules() -> None:
    assert majority(["A", "B", "B"], ties="reference") == majority(["A", "B", "B"], ties="abstain")


def test_bad_input_raises() -> None:
    with pytest.raises(ValueError, match="no votes"):
        majority([])
    with pytest.raises(ValueError, match="ties must be one of"):
        majority(["A"], ties="coin")  # type: ignore[arg-type]
