"""Every reward mode under NeMo-RL's ``run_async_multi_turn_rollout``, with out-of-order finishes.

NeMo-RL's ``grpo_train`` takes this path whenever ``policy.generation.vllm_cfg.async_engine`` is
true (sync GRPO included): each sample is generated on its own and sent to the environment in
its own ``step`` call, from a worker thread of a bounded pool that waits for that sample's
reward. Here 4 prompts x 4 generations finish in a shuffled order (each sample sleeps its own
delay), through NeMo-RL's real rollout, ``calculate_rewards`` and ``create_env``. The judge is an
HTTP stand-in whose verdict is a known function of what it is shown, so every reward is
computed by hand. Needs NeMo-RL (CI's NeMo-RL env).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections import Counter
from typing import Any

import pytest
from nemo_rl_support import GENRM_TASK, nemo_rl_batch

pytestmark = pytest.mark.nemo_rl

PROMPTS, GENERATIONS = 4, 4
# Per prompt, the answer of its k-th generation. 16 samples, 10 distinct (question, answer) pairs.
REFERENCE_ANSWERS = [["42", "42", "41", "41"], ["42", "42", "42", "7"], ["42", "41", "7", "6"], ["42", "42", "42", "5"]]
RUBRIC_RESPONSES = ["because so", "therefore it is", "because therefore", "no reason"]
# A shuffled order of finishing: sample (prompt q, generation k) sleeps DELAY_S * ORDER[4q + k].
ORDER = [9, 2, 14, 5, 0, 11, 7, 15, 3, 12, 1, 8, 13, 6, 10, 4]
DELAY_S = 0.04

_answer: contextvars.ContextVar[str] = contextvars.ContextVar("answer")


def _question(q: int) -> str:
    return f"Question number {q}: what is 6 times 7?"


def _rows() -> list[dict[str, Any]]:
    """NeMo-RL repeats each prompt num_generations times in a row (``repeat_interleave``)."""
    return [
        {
            "messages": [{"role": "user", "content": _question(q)}, {"role": "assistant", "content": "42"}],
            "task_name": GENRM_TASK,
        }
        for q in range(PROMPTS)
        for _ in range(GENERATIONS)
    ]


def _scripted(tokenizer: Any, responses: list[list[str]]):
    """A scripted policy whose k-th generation of prompt q answers ``responses[q][k]`` after its delay."""
    from nemo_genrm.testing.scripted_generation import ScriptedGeneration

    class OutOfOrder(ScriptedGeneration):
        def __init__(self) -> None:
            super().__init__(tokenizer, self._respond)
            self.asked: Counter[int] = Counter()
            self.finished: list[tuple[int, int]] = []

        def _next(self, prompt: str) -> tuple[int, int]:
            """(prompt q, generation k): asked in input order (the batched call's rows, or each
            sample's task, started in turn)."""
            q = next(q for q in range(PROMPTS) if _question(q) in prompt)
            self.asked[q] += 1
            return q, self.asked[q] - 1

        def _respond(self, prompt: str) -> str:
            try:
                return _answer.get()  # set by this sample's generate_async
            except LookupError:  # the batched generate: rows in input order
                q, k = self._next(prompt)
                return responses[q][k]

        async def generate_async(self, data: Any, greedy: bool = False):
            q, k = self._next(tokenizer.decode(data["input_ids"][0][: int(data["input_lengths"][0])]))
            _answer.set(responses[q][k])  # this sample's task context only
            await asyncio.sleep(DELAY_S * ORDER[GENERATIONS * q + k])
            self.finished.append((q, k))
            async for item in super().generate_async(data, greedy):
                yield item

    return OutOfOrder()


def _section(base_url: str, **reward: Any) -> dict[str, Any]:
    return {
        "judge": {"backend": "http", "model_name": "judge", "http": {"base_url": base_url, "max_retries": 0}},
        "resources": {"gpus_per_replica": 0},
        "reward": reward,
    }


@pytest.fixture(scope="module")
def tokenizer(tiny_cache_dir):
    from nemo_rl.algorithms.utils import get_tokenizer

    from nemo_genrm.testing import cached_tiny_tokenizer

    return get_tokenizer({"name": str(cached_tiny_tokenizer(cache_dir=tiny_cache_dir))})


def _rollout(kind: str, env: Any, tokenizer: Any, responses: list[list[str]]):
    """NeMo-RL's rollout of the 16 samples; the final batch and the scripted policy."""
    from nemo_rl.experience import rollouts

    batch = nemo_rl_batch(tokenizer, _rows())
    generation = _scripted(tokenizer, responses)
    final, _ = getattr(rollouts, kind)(
        generation, batch, tokenizer, {GENRM_TASK: env}, max_seq_len=512, max_rollout_turns=1
    )
    return final, generation


def _create(section: dict[str, Any]) -> Any:
    from nemo_rl.environments.utils import create_env

    from nemo_genrm.integrations.nemo_rl import register

    register()
    return create_env("genrm", section)


def _shutdown(env: Any) -> None:
    import ray

    ray.get(env.shutdown.remote())
    ray.kill(env)


def test_reference_mode_rewards_each_sample_and_shares_judge_prompts(ray_cluster, tokenizer):
    """Every reward by hand (the stand-in says 1 exactly for the answer 42), on the sync path and
    the async path; identical answers to one question share one judge prompt on both."""
    import ray

    from nemo_genrm.testing.integrity_judges import StandInServer, shown_responses

    def rule(body: dict) -> str:
        return "1" if shown_responses(StandInServer.user_text(body)) == ["Answer: 42"] else "0"

    responses = [[f"Working.\n\nAnswer: {a}" for a in answers] for answers in REFERENCE_ANSWERS]
    expected = [1.0 if a == "42" else 0.0 for answers in REFERENCE_ANSWERS for a in answers]
    distinct = len({(q, a) for q, answers in enumerate(REFERENCE_ANSWERS) for a in answers})
    with StandInServer(rule) as server:
        env = _create(_section(server.base_url))
        try:
            prompts = {}
            for kind in ("run_multi_turn_rollout", "run_async_multi_turn_rollout"):
                server.bodies.clear()
                final, generation = _rollout(kind, env, tokenizer, responses)
                assert final["total_reward"].tolist() == expected, kind
                prompts[kind] = len(server.bodies)
                _, metrics = ray.get(env.global_post_process_and_metrics.remote(None))
                assert metrics["genrm/num_samples"] == 16
                assert metrics["genrm/dedup_hits"] == 16 - prompts[kind]
            assert generation.finished != sorted(generation.finished)  # the async samples finished out of order
        finally:
            _shutdown(env)
    print(json.dumps({"judge_prompts": prompts, "distinct": distinct}))
    assert prompts["run_multi_turn_rollout"] == distinct  # one call: every duplicate shared
    # One call per sample, as each finishes: a duplicate shares a prompt only when it arrives while
    # that prompt is being judged (tests/unit/env/test_carried_verdicts.py fixes the windows).
    assert distinct <= prompts["run_async_multi_turn_rollout"] <= 16


def test_rubric_mode_rewards_each_sample(ray_cluster, tokenizer, tmp_path):
    """Items from reward.rubric.file: "because" (weight 2) and "therefore" (1); a response's
    reward is the weight of the items it meets over 3."""
    from nemo_genrm.testing.integrity_judges import StandInServer, criterion_in_response

    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps({"*": [{"criterion": "kw:because", "weight": 2}, "kw:therefore"]}))
    responses = [[f"{RUBRIC_RESPONSES[(q + k) % 4]}. Answer: 42" for k in range(GENERATIONS)] for q in range(PROMPTS)]
    expected = [(2 * ("because" in r) + ("therefore" in r)) / 3 for texts in responses for r in texts]
    with StandInServer(lambda body: criterion_in_response(StandInServer.user_text(body))) as server:
        env = _create(_section(server.base_url, mode="rubric", rubric={"file": str(rubric)}))
        try:
            final, _ = _rollout("run_async_multi_turn_rollout", env, tokenizer, responses)
        finally:
            _shutdown(env)
    assert final["total_reward"].tolist() == pytest.approx(expected)


@pytest.mark.parametrize("group_size", [None, 4], ids=["without group_size", "with group_size"])
def test_pairwise_groups_are_refused_on_the_async_path_never_masked_silently(ray_cluster, tokenizer, group_size):
    """NeMo-RL holds one worker thread per sample waiting for its reward: responses held for their
    groups keep the threads the rest of their groups need, so whole groups cannot be promised.
    The first per-sample call raises, naming the setting; before, every reward came back 0 and
    masked (silently without group_size, after a 30 s stall with it)."""
    from nemo_genrm.testing.integrity_judges import StandInServer, more_working_wins

    responses = [["because " * ((q + k) % 4) + "Answer: 42" for k in range(GENERATIONS)] for q in range(PROMPTS)]
    pairwise = {"group_size": group_size} if group_size else {}
    with StandInServer(lambda body: more_working_wins(StandInServer.user_text(body))) as server:
        env = _create(_section(server.base_url, mode="pairwise_group", pairwise_group=pairwise))
        try:
            with pytest.raises(Exception) as raised:
                _rollout("run_async_multi_turn_rollout", env, tokenizer, responses)
            final, _ = _rollout("run_multi_turn_rollout", env, tokenizer, responses)  # the sync path ranks them
        finally:
            _shutdown(env)
        asked = len(server.bodies)
    chain, error = [], raised.value
    while error is not None:
        chain.append(f"{type(error).__name__}: {error}")
        error = error.__cause__ or error.__context__
    assert any("vllm_cfg.async_engine" in link and "pairwise_group" in link for link in chain), chain
    working = [[(q + k) % 4 for k in range(GENERATIONS)] for q in range(PROMPTS)]
    # Distinct working 0..3 in every group: a response beats the ones with less, win rate = rank / 3.
    expected = [sorted(ws).index(w) / 3 for ws in working for w in ws]
    assert final["total_reward"].tolist() == pytest.approx(expected)
    assert asked > 0


def test_the_async_rollout_combination_is_refused_from_nemo_rls_config():
    """What --engine nemo_rl (and a script holding NeMo-RL's config) checks before any env starts."""
    from nemo_genrm.config import ConfigError, GenRMConfig, validate
    from nemo_genrm.env.intake import check_pairwise_rollouts

    pairwise = validate(GenRMConfig, _section("http://127.0.0.1:9/v1", mode="pairwise_group"), prefix="env.genrm")
    reference = validate(GenRMConfig, _section("http://127.0.0.1:9/v1"), prefix="env.genrm")
    async_vllm = {"backend": "vllm", "vllm_cfg": {"async_engine": True}}
    sync_vllm = {"backend": "vllm", "vllm_cfg": {"async_engine": False}}
    with pytest.raises(ConfigError, match=r"policy\.generation\.vllm_cfg\.async_engine"):
        check_pairwise_rollouts(pairwise, async_vllm, {"async_grpo": {"enabled": False}})
    with pytest.raises(ConfigError, match=r"grpo\.async_grpo\.enabled"):
        check_pairwise_rollouts(pairwise, sync_vllm, {"async_grpo": {"enabled": True}})
    check_pairwise_rollouts(pairwise, sync_vllm, {"async_grpo": {"enabled": False}})
    check_pairwise_rollouts(reference, async_vllm, {"async_grpo": {"enabled": True}})
