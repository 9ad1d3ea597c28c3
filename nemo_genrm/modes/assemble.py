"""From a mode's per-sample results to NeMo-RL's ``EnvironmentReturn``."""

from __future__ import annotations

from typing import Any

import torch

from nemo_genrm.env_inputs import PreparedSample
from nemo_genrm.env_types import JUDGED, PARSE_FAILURE, EnvironmentReturn
from nemo_genrm.metrics import StepTally
from nemo_genrm.modes.base import SampleResult


def assemble(
    samples: list[PreparedSample],
    results: list[SampleResult],
    metas: list[Any],
    tally: StepTally,
    *,
    mask_parse_failures: bool,
) -> EnvironmentReturn:
    """One step call's return, counting its samples into ``tally``.

    Args:
        samples: The call's prepared samples.
        results: The mode's result per sample.
        metas: The caller's metadata per sample (dicts get a ``genrm`` entry).
        tally: The call's counters.
        mask_parse_failures: ``verdict.on_parse_failure: mask``.

    Returns:
        ``EnvironmentReturn`` with ``rewards`` float32 ``[B]`` and ``terminateds`` all True.
    """
    rewards, observations, out_meta, answers = [], [], [], []
    for sample, result, meta in zip(samples, results, metas, strict=True):
        masked = result.masked or (mask_parse_failures and result.reason == PARSE_FAILURE)
        reward = result.reward if result.reason == JUDGED else 0.0
        tally.counts[result.reason] = tally.counts.get(result.reason, 0) + 1
        tally.truncated_replies += int(result.truncated)
        if masked:
            tally.masked += 1
        else:
            tally.reward_sum += reward
            tally.reward_count += 1
        sent = sample.reason is None
        tally.sent_samples += int(sent)
        rewards.append(reward)
        answers.append(sample.answer if sent else None)
        observations.append({"role": "environment", "content": _observation(result, reward)})
        if isinstance(meta, dict):
            info = {"reason": result.reason, "verdict": result.verdict, "masked": masked, **result.info}
            meta = {**meta, "genrm": info}
        out_meta.append(meta)
    size = len(samples)
    return EnvironmentReturn(
        observations=observations,
        metadata=out_meta,
        next_stop_strings=[None] * size,
        rewards=torch.tensor(rewards, dtype=torch.float32).reshape(size),  # [B]
        terminateds=torch.ones(size, dtype=torch.bool),  # [B]
        answers=answers,
    )


def _observation(result: SampleResult, reward: float) -> str:
    if result.reason != JUDGED:
        return f"GenRM: not scored ({result.reason})"
    if result.verdict is not None:
        word = "correct" if result.verdict == 1 else "incorrect"
        return f"GenRM: {word}" if result.prob is None else f"GenRM: {word} (p={result.prob:.3f})"
    return f"GenRM: reward {reward:.3f}"
