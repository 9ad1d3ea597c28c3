"""``reward.mode: pairwise_group`` through Ray: the built-in GRPO driver, and the actor under
per-sample step calls.

The driver (policy and environment as Ray actors) trains one step with a judge that always picks
the first response shown: each pair is judged in both orders, the orders disagree, every pair is
a draw and every judged response earns exactly 1/2. ``group_size`` makes the environment wait for
each group; the built-in driver sends a step's whole batch at once, so nothing waits.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_grpo_driver_trains_with_pairwise_group_rewards(tmp_path, ray_cluster, tiny_cache_dir):
    from nemo_genrm.grpo.config import load_grpo_config
    from nemo_genrm.grpo.runner import build_run

    cfg = load_grpo_config(
        ROOT / "examples" / "configs" / "grpo_genrm_tiny.yaml",
        [
            "grpo.max_num_steps=1",
            "grpo.num_prompts_per_step=2",
            "grpo.num_generations_per_prompt=4",
            "grpo.val_at_start=false",
            "policy.train_global_batch_size=8",
            "policy.train_micro_batch_size=8",
            "policy.generation.max_new_tokens=8",
            "++env.genrm.reward.mode=pairwise_group",
            "++env.genrm.reward.pairwise_group.group_size=4",
            "env.genrm.judge.sampling.max_new_tokens=8",
            "checkpointing.enabled=false",
            f"logger.log_dir={tmp_path / 'logs'}",
            "logger.tensorboard_enabled=false",
        ],
    )
    cfg.env.genrm.judge.model_name = "tiny://fixed/[[A]]"
    run = build_run(cfg)
    try:
        summary = run.trainer.fit()
    finally:
        run.shutdown()
    assert summary.last_step == 1
    record = json.loads((run.folders.log_dir / "metrics.jsonl").read_text().splitlines()[0])
    counted = record["genrm/count/judged"] + record["genrm/count/no_answer"] + record["genrm/count/incomplete_group"]
    assert counted == 8
    assert record["genrm/count/judged"] >= 2
    # Judged responses earn 1/2; responses without an answer count 0; lone ones are masked.
    judged, unanswered = record["genrm/count/judged"], record["genrm/count/no_answer"]
    assert record["genrm/mean_reward"] == pytest.approx(0.5 * judged / (judged + unanswered))
    assert record["genrm/pairwise/groups"] >= 1
    if record["genrm/pairwise/pairs"]:  # distinct answers met: both orders, and they disagreed
        assert record["genrm/pairwise/order_disagreement_rate"] == 1.0
        assert record["genrm/judge_prompts"] <= 2 * record["genrm/pairwise/pairs"]


@pytest.mark.slow
def test_actor_ranks_whole_group_calls_and_refuses_one_sample_calls(ray_cluster, tiny_cache_dir):
    """Calls holding whole groups are ranked; a call of one response (NeMo-RL's per-sample rollout
    path, whose bounded thread pool cannot hold a whole group in flight) is refused."""
    from nemo_genrm.env.environment import GenRMEnvironment
    from nemo_genrm.testing import cached_tiny_judge

    path = str(cached_tiny_judge("[[A]]", cache_dir=tiny_cache_dir))
    judge = {"model_name": path, "precision": "float32", "max_model_len": 1024}
    cfg = {
        "judge": judge,
        "resources": {"gpus_per_replica": 0},
        "reward": {"mode": "pairwise_group", "pairwise_group": {"group_size": 4, "group_wait_ms": 20000}},
    }
    actor = GenRMEnvironment.remote(cfg)
    try:
        calls = [
            actor.step.remote(
                [
                    [{"role": "user", "content": f"Question {g}?"}, {"role": "assistant", "content": f"Answer: {g}{i}"}]
                    for i in range(4)
                ],
                [{}] * 4,
            )
            for g in range(2)
        ]
        results = ray_cluster.get(calls)
        _, metrics = ray_cluster.get(actor.global_post_process_and_metrics.remote({}))
        with pytest.raises(Exception, match="pairwise_group cannot rank whole groups"):  # ConfigError, through Ray
            ray_cluster.get(
                actor.step.remote([[{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "A"}]], [{}])
            )
    finally:
        ray_cluster.get(actor.shutdown.remote())
        ray_cluster.kill(actor)
    rewards = [v for r in results for v in r.rewards.tolist()]
    assert rewards == [0.5] * 8  # every pair a draw: the orders disagree
    assert [m["genrm"]["group_size"] for r in results for m in r.metadata] == [4] * 8
    assert metrics["genrm/count/incomplete_group"] == 0 and metrics["genrm/pairwise/incomplete_groups"] == 0.0
    assert metrics["genrm/pairwise/groups"] == 2 and metrics["genrm/pairwise/pairs"] == 12


@pytest.mark.slow
def test_environment_starts_and_frees_the_judges_of_reward_judges(ray_cluster, tiny_cache_dir):
    """``reward.judges`` from config: each voting judge started on its own resources, majority verdict."""
    from nemo_genrm.env.environment import GenRMEnvironmentImpl
    from nemo_genrm.testing import cached_tiny_judge

    def judge(text: str) -> dict:
        path = str(cached_tiny_judge(text, cache_dir=tiny_cache_dir))
        return {"model_name": path, "precision": "float32", "max_model_len": 1024}

    cfg = {"judge": judge("1"), "resources": {"gpus_per_replica": 0}, "reward": {"judges": [judge("1"), judge("0")]}}
    env = GenRMEnvironmentImpl(cfg)
    try:
        log = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "Answer: 4"}]
        result = env.step([log], [{"ground_truth": "4"}])
        metrics = env.last_metrics()
    finally:
        env.shutdown()
    assert result.rewards.tolist() == [1.0]  # "1", "1", "0": the majority says match
    assert metrics["genrm/votes/agreement"] == pytest.approx(2 / 3)
    assert result.metadata[0]["genrm"]["agreement"] == pytest.approx(2 / 3)
