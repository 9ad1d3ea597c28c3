"""A separate judge scores each generation batch while the policy samples the next (Ray actors).

A policy actor and an environment actor that each take 0.5 s a call and record when they ran:
the rollout in batches must give the rewards of one whole step, in sample order, with every
batch whole prompts, and the judge must score the first batch while the policy samples the
second (their recorded intervals overlap).
"""

from __future__ import annotations

import time

import ray
import torch

from nemo_genrm.grpo.data import Prompt
from nemo_genrm.grpo.handles import EnvHandle, PolicyHandle
from nemo_genrm.grpo.policy import GeneratedSample
from nemo_genrm.grpo.rollout import rollout
from nemo_genrm.ray_env import actor_options
from nemo_genrm.samples.types import EnvironmentReturn

CALL_S = 0.5


@ray.remote
class _Policy:
    def __init__(self) -> None:
        self.calls: list[tuple[float, float, int]] = []

    def generate(self, prompts: list[str]) -> list[GeneratedSample]:
        start = time.time()
        time.sleep(CALL_S)
        self.calls.append((start, time.time(), len(prompts)))
        # The k-th sample of a prompt answers k: rewards tell the samples apart.
        count: dict[str, int] = {}
        out = []
        for text in prompts:
            count[text] = count.get(text, 0) + 1
            out.append(GeneratedSample([1], [2], f"{text}:{count[text]}", False))
        return out

    def intervals(self) -> list[tuple[float, float, int]]:
        return self.calls


@ray.remote
class _Env:
    def __init__(self) -> None:
        self.calls: list[tuple[float, float, list[str]]] = []

    def step(self, message_logs, metadata) -> EnvironmentReturn:
        start = time.time()
        time.sleep(CALL_S)
        answers = [log[-1]["content"] for log in message_logs]
        self.calls.append((start, time.time(), [m["question"] for m in metadata]))
        rewards = torch.tensor([float(a.endswith(":1")) for a in answers])  # [B]
        n = len(answers)
        return EnvironmentReturn(
            [{"role": "environment", "content": ""}] * n,
            [{}] * n,
            [None] * n,
            rewards,
            torch.ones(n, dtype=torch.bool),
            answers,
        )

    def global_post_process_and_metrics(self, batch):
        return batch, {"env/calls": float(len(self.calls))}

    def intervals(self) -> list[tuple[float, float, list[str]]]:
        return self.calls


def test_each_generation_batch_is_judged_while_the_next_is_sampled(ray_cluster):
    prompts = [Prompt(f"q{i}", f"q{i}", "1") for i in range(4)]
    policy = _Policy.options(**actor_options()).remote()
    env = _Env.options(**actor_options()).remote()
    handles = PolicyHandle(policy), EnvHandle(env)
    try:
        whole = rollout(*handles, prompts, 2)
        batched = rollout(*handles, prompts, 2, batch_size=5)  # 5 samples: two whole prompts a batch
        generated, judged = ray.get(policy.intervals.remote()), ray.get(env.intervals.remote())
        metrics = handles[1].metrics_since_last()
    finally:
        ray.kill(policy)
        ray.kill(env)
    assert whole.rewards.tolist() == batched.rewards.tolist() == [1.0, 0.0] * 4
    assert [s.text for s in batched.samples] == [f"q{i}:{k}" for i in range(4) for k in (1, 2)]
    assert metrics == {"env/calls": 3.0}  # one step for the whole rollout, two for the batched one
    assert [size for _, _, size in generated] == [8, 4, 4]
    assert [questions for _, _, questions in judged[1:]] == [["q0", "q0", "q1", "q1"], ["q2", "q2", "q3", "q3"]]
    (_, _, _), (_, _, _), (second_start, second_end, _) = generated
    first_judged_start, first_judged_end, _ = judged[1]
    assert first_judged_start < second_end and second_start < first_judged_end  # they ran at once
