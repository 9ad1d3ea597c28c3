"""From a mode's per-sample results to NeMo-RL's ``EnvironmentReturn``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from nemo_genrm.samples.inputs import PreparedSample
from nemo_genrm.samples.metrics import StepTally
from nemo_genrm.samples.types import JUDGE_ERROR, JUDGED, PARSE_FAILURE, EnvironmentReturn, SampleResult


def assemble(
    samples: list[PreparedSample],
    results: list[SampleResult],
    metas: list[Any],
    tally: StepTally,
    *,
    mask_parse_failures: bool,
) -> EnvironmentReturn:
    """One step call's return, counting its samples into ``tally``.

    The mode's results are settled here (reward 0 unless judged; a ``judge_error`` always masked,
    since its verdict rests on no judge answer and its 0 would train as one; parse failures
    masked under ``mask_parse_failures``) and every sample's metadata comes back as a dict whose
    ``genrm`` entry is the settled result (:class:`~nemo_genrm.samples.types.GenRMInfo`):
    see :func:`returned_metadata`.

    Args:
        samples: The call's prepared samples.
        results: The mode's result per sample.
        metas: The caller's metadata per sample, whatever it is.
        tally: The call's counters.
        mask_parse_failures: ``verdict.on_parse_failure: mask``.

    Returns:
        ``EnvironmentReturn`` with ``rewards`` float32 ``[B]`` and ``terminateds`` all True.
    """
    rewards, observations, out_meta, answers = [], [], [], []
    for sample, result, meta in zip(samples, results, metas, strict=True):
        result = dataclasses.replace(
            result,
            reward=result.reward if result.reason == JUDGED else 0.0,
            masked=(
                result.masked
                or result.reason == JUDGE_ERROR
                or (mask_parse_failures and result.reason == PARSE_FAILURE)
            ),
        )
        tally.count(result)
        sent = sample.reason is None
        tally.sent_samples += int(sent)
        rewards.append(result.reward)
        # The bare value where the response states one (NeMo-RL's cons@k votes on it), else
        # what the judge was shown (the whole response, pairwise and rubric modes).
        answers.append((sample.value if sample.value is not None else sample.answer) if sent else None)
        observations.append({"role": "environment", "content": _observation(result)})
        out_meta.append(returned_metadata(meta, result))
    size = len(samples)
    return EnvironmentReturn(
        observations=observations,
        metadata=out_meta,
        next_stop_strings=[None] * size,
        rewards=torch.tensor(rewards, dtype=torch.float32).reshape(size),  # [B]
        terminateds=torch.ones(size, dtype=torch.bool),  # [B]
        answers=answers,
    )


def returned_metadata(meta: Any, result: SampleResult) -> dict[str, Any]:
    """A sample's returned metadata: the caller's, with its ``genrm`` result, always a dict.

    A mapping comes back as a copy of its items with ``genrm`` set; ``None`` (no metadata) as
    ``{"genrm": ...}``; anything else (a string, a number, a list: ``bad_input``) as
    ``{"metadata": <what was passed>, "genrm": ...}``, so that code reading
    ``m["genrm"]["reason"]`` works on every sample and nothing the caller passed is lost.
    """
    if isinstance(meta, Mapping):
        return {**meta, "genrm": result.metadata()}
    if meta is None:
        return {"genrm": result.metadata()}
    return {"metadata": meta, "genrm": result.metadata()}


def _observation(result: SampleResult) -> str:
    if result.reason != JUDGED:
        return f"GenRM: not scored ({result.reason})"
    if result.verdict is not None:
        word = "correct" if result.verdict == 1 else "incorrect"
        return f"GenRM: {word}" if result.prob is None else f"GenRM: {word} (p={result.prob:.3f})"
    return f"GenRM: reward {result.reward:.3f}"
