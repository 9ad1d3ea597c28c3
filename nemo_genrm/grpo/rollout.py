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
    policy: PolicyHandle,
    env: EnvHandle,
    prompts: Sequence[Prompt],
    num_generations: int,
    seed: int | None = None,
    *,
    batch_size: int | None = None,
) -> Rollout:
    """Sample ``num_generations`` responses per prompt and score them in the environment.

    With ``batch_size`` (and a policy and an environment that are Ray actors), the samples are
    generated in batches of whole prompts (at most ``batch_size`` samples, at least one prompt)
    and each batch goes to the environment as soon as it is sampled, so the judge scores it
    while the policy samples the next; the rewards come back in sample order all the same.
    Without it, one generation call and one environment step.

    Args:
        policy: The policy.
        env: The environment.
        prompts: The step's prompts.
        num_generations: Responses per prompt; samples of a prompt are contiguous.
        seed: Sample from a generator seeded with this (see ``PolicyWorker.generate``); the
            samples are then drawn in one call (a seeded call draws the same whatever its size).
        batch_size: Samples per generation batch to score while the next is sampled.

    Returns:
        The :class:`Rollout`; ``generation_s`` runs until the last batch is sampled, ``env_s``
        from then until the last score is in (the judge time the step waits for).

    Raises:
        RuntimeError: The environment returned a number of rewards different from the samples.
    """
    expanded = [p for p in prompts for _ in range(num_generations)]
    per_batch = len(expanded)
    if batch_size is not None and seed is None and policy.is_actor and env.is_actor:
        per_batch = max(1, batch_size // num_generations) * num_generations
    start = time.perf_counter()
    batches = [expanded[i : i + per_batch] for i in range(0, len(expanded), per_batch)]
    samples: list[GeneratedSample] = []
    scoring = []
    pending = policy.start_generate([p.text for p in batches[0]]) if seed is None else None
    for index, batch in enumerate(batches):
        if pending is None:  # a seeded draw: one call
            done = policy.generate([p.text for p in batch], seed)
        else:
            done = pending()
            if index + 1 < len(batches):  # the policy samples the next batch while the judge scores this one
                pending = policy.start_generate([p.text for p in batches[index + 1]])
        samples.extend(done)
        scoring.append(env.start_step(message_logs(batch, done), [p.metadata for p in batch]))
    generated = time.perf_counter()
    results = [wait() for wait in scoring]
    scored = time.perf_counter()
    return _gathered(batches, samples, results, generated - start, scored - generated)


def _gathered(
    batches: list[list[Prompt]], samples: list[GeneratedSample], returns: list[Any], generation_s: float, env_s: float
) -> Rollout:
    """One :class:`Rollout` from the environment's returns of consecutive batches."""
    expanded = [p for batch in batches for p in batch]
    rewards = [torch.as_tensor(r.rewards, dtype=torch.float32).reshape(-1) for r in returns]  # [B] each
    for batch, got in zip(batches, rewards, strict=True):
        if got.numel() != len(batch):
            raise RuntimeError(f"the environment returned {got.numel()} rewards for {len(batch)} samples")
    answers: list[Any] = []
    metadata: list[Any] = []
    for result, size in zip(returns, (len(b) for b in batches), strict=True):
        got = getattr(result, "answers", None)
        answers += list(got) if got is not None else [None] * size
        metadata += list(result.metadata) if result.metadata is not None else [None] * size
    results = sample_results(metadata, len(expanded))
    return Rollout(
        prompts=expanded,
        samples=samples,
        rewards=torch.cat(rewards),  # [N]
        valid=torch.tensor([r is None or not r.masked for r in results], dtype=torch.bool),  # [N]
        results=results,
        answers=answers,
        generation_s=generation_s,
        env_s=env_s,
    )
