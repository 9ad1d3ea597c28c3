"""JudgeReward (the drop-ins' shared core) without a framework: its judgements come from the typed results."""

from __future__ import annotations

from nemo_genrm.integrations.judge_reward import JudgeReward, Judgement
from nemo_genrm.testing.rule_judges import RuleJudge, same_value

CONFIG = {
    "judge": {"model_name": "stand-in", "backend": "http", "http": {"base_url": "http://stand-in/v1"}},
    "resources": {"gpus_per_replica": 0},
}


def test_judgements_carry_each_samples_reason_and_verdict():
    # same_value: "1" when the fenced candidate and the reference hold the same tagged value.
    with JudgeReward(CONFIG, judge=RuleJudge(same_value)) as reward:
        out = reward.judge(["Answer: ans-4", "Answer: ans-5", "Answer:"], ["ans-4", "ans-4", "ans-4"], ["Q?"] * 3)
    assert out == [
        Judgement(1.0, "judged", 1, "ans-4"),
        Judgement(0.0, "judged", 0, "ans-5"),
        Judgement(0.0, "no_answer", None, None),  # a marker followed by nothing is not sent
    ]
    assert [j.reward_or_none for j in out] == [1.0, 0.0, 0.0]
