"""NeMo-RL's batched rollout with ``group_size`` set: each step call holds whole groups.

NeMo-RL's ``run_multi_turn_rollout`` (sync GRPO, and its validation) sends a batch to ``step`` in
one call; validation generates one response per prompt by default. Through NeMo-RL's real
rollout, ``calculate_rewards`` and ``create_env``, a validation at one response per prompt is
masked at once (no ``group_wait_ms`` wait for members that never come) and leaves nothing owed,
so the training batch on the same prompts right after it is ranked whole. The judge is an HTTP
stand-in (more ``because`` wins), so every reward is computed by hand. Needs NeMo-RL.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from nemo_rl_support import GENRM_TASK, nemo_rl_batch

pytestmark = pytest.mark.nemo_rl

PROMPTS, GENERATIONS = 3, 4


def _rows(generations: int) -> list[dict[str, Any]]:
    return [
        {
            "messages": [{"role": "user", "content": f"Question {q}: why?"}, {"role": "assistant", "content": "x"}],
            "task_name": GENRM_TASK,
        }
        for q in range(PROMPTS)
        for _ in range(generations)
    ]


def test_a_validation_at_one_response_per_prompt_never_reaches_the_training_step(ray_cluster, tiny_cache_dir):
    import ray
    from nemo_rl.algorithms.utils import get_tokenizer
    from nemo_rl.environments.utils import create_env
    from nemo_rl.experience.rollouts import run_multi_turn_rollout

    from nemo_genrm.integrations.nemo_rl import register
    from nemo_genrm.testing import cached_tiny_tokenizer
    from nemo_genrm.testing.scripted_generation import ScriptedGeneration
    from nemo_genrm.testing.stand_in_judges import StandInServer, more_working_wins

    tokenizer = get_tokenizer({"name": str(cached_tiny_tokenizer(cache_dir=tiny_cache_dir))})
    asked: Counter[int] = Counter()

    def respond(prompt: str) -> str:  # the k-th response to question q shows (q + k) % 4 reasons
        q = next(q for q in range(PROMPTS) if f"Question {q}:" in prompt)
        asked[q] += 1
        return "because " * ((q + asked[q] - 1) % 4) + "Answer: 42"

    def rollout(generations: int) -> Any:
        batch = nemo_rl_batch(tokenizer, _rows(generations))
        final, _ = run_multi_turn_rollout(
            ScriptedGeneration(tokenizer, respond),
            batch,
            tokenizer,
            {GENRM_TASK: env},
            max_seq_len=512,
            max_rollout_turns=1,
        )
        return final

    register()
    section = {
        "judge": {"backend": "http", "model_name": "judge", "http": {"base_url": None, "max_retries": 0}},
        "resources": {"gpus_per_replica": 0},
        "reward": {"mode": "pairwise_group", "pairwise_group": {"group_size": GENERATIONS}},  # waits 30 s by default
    }
    with StandInServer(lambda body: more_working_wins(StandInServer.user_text(body))) as server:
        section["judge"]["http"]["base_url"] = server.base_url
        env = create_env("genrm", section)
        try:
            ray.get(env.ready.remote())  # the actor is up: what follows times the steps alone
            start = time.monotonic()
            validation = rollout(1)
            seconds = time.monotonic() - start
            _, val_metrics = ray.get(env.global_post_process_and_metrics.remote(None))
            asked.clear()
            training = rollout(GENERATIONS)
            _, train_metrics = ray.get(env.global_post_process_and_metrics.remote(None))
        finally:
            ray.get(env.shutdown.remote())
            ray.kill(env)
    assert seconds < 15.0, seconds  # before: each validation group waited group_wait_ms (30 s)
    assert validation["total_reward"].tolist() == [0.0] * PROMPTS
    assert val_metrics["genrm/count/incomplete_group"] == PROMPTS and val_metrics["genrm/masked"] == PROMPTS
    # Distinct working 0..3 in each group: a response beats those with less, win rate = rank / 3.
    # Before, validation's debts (3 per prompt) took three of each prompt's four: all 12 masked.
    working = [[(q + k) % 4 for k in range(GENERATIONS)] for q in range(PROMPTS)]
    expected = [sorted(ws).index(w) / 3 for ws in working for w in ws]
    assert training["total_reward"].tolist() == pytest.approx(expected)
    assert train_metrics["genrm/masked"] == 0 and train_metrics["genrm/pairwise/groups"] == PROMPTS
