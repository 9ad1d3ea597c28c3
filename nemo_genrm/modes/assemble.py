"""From a mode's per-sample results to NeMo-RL's ``EnvironmentReturn``, and the mode metrics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from nemo_genrm.env_inputs import PreparedSample
from nemo_genrm.env_types import JUDGED, PARSE_FAILURE, EnvironmentReturn
from nemo_genrm.metrics import PREFIX, StepTally
from nemo_genrm.modes.base import SampleResult

# Rates derived from the mode counters: metric -> (numerator, denominator).
RATES: dict[str, tuple[str, str]] = {
    "votes/agreement": ("votes/agreement_sum", "votes/requests"),
    "votes/tie_rate": ("votes/ties", "votes/requests"),
    "swap/disagreement_rate": ("swap/disagreements", "swap/pairs"),
    "pairwise/order_disagreement_rate": ("pairwise/order_disagreements", "pairwise/pairs"),
    "pairwise/failed_pair_rate": ("pairwise/failed_pairs", "pairwise/pairs"),
    "rubric/met_rate": ("rubric/items_met", "rubric/items"),
    "rubric/item_failure_rate": ("rubric/item_failures", "rubric/items"),
}


def mode_metrics(counters: Mapping[str, float]) -> dict[str, float]:
    """The ``genrm/<mode>/*`` metrics: every counter, and the rates of :data:`RATES` it allows.

    ``pairwise/order_disagreement_rate`` is over the pairs judged in both orders (failed pairs
    left out); every other rate is over its counter's total.
    """
    out = {PREFIX + name: float(value) for name, value in counters.items()}
    for name, (num, den) in RATES.items():
        total = counters.get(den, 0.0)
        if name == "pairwise/order_disagreement_rate":
            total -= counters.get("pairwise/failed_pairs", 0.0)
        if den in counters:
            out[PREFIX + name] = counters.get(num, 0.0) / total if total else 0.0
    return out


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
