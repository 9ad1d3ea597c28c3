"""One rollout: sample responses for a batch of prompts and score them in the environment.

The environment sees exactly what NeMo-RL sends: per sample a message log of ``role``/``content``
dicts (the user content is the chat-templated prompt text, the assistant content the decoded
response) and a metadata dict with the raw ``question`` and the ``ground_truth``. What it
decided per sample comes back typed (:class:`~nemo_genrm.samples.types.SampleResult`, carried by the
returned metadata); the rollout keeps it next to the rewards.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from nemo_genrm.grpo.data import Prompt
from nemo_genrm.grpo.handles import EnvHandle, PolicyHandle
from nemo_genrm.grpo.policy import GeneratedSample
from nemo_genrm.samples.types import SampleResult, sample_results

__all__ = ["Rollout", "message_logs", "rollout"]


@dataclass
class Rollout:
    """The samples of one step and their rewards.

    Attributes:
        prompts: The prompt of each sample (each prompt repeated once per generation).
        samples: The generated responses.
        rewards: ``[N]`` float32 rewards from the environment.
        valid: ``[N]`` bool; False for samples the environment masked (left out of baselines).
        results: The environment's result per sample (``None`` where it gave none, e.g. an
            environment other than this package's).
        answers: The answers the environment judged (``None`` where none was).
        generation_s: Wall time of sampling.
        env_s: Wall time of the environment step (the judge).
    """

    prompts: list[Prompt]
    samples: list[GeneratedSample]
    rewards: torch.Tensor
    valid: torch.Tensor
    results: list[SampleResult | None]
    answers: list[Any]
    generation_s: float
    env_s: float

    def __len__(self) -> int:
        return len(self.samples)


def message_logs(prompts: Sequence[Prompt], samples: Sequence[GeneratedSample]) -> list[list[dict[str, str]]]:
    """NeMo-RL-style message logs: the templated prompt as the user turn, the response after it."""
    return [
        [{"role": "user", "content": p.text}, {"role": "assistant", "content": s.text}]
        for p, s in zip(prompts, samples, strict=True)
    ]


def rollout(
    policy: PolicyHandle, env: EnvHandle, prompts: Sequence[Prompt], num_generations: int, seed: int | None = None
) -> Rollout:
    """Sample ``num_generations`` responses per prompt and score them in one environment step.

    Args:
        policy: The policy.
        env: The environment.
        prompts: The step's prompts.
        num_generations: Responses per prompt; samples of a prompt are contiguous.
        seed: Sample from a generator seeded with this (see ``PolicyWorker.generate``).

    Returns:
        The :class:`Rollout`.

    Raises:
        RuntimeError: The environment returned a number of rewards different from the samples.
    """
    expanded = [p for p in prompts for _ in range(num_generations)]
    start = time.perf_counter()
    samples = policy.generate([p.text for p in expanded], seed)
    generated = time.perf_counter()
    result = env.step(message_logs(expanded, samples), [p.metadata for p in expanded])
    scored = time.perf_counter()
    rewards = torch.as_tensor(result.rewards, dtype=torch.float32).reshape(-1)  # [N]
    if rewards.numel() != len(expanded):
        raise RuntimeError(f"the environment returned {rewards.numel()} rewards for {len(expanded)} samples")
    answers = list(result.answers) if getattr(result, "answers", None) is not None else [None] * len(expanded)
    results = sample_results(result.metadata, len(expanded))
    return Rollout(
        prompts=expanded,
        samples=samples,
        rewards=rewards,
        valid=torch.tensor([r is None or not r.masked for r in results], dtype=torch.bool),  # [N]
        results=results,
        answers=answers,
        generation_s=generated - start,
        env_s=scored - generated,
    )
