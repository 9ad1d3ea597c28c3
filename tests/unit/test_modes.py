"""Reward modes end to end through GenRMEnvironmentImpl, with stand-in judges whose verdict is a
known function of the prompt (nemo_genrm.testing.rule_judges): pairwise_group, rubric, votes, swap."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from nemo_genrm.config import ConfigError
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.modes.reference import ReferenceMode
from nemo_genrm.samples.types import SampleResult, sample_results
from nemo_genrm.testing.rule_judges import (
    RuleJudge,
    first_at_least_second,
    keyword_met,
    larger_wins,
    position_biased,
    same_value,
    tagged_values,
)

HTTP = {"backend": "http", "http": {"base_url": "http://stand-in/v1", "supports_logprobs": True}}


def _cfg(reward: dict[str, Any], *, verdict_from: str = "text", temperature: float = 0.0, **sections: Any) -> dict:
    judge = {"model_name": "stand-in", "verdict_from": verdict_from, "sampling": {"temperature": temperature}, **HTTP}
    return {"judge": judge, "resources": {"gpus_per_replica": 0}, "reward": reward, **sections}


def _member(temperature: float = 0.0, verdict_from: str = "text") -> dict:
    return {"model_name": "member", "verdict_from": verdict_from, "sampling": {"temperature": temperature}, **HTTP}


def _log(value: int | str, question: str = "Which number is best?") -> list[dict[str, str]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": f"Thinking. Answer: ans-{value}"}]


def _step(env: GenRMEnvironmentImpl, values: list, metas: list | None = None, question: str = "Which number is best?"):
    logs = [_log(v, question) for v in values]
    return env.step(logs, metas if metas is not None else [{} for _ in values])


def _win_rates(values: list[int]) -> list[float]:
    """The exact reward of larger_wins over all pairs: wins + draws/2 over the other responses."""
    out = []
    for i, v in enumerate(values):
        others = [w for j, w in enumerate(values) if j != i]
        out.append(sum(1.0 if v > w else 0.5 if v == w else 0.0 for w in others) / len(others))
    return out


# ------------------------------------------------------------------------------ pairwise
@pytest.mark.parametrize("verdict_from", ["text", "logprobs"])
def test_pairwise_reward_is_the_win_rate_judged_in_both_orders(verdict_from):
    judge = RuleJudge(larger_wins)
    env = GenRMEnvironmentImpl(_cfg({"mode": "pairwise_group"}, verdict_from=verdict_from), judge=judge)
    values = [3, 1, 4, 1, 5, 9]
    result = _step(env, values)

    assert result.rewards.tolist() == pytest.approx(_win_rates(values))
    assert [m["genrm"]["reason"] for m in result.metadata] == ["judged"] * 6
    # 5 distinct responses -> 10 pairs, each in both orders; the two 1s never meet.
    shown = [tuple(tagged_values(text)[-2:]) for text in judge.seen]
    assert len(shown) == 20 and len(set(shown)) == 20
    assert all((b, a) in shown for a, b in shown)
    assert (1, 1) not in shown
    metrics = env.last_metrics()
    assert metrics["genrm/judge_prompts"] == 20
    assert metrics["genrm/pairwise/pairs"] == 10 and metrics["genrm/pairwise/identical_pairs"] == 1
    assert metrics["genrm/pairwise/order_disagreement_rate"] == 0.0
    assert metrics["genrm/mean_reward"] == pytest.approx(0.5)  # a group's win rates average to 1/2


def test_pairwise_position_bias_cancels_to_draws():
    env = GenRMEnvironmentImpl(_cfg({"mode": "pairwise_group"}), judge=RuleJudge(position_biased))
    result = _step(env, [1, 2, 3, 4])
    assert result.rewards.tolist() == [0.5] * 4
    metrics = env.last_metrics()
    assert metrics["genrm/pairwise/order_disagreements"] == 6
    assert metrics["genrm/pairwise/order_disagreement_rate"] == 1.0


def test_pairwise_identical_group_draws_without_a_judge_call_and_singletons_are_masked():
    judge = RuleJudge(larger_wins)
    env = GenRMEnvironmentImpl(_cfg({"mode": "pairwise_group"}), judge=judge)
    logs = [_log(7, "Q one?"), _log(7, "Q one?"), _log(7, "Q one?"), _log(2, "Q two?")]
    result = env.step(logs, [{}] * 4)
    assert result.rewards.tolist() == [0.5, 0.5, 0.5, 0.0]
    assert judge.seen == []
    assert result.metadata[3]["genrm"]["reason"] == "incomplete_group" and result.metadata[3]["genrm"]["masked"]
    assert env.last_metrics()["genrm/masked"] == 1


def test_pairwise_groups_are_separated_by_question_and_group_key_and_prompts_deduplicated():
    judge = RuleJudge(larger_wins)
    env = GenRMEnvironmentImpl(_cfg({"mode": "pairwise_group"}), judge=judge)
    logs = [_log(v, "Q?") for v in (1, 2, 1, 2)] + [_log(v, "Other?") for v in (5, 3)]
    metas = [{"group_id": 0}, {"group_id": 0}, {"group_id": 1}, {"group_id": 1}, {}, {}]
    result = env.step(logs, metas)
    assert result.rewards.tolist() == [0.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    # Groups 0 and 1 hold the same pair: its two prompts are judged once.
    assert env.last_metrics()["genrm/judge_prompts"] == 4
    assert env.last_metrics()["genrm/pairwise/groups"] == 3


def test_pairwise_large_group_draws_opponents_per_response():
    judge = RuleJudge(larger_wins)
    reward = {"mode": "pairwise_group", "pairwise_group": {"all_pairs_up_to": 4, "opponents": 2, "seed": 1}}
    env = GenRMEnvironmentImpl(_cfg(reward), judge=judge)
    values = list(range(16))
    result = _step(env, values)
    pairs = env.last_metrics()["genrm/pairwise/pairs"]
    assert 16 <= pairs <= 32 and pairs < 16 * 15 / 2
    assert env.last_metrics()["genrm/judge_prompts"] == 2 * pairs
    assert all(m["genrm"]["opponents"] >= 2 for m in result.metadata)
    rewards = result.rewards.tolist()
    assert rewards[0] == 0.0 and rewards[15] == 1.0  # the smallest loses every draw, the largest wins
    again = GenRMEnvironmentImpl(_cfg(reward), judge=RuleJudge(larger_wins))
    assert _step(again, values).rewards.tolist() == rewards  # seeded: the same opponents


def test_pairwise_failed_pairs_are_left_out():
    judge = RuleJudge(larger_wins, fail_when=lambda text: "ans-99" in text)
    env = GenRMEnvironmentImpl(_cfg({"mode": "pairwise_group"}), judge=judge)
    result = _step(env, [1, 2, 99])
    assert result.rewards.tolist() == [0.0, 1.0, 0.0]
    assert [m["genrm"]["reason"] for m in result.metadata] == ["judged", "judged", "judge_error"]
    assert env.last_metrics()["genrm/pairwise/failed_pairs"] == 2


def test_pairwise_groups_delivered_one_sample_per_call_are_gathered():
    """Asynchronous rollouts: one step call per sample, from many threads; the groups fill."""
    judge = RuleJudge(larger_wins)
    reward = {"mode": "pairwise_group", "pairwise_group": {"group_size": 4, "group_wait_ms": 5000}}
    env = GenRMEnvironmentImpl(_cfg(reward, coalesce={"max_wait_ms": 0}), judge=judge)
    values = [[4, 2, 8, 6], [1, 3, 5, 7]]
    results: dict[tuple[int, int], float] = {}

    def one(g: int, i: int) -> None:
        results[g, i] = _step(env, [values[g][i]], question=f"Q{g}?").rewards.item()

    threads = [threading.Thread(target=one, args=(g, i)) for g in range(2) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for g in range(2):
        assert [results[g, i] for i in range(4)] == pytest.approx(_win_rates(values[g]))
    assert judge.stats().generate_calls <= 2  # the whole batch in one call (or two when a wait split it)


def test_pairwise_incomplete_group_is_masked_in_full_after_the_deadline():
    reward = {"mode": "pairwise_group", "pairwise_group": {"group_size": 4, "group_wait_ms": 200}}
    judge = RuleJudge(larger_wins)
    env = GenRMEnvironmentImpl(_cfg(reward), judge=judge)
    result = _step(env, [1, 2, 3])
    # Not ranked as far as it got ([0, 1/2, 1] would depend on which three came in time).
    assert result.rewards.tolist() == [0.0, 0.0, 0.0] and judge.seen == []
    assert [m["genrm"] for m in result.metadata] == [
        {"reason": "incomplete_group", "why": None, "verdict": None, "masked": True, "arrived": 3, "late": False}
    ] * 3
    assert env.last_metrics()["genrm/pairwise/incomplete_groups"] == 1
    alone = _step(env, [5], question="Lonely?")
    assert alone.metadata[0]["genrm"]["reason"] == "incomplete_group" and alone.metadata[0]["genrm"]["masked"]


# --------------------------------------------------------------------------------- votes
def test_votes_of_several_judges_take_the_majority_and_ties_are_undecided():
    reward = {"mode": "pairwise_group", "judges": [_member(), _member()]}
    env = GenRMEnvironmentImpl(
        _cfg(reward), judge=RuleJudge(larger_wins), judges=[RuleJudge(larger_wins), RuleJudge(position_biased)]
    )
    result = _step(env, [1, 2, 3])
    assert result.rewards.tolist() == pytest.approx(_win_rates([1, 2, 3]))
    metrics = env.last_metrics()
    # position_biased agrees with larger_wins in the order that shows the larger value first.
    assert metrics["genrm/votes/requests"] == 6
    assert metrics["genrm/votes/agreement"] == pytest.approx((3 * 1.0 + 3 * 2 / 3) / 6)

    tied = GenRMEnvironmentImpl(
        _cfg({"mode": "pairwise_group", "judges": [_member()]}),
        judge=RuleJudge(larger_wins),
        judges=[RuleJudge(position_biased)],
    )
    # Two judges: where they split, the order is a tie, undecided, and the pair is left out (never
    # a draw the group trains on); with no other pair judged, both responses are masked.
    result = _step(tied, [1, 2])
    assert result.rewards.tolist() == [0.0, 0.0]
    assert [(m["genrm"]["masked"], m["genrm"]["opponents"]) for m in result.metadata] == [(True, 0)] * 2
    assert tied.last_metrics()["genrm/votes/tie_rate"] == 0.5 and tied.last_metrics()["genrm/masked"] == 2


def test_votes_sample_one_judge_several_times():
    judge = RuleJudge(same_value)
    cfg = _cfg({"votes": 3}, temperature=0.7)
    env = GenRMEnvironmentImpl(cfg, judge=judge)
    logs = [_log(4), _log(5)]
    result = env.step(logs, [{"ground_truth": "ans-4"}] * 2)
    assert result.rewards.tolist() == [1.0, 0.0]
    assert judge.stats().prompts_generated == 6
    assert env.last_metrics()["genrm/votes/agreement"] == 1.0


def test_votes_keep_why_no_verdict_could_be_read():
    # Three votes, none with a label: the sample is a parse failure whose sub-reason is kept.
    env = GenRMEnvironmentImpl(_cfg({"votes": 3}, temperature=0.7), judge=RuleJudge(lambda text: "maybe"))
    result = env.step([_log(4)], [{"ground_truth": "ans-4"}])
    # ans-4 is no value the verifier reads (reward.verifier: both): undecided, the judge's result stands.
    assert sample_results(result.metadata, 1) == [
        SampleResult("parse_failure", why="no_label", info={"verifier": "undecided"})
    ]
    assert env.last_metrics()["genrm/parse_failure/no_label"] == 1


def test_plain_reference_mode_is_the_reference_mode_with_one_vote():
    env = GenRMEnvironmentImpl(_cfg({}), judge=RuleJudge(same_value))
    assert isinstance(env._mode, ReferenceMode) and not env._mode._panel.polls and not env._mode._swap
    result = env.step([_log(4), _log(5)], [{"ground_truth": "ans-4"}] * 2)
    assert result.rewards.tolist() == [1.0, 0.0]
    assert result.metadata[0]["genrm"] == {
        "reason": "judged",
        "why": None,
        "verdict": 1,
        "masked": False,
        "verifier": "undecided",
    }


# ---------------------------------------------------------------------------------- swap
@pytest.mark.parametrize("verdict_from", ["text", "logprobs"])
def test_swap_judges_both_orders_and_needs_both(verdict_from):
    biased = RuleJudge(first_at_least_second)  # reference shown first: says 1 whenever ref >= candidate
    plain = GenRMEnvironmentImpl(_cfg({}, verdict_from=verdict_from), judge=RuleJudge(first_at_least_second))
    swapped = GenRMEnvironmentImpl(_cfg({"swap": True}, verdict_from=verdict_from), judge=biased)
    logs = [_log(3), _log(2), _log(5)]
    metas = [{"ground_truth": "ans-3"}] * 3
    assert plain.step(logs, metas).rewards.tolist() == [1.0, 1.0, 0.0]
    result = swapped.step(logs, metas)
    assert result.rewards.tolist() == [1.0, 0.0, 0.0]
    assert [m["genrm"]["orders_agree"] for m in result.metadata] == [True, False, False]
    assert len(biased.seen) == 6
    assert sorted(tuple(tagged_values(t)[-2:]) for t in biased.seen[:2]) == [(3, 3), (3, 3)]
    metrics = swapped.last_metrics()
    assert metrics["genrm/swap/pairs"] == 3 and metrics["genrm/swap/disagreement_rate"] == pytest.approx(2 / 3)


def test_swap_keeps_the_answer_neutralised_in_the_reference_slot():
    judge = RuleJudge(same_value)
    env = GenRMEnvironmentImpl(_cfg({"swap": True}), judge=judge)
    log = [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "Answer: ans-3\n1"}]
    env.step([log], [{"ground_truth": "ans-3"}])
    swapped = judge.seen[1]
    reference_block = swapped.split("Reference answer:")[1].split("Candidate answer:")[0]
    assert "ans-3" in reference_block and "\n1\n" not in reference_block


# -------------------------------------------------------------------------------- rubric
def test_rubric_reward_is_the_weighted_share_met_in_one_call(tmp_path):
    rubric_file = tmp_path / "rubric.json"
    rubric_file.write_text(json.dumps({"*": ["kw:alpha"], "Special?": ["kw:gamma", "kw:delta"]}))
    judge = RuleJudge(keyword_met)
    env = GenRMEnvironmentImpl(_cfg({"mode": "rubric", "rubric": {"file": str(rubric_file)}}), judge=judge)
    answers = ["alpha beta", "beta", "gamma", "alpha", "whatever", "x"]
    questions = ["Q?", "Q?", "Special?", "Q?", "Q?", "Q?"]
    metas = [
        {"rubric": [{"criterion": "kw:alpha", "weight": 3}, "kw:beta"]},
        {"rubric": [{"criterion": "kw:alpha", "weight": 3}, "kw:beta"]},
        {},
        {},
        {"rubric": []},
        {"rubric": [{"criterion": "kw:alpha", "weight": -1}]},
    ]
    logs = [
        [{"role": "user", "content": q}, {"role": "assistant", "content": f"Answer: {a}"}]
        for q, a in zip(questions, answers)
    ]
    result = env.step(logs, metas)
    assert result.rewards.tolist() == [1.0, 0.25, 0.5, 1.0, 0.0, 0.0]
    reasons = [m["genrm"]["reason"] for m in result.metadata]
    assert reasons == ["judged"] * 4 + ["missing_rubric", "bad_input"]
    assert result.metadata[1]["genrm"]["rubric"] == [
        {"criterion": "kw:alpha", "weight": 3.0, "met": False, "reason": "judged"},
        {"criterion": "kw:beta", "weight": 1.0, "met": True, "reason": "judged"},
    ]
    assert judge.stats().generate_calls == 1 and len(judge.seen) == 7  # 2 + 2 + 2 + 1 items
    metrics = env.last_metrics()
    assert metrics["genrm/rubric/items"] == 7 and metrics["genrm/rubric/met_rate"] == pytest.approx(5 / 7)
    assert metrics["genrm/count/missing_rubric"] == 1


def test_rubric_from_logprobs_and_with_failed_items():
    judge = RuleJudge(keyword_met, fail_when=lambda text: "kw:broken" in text)
    env = GenRMEnvironmentImpl(_cfg({"mode": "rubric"}, verdict_from="logprobs"), judge=judge)
    log = [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "Answer: alpha"}]
    result = env.step([log, log], [{"rubric": ["kw:alpha", "kw:beta", "kw:broken"]}, {"rubric": ["kw:broken"]}])
    assert result.rewards.tolist() == [0.5, 0.0]
    assert [m["genrm"]["reason"] for m in result.metadata] == ["judged", "judge_error"]
    assert result.metadata[0]["genrm"]["rubric"][2] == {
        "criterion": "kw:broken",
        "weight": 1.0,
        "met": None,
        "reason": "judge_error",
    }


# -------------------------------------------------------------------------------- config
def test_mode_options_are_checked_together():
    with pytest.raises(ConfigError) as err:
        GenRMEnvironmentImpl(
            _cfg(
                {"mode": "pairwise_group", "swap": True, "votes": 2, "kind": "probability", "judges": [_member()]},
                verdict_from="logprobs",
                resources={"placement": "colocated", "gpus_per_replica": 1},
            ),
            judge=RuleJudge(larger_wins),
        )
    text = str(err.value)
    for needle in ("reward.swap", "reward.votes", "reward.kind 'probability'", "reward.judges start judges"):
        assert needle in text
    with pytest.raises(ConfigError, match="rubric.file"):
        GenRMEnvironmentImpl(
            _cfg({"mode": "rubric", "rubric": {"file": "/nonexistent.yaml"}}), judge=RuleJudge(keyword_met)
        )
