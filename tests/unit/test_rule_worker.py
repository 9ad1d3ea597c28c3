"""The stand-in engine worker of the multi-node tests gives the rewards computed by hand, in process.

tests/functional/test_scale_out.py runs the same worker on a replica pool over simulated nodes and
checks the same rewards while a node is lost; here the hand-computed table itself is checked
through the real prompt builder, fitter and environment, without Ray.
"""

from __future__ import annotations

from nemo_genrm.config import JudgeConfig
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.judges.fitting import PromptFitter
from nemo_genrm.judges.pipeline import LocalRunner, PipelineJudge
from nemo_genrm.testing import cached_tiny_tokenizer
from nemo_genrm.testing.rule_workers import RuleWorker


def test_rule_worker_rewards_follow_the_rule(tiny_cache_dir):
    config = JudgeConfig(model_name=str(cached_tiny_tokenizer()), max_model_len=1024, sampling={"max_new_tokens": 4})
    judge = PipelineJudge(config, LocalRunner(RuleWorker()), fitter=PromptFitter.for_judge(config))
    env = GenRMEnvironmentImpl({"judge": config.model_dump(), "resources": {"gpus_per_replica": 0}}, judge=judge)
    # Candidate ans-<i % 5> against reference ans-<i % 3>: equal for i in 0, 1, 2, 15 (i % 15 < 3);
    # sample 6 answers nothing.
    logs = [
        [
            {"role": "user", "content": f"Question {i}?"},
            {"role": "assistant", "content": "" if i == 6 else f"Answer: ans-{i % 5}"},
        ]
        for i in range(16)
    ]
    meta = [{"ground_truth": f"ans-{i % 3}"} for i in range(16)]
    result = env.step(logs, meta)
    expected = [1.0, 1.0, 1.0] + [0.0] * 12 + [1.0]
    assert result.rewards.tolist() == expected
    assert result.metadata[6]["genrm"]["reason"] == "no_answer"
