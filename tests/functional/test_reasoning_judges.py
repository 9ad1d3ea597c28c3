"""Reasoning judges on the real transformers engine and through the environment.

The tiny judge ``"<think>1"`` opens a thought, writes ``1`` and stops (EOS) without closing it.
With ``on_budget: close`` the engine cuts the thought, appends ``close_text`` (``"\\n</think>"``,
whose last token ``>`` is in the judge's chain, so the judge goes on with ``1`` and EOS) and the
verdict after the thought is ``1``; with ``truncate`` the reply stays an open thought, which the
parser reads as ``truncated``, never as the ``1`` inside it.
"""

from __future__ import annotations

import pytest

from nemo_genrm.config import JudgeConfig
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.judges.transformers import LocalTransformersJudge
from nemo_genrm.testing import cached_tiny_judge

THOUGHT = 6  # "<think>1": "<", "th", "in", "k", ">", "1"
CLOSE = 7  # "\n</think>": "\n", "<", "/", "th", "in", "k", ">"


def _judge(on_budget: str, generation: str, budget: int = 12) -> dict:
    return {
        "backend": "dtensor",
        "model_name": str(cached_tiny_judge("<think>1")),
        "precision": "float32",
        "max_model_len": 256,
        "sampling": {
            "max_new_tokens": budget,
            "reasoning": {"enabled": True, "verdict_tokens": 12, "on_budget": on_budget, "close_text": "\n</think>"},
        },
        "dtensor": {"generation": generation},
    }


@pytest.mark.parametrize("generation", ["static", "dynamic"])
@pytest.mark.parametrize(
    ("on_budget", "text", "tokens", "cut"),
    [("close", "<think>1\n</think>1", THOUGHT + CLOSE + 2, "closed"), ("truncate", "<think>1", THOUGHT, "truncated")],
)
def test_a_thought_left_open_is_closed_or_cut(tiny_cache_dir, generation, on_budget, text, tokens, cut):
    judge = LocalTransformersJudge(JudgeConfig.model_validate(_judge(on_budget, generation)))
    try:
        replies = judge.generate([[{"role": "user", "content": f"Is {i} right?"}] for i in range(3)])
        stats = judge.stats()
    finally:
        judge.shutdown()
    assert [(g.text, g.output_tokens, g.reasoning_tokens, g.reasoning_cut) for g in replies] == [
        (text, tokens, THOUGHT, cut)
    ] * 3
    assert stats.reasoning_lengths == {THOUGHT: 3}
    assert (stats.reasoning_closed, stats.reasoning_truncated) == ((3, 0) if cut == "closed" else (0, 3))


@pytest.mark.parametrize(
    # close: the judge's 1 after the thought, for both answers; the value verifier vetoes 41's.
    ("on_budget", "rewards", "reason"),
    [("close", [1.0, 0.0], "judged"), ("truncate", [0.0, 0.0], "parse_failure")],
)
def test_the_environment_reads_the_verdict_after_the_thought(tiny_cache_dir, on_budget, rewards, reason):
    config = {**_judge(on_budget, "static"), "max_model_len": 1024}  # the consistency prompt's room
    judge = LocalTransformersJudge(JudgeConfig.model_validate(config))
    env = GenRMEnvironmentImpl({"judge": config, "resources": {"gpus_per_replica": 0}}, judge=judge)
    try:
        batch = [
            [{"role": "user", "content": "6*7?"}, {"role": "assistant", "content": f"Answer: {a}"}]
            for a in ("42", "41")
        ]
        out = env.step(batch, [{"ground_truth": "42"}] * 2)
        metrics = env.last_metrics()
    finally:
        env.shutdown()
        judge.shutdown()
    assert out.rewards.tolist() == rewards
    assert [m["genrm"]["reason"] for m in out.metadata] == [reason] * 2
    assert metrics["genrm/reasoning_tokens/max"] == THOUGHT and metrics["genrm/reasoning_tokens/p95"] == THOUGHT
    assert metrics["genrm/reasoning_closed"] == (2.0 if on_budget == "close" else 0.0)
    assert metrics["genrm/reasoning_truncated"] == (0.0 if on_budget == "close" else 2.0)
    if on_budget == "truncate":
        assert metrics["genrm/parse_failure/truncated"] == 2
