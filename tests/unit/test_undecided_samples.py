"""A failure is never scored as a verdict: samples whose reward would rest on no successful judge
answer, or on a tied vote, are masked with their reason, in every mode, through the real
environment with stand-in judges whose replies are known functions of what they are shown."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest

from nemo_genrm.config import ConfigError
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.judges.base import Generation, JudgeRequest, RequestLike
from nemo_genrm.testing.rule_judges import RuleJudge, keyword_met, larger_wins, tagged_values

HTTP = {"backend": "http", "http": {"base_url": "http://stand-in/v1"}}


def _cfg(reward: dict[str, Any], temperature: float = 0.0) -> dict[str, Any]:
    judge = {"model_name": "stand-in", "sampling": {"temperature": temperature}, **HTTP}
    return {"judge": judge, "resources": {"gpus_per_replica": 0}, "reward": reward}


def _logs(answers: Sequence[str], question: str = "Which number is best?") -> list:
    return [[{"role": "user", "content": question}, {"role": "assistant", "content": f"Answer: {a}"}] for a in answers]


def _settled(result) -> list[tuple[float, str, bool]]:
    return [(r, m["genrm"]["reason"], m["genrm"]["masked"]) for r, m in zip(result.rewards.tolist(), result.metadata)]


class _VoteJudge(RuleJudge):
    """Replies by the vote index of each request: ``replies[vote]``, ``None`` for an engine error."""

    def __init__(self, replies: Sequence[str | None]) -> None:
        super().__init__(lambda text: "")
        self.replies = replies

    def generate(self, batch: Sequence[RequestLike]) -> list[Generation]:
        self._texts(batch)
        out = []
        for item in batch:
            reply = self.replies[JudgeRequest.of(item).vote % len(self.replies)]
            out.append(Generation(None, error="stand_in_failure") if reply is None else Generation(reply))
        return out


# --------------------------------------------------------------------------------- pairwise
def test_pairwise_copies_of_a_response_whose_pairs_all_failed_are_masked_not_drawn():
    # Every prompt showing ans-5 fails. Its two copies would draw with each other (0.5, judged)
    # though no judge ever compared them with anything: masked with the failure's reason now.
    judge = RuleJudge(larger_wins, fail_when=lambda text: "ans-5" in text)
    env = GenRMEnvironmentImpl(_cfg({"mode": "pairwise_group"}), judge=judge)
    result = env.step(_logs(["ans-5", "ans-5", "ans-3", "ans-7"]), [{}] * 4)
    # ans-3 and ans-7 met only each other (their pairs with ans-5 failed): 7 wins.
    assert _settled(result) == [
        (0.0, "judge_error", True),
        (0.0, "judge_error", True),
        (0.0, "judged", False),
        (1.0, "judged", False),
    ]
    assert result.metadata[0]["genrm"]["opponents"] == 0 and result.metadata[0]["genrm"]["failed_pairs"] == 2
    metrics = env.last_metrics()
    assert metrics["genrm/masked"] == 2 and metrics["genrm/mean_reward"] == 0.5  # (0 + 1) / 2
    assert metrics["genrm/pairwise/failed_pairs"] == 2


def test_pairwise_response_without_copies_whose_pairs_failed_is_masked():
    judge = RuleJudge(larger_wins, fail_when=lambda text: "ans-5" in text)
    env = GenRMEnvironmentImpl(_cfg({"mode": "pairwise_group"}), judge=judge)
    result = env.step(_logs(["ans-5", "ans-3", "ans-7"]), [{}] * 3)
    assert _settled(result) == [(0.0, "judge_error", True), (0.0, "judged", False), (1.0, "judged", False)]


def test_pairwise_group_of_identical_responses_still_draws():
    # No pair to judge at all: identical responses are equal, a fact rather than a failure.
    env = GenRMEnvironmentImpl(_cfg({"mode": "pairwise_group"}), judge=RuleJudge(larger_wins))
    assert _settled(env.step(_logs(["ans-5"] * 3), [{}] * 3)) == [(0.5, "judged", False)] * 3


# ------------------------------------------------------------------------------------ votes
@pytest.mark.parametrize(
    ("replies", "settled", "undecided"),
    [
        # 1, 0 and a failed vote: a tie resting on a failure -> masked with the failure's reason.
        (["1", "0", None], (0.0, "judge_error", True), True),
        # 1, 1 and a failed vote: a majority -> judged, 1.
        (["1", "1", None], (1.0, "judged", False), False),
        # 0, 0 and a failed vote: a majority -> judged, 0.
        (["0", "0", None], (0.0, "judged", False), False),
        # two failed votes outnumber the verdict: the prompt failed (judge_error, masked as without
        # votes: no verdict stands on a judge answer).
        (["1", None, None], (0.0, "judge_error", True), False),
    ],
)
def test_a_tied_vote_is_undecided_and_masked(replies, settled, undecided):
    env = GenRMEnvironmentImpl(_cfg({"votes": 3, "verifier": "none"}, temperature=0.7), judge=_VoteJudge(replies))
    result = env.step(_logs(["ans-4"]), [{"ground_truth": "ans-4"}])
    assert _settled(result) == [settled]
    assert result.metadata[0]["genrm"].get("undecided", False) is undecided


def test_two_judges_that_split_leave_the_sample_undecided():
    # One vote each, 1 against 0: an even split with no failure -> masked, reason judged.
    member = {"model_name": "member", **HTTP}
    env = GenRMEnvironmentImpl(
        _cfg({"judges": [member], "verifier": "none"}),
        judge=RuleJudge(lambda t: "1"),
        judges=[RuleJudge(lambda t: "0")],
    )
    result = env.step(_logs(["ans-4", "ans-4 again"]), [{"ground_truth": "ans-4"}] * 2)
    assert _settled(result) == [(0.0, "judged", True)] * 2
    assert result.metadata[0]["genrm"]["undecided"] is True and result.metadata[0]["genrm"]["verdict"] is None
    metrics = env.last_metrics()
    assert metrics["genrm/votes/ties"] == 2 and metrics["genrm/masked"] == 2
    assert math.isnan(metrics["genrm/mean_reward"])  # no sample counts


def test_swap_with_one_order_tied_and_the_other_saying_no_is_a_zero():
    # The first judge always says 0; the second says 1 when the first value it is shown is the
    # reference's (ans-4: the order as configured, reference first). So the configured order ties
    # (0 against 1) and the swapped one is a unanimous 0: a decided 0, not an undecided sample.
    member = {"model_name": "member", **HTTP}
    reference_shown_first = lambda text: "1" if tagged_values(text)[-2] == 4 else "0"  # noqa: E731
    env = GenRMEnvironmentImpl(
        _cfg({"judges": [member], "swap": True, "verifier": "none"}),
        judge=RuleJudge(lambda text: "0"),
        judges=[RuleJudge(reference_shown_first)],
    )
    result = env.step(_logs(["ans-9"]), [{"ground_truth": "ans-4"}])
    assert _settled(result) == [(0.0, "judged", False)] and result.metadata[0]["genrm"]["verdict"] == 0
    assert env.last_metrics()["genrm/votes/ties"] == 1


# ----------------------------------------------------------------------------------- rubric
@pytest.mark.parametrize("weight", [math.inf, -math.inf, math.nan, 0, -1])
def test_a_rubric_weight_that_is_not_finite_and_positive_is_bad_input(weight):
    env = GenRMEnvironmentImpl(_cfg({"mode": "rubric"}), judge=RuleJudge(keyword_met))
    items = [{"criterion": "kw:alpha", "weight": weight}, "kw:beta"]
    result = env.step(_logs(["alpha beta", "alpha"]), [{"rubric": items}, {"rubric": ["kw:alpha", "kw:beta"]}])
    assert _settled(result) == [(0.0, "bad_input", False), (0.5, "judged", False)]
    assert all(not math.isnan(r) for r in result.rewards.tolist())


@pytest.mark.parametrize("weight", [".inf", ".nan", "-2"])
def test_a_rubric_file_with_such_a_weight_is_refused_at_start_up(tmp_path, weight):
    path = tmp_path / "rubric.yaml"
    path.write_text(f"'*':\n  - criterion: kw:alpha\n    weight: {weight}\n")
    message = r"reward.rubric.file .*items of '\*' must be a list of criteria.*finite number > 0"
    with pytest.raises(ConfigError, match=message):
        GenRMEnvironmentImpl(_cfg({"mode": "rubric", "rubric": {"file": str(path)}}), judge=RuleJudge(keyword_met))


def test_a_rubric_sample_none_of_whose_items_was_decided_is_masked():
    judge = RuleJudge(keyword_met, fail_when=lambda text: "kw:broken" in text)
    env = GenRMEnvironmentImpl(_cfg({"mode": "rubric"}), judge=judge)
    result = env.step(_logs(["alpha", "alpha"]), [{"rubric": ["kw:broken"]}, {"rubric": ["kw:alpha", "kw:broken"]}])
    assert _settled(result) == [(0.0, "judge_error", True), (1.0, "judged", False)]


def test_a_tied_rubric_item_is_left_out_of_the_share():
    member = {"model_name": "member", **HTTP}
    yes_to_alpha = lambda text: "1" if "kw:alpha" in text else keyword_met(text)  # noqa: E731
    env = GenRMEnvironmentImpl(
        _cfg({"mode": "rubric", "judges": [member]}), judge=RuleJudge(keyword_met), judges=[RuleJudge(yes_to_alpha)]
    )
    # kw:alpha on "beta": 0 and 1, a tie, left out; kw:beta: both say met. Share: 1/1.
    result = env.step(_logs(["beta"]), [{"rubric": ["kw:alpha", "kw:beta"]}])
    assert _settled(result) == [(1.0, "judged", False)]
    assert [item["met"] for item in result.metadata[0]["genrm"]["rubric"]] == [None, True]
