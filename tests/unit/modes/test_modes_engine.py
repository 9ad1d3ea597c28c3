"""Reward modes on the real in-process engine with tiny fixed-verdict judges (text and logprobs)."""

from __future__ import annotations

from typing import Any

import pytest

from nemo_genrm.config import JudgeConfig
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.judges.transformers import LocalTransformersJudge
from nemo_genrm.testing import cached_tiny_judge

MAX_LEN = 1024


def _judge_cfg(path: str, verdict_from: str) -> dict[str, Any]:
    return {"model_name": path, "precision": "float32", "max_model_len": MAX_LEN, "verdict_from": verdict_from}


_WORKERS: list[LocalTransformersJudge] = []


@pytest.fixture(scope="module")
def fixed_paths(tiny_cache_dir: str) -> dict[str, str]:
    yield {text: str(cached_tiny_judge(text, cache_dir=tiny_cache_dir)) for text in ("[[A]]", "1")}
    while _WORKERS:
        _WORKERS.pop().shutdown()


def _env(path: str, reward: dict[str, Any], verdict_from: str) -> GenRMEnvironmentImpl:
    judge = _judge_cfg(path, verdict_from)
    cfg = {"judge": judge, "resources": {"gpus_per_replica": 0}, "reward": reward}
    _WORKERS.append(LocalTransformersJudge(JudgeConfig.model_validate(judge)))
    return GenRMEnvironmentImpl(cfg, judge=_WORKERS[-1])


def _log(answer: str, question: str = "What is 2 + 3?") -> list[dict[str, str]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": f"Answer: {answer}"}]


@pytest.mark.parametrize("verdict_from", ["text", "logprobs"])
def test_first_position_judge_gives_draws_in_pairwise_groups(fixed_paths, verdict_from):
    """A judge that always picks the first response is cancelled by the swapped order."""
    env = _env(fixed_paths["[[A]]"], {"mode": "pairwise_group"}, verdict_from)
    result = env.step([_log(a) for a in ("5", "6", "4", "5")], [{} for _ in range(4)])
    assert result.rewards.tolist() == [0.5] * 4
    metrics = env.last_metrics()
    assert metrics["genrm/count/judged"] == 4
    assert metrics["genrm/pairwise/pairs"] == 3 and metrics["genrm/judge_prompts"] == 6
    assert metrics["genrm/pairwise/order_disagreement_rate"] == 1.0


@pytest.mark.parametrize("verdict_from", ["text", "logprobs"])
def test_fixed_yes_judge_meets_every_rubric_item_and_agrees_with_itself_swapped(fixed_paths, verdict_from):
    rubric = _env(fixed_paths["1"], {"mode": "rubric"}, verdict_from)
    swap = _env(fixed_paths["1"], {"swap": True}, verdict_from)
    result = rubric.step([_log("5")], [{"rubric": ["is a number", {"criterion": "is five", "weight": 2}]}])
    assert result.rewards.tolist() == [1.0]
    assert [item["met"] for item in result.metadata[0]["genrm"]["rubric"]] == [True, True]
    result = swap.step([_log("5"), _log("7")], [{"ground_truth": "5"}] * 2)
    # The judge says 1 in both orders; the verifier (reward.verifier: both, the default) finds 7
    # different from 5 and lowers that reward to 0.
    assert result.rewards.tolist() == [1.0, 0.0]
    assert swap.last_metrics()["genrm/swap/disagreement_rate"] == 0.0
    assert swap.last_metrics()["genrm/verifier/vetoes"] == 1
