"""Small helpers of the GenRM environment: judge counters, fatal errors, tokenizer specials, worker facts."""

from __future__ import annotations

import logging
from typing import Any

import ray

from nemo_genrm.errors import ConfigError, JudgeClosedError, JudgeUnavailableError
from nemo_genrm.judges.base import Judge, JudgeStats
from nemo_genrm.samples.metrics import StepTally

logger = logging.getLogger(__name__)


def worker_facts(_host: Any) -> dict[str, Any]:
    """Runs inside a judge worker actor: its pid, resources and placement group."""
    import os

    context = ray.get_runtime_context()
    return {
        "pid": os.getpid(),
        "resources": context.get_assigned_resources(),
        "placement_group_id": context.get_placement_group_id(),
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
    }


def special_tokens(judge: Judge) -> list[str]:
    """The judge tokenizer's special tokens, when the engine exposes its tokenizer.

    In-process engines and :class:`~nemo_genrm.judges.http.HttpJudge` have ``tokenizer`` (the
    HTTP judge's is ``None`` without ``judge.tokenizer``); pooled engines have ``fitter.tokenizer``.
    """
    tokenizer = getattr(judge, "tokenizer", None) or getattr(getattr(judge, "fitter", None), "tokenizer", None)
    tokens = getattr(tokenizer, "all_special_tokens", None)
    return [t for t in tokens if isinstance(t, str)] if isinstance(tokens, (list, tuple)) else []


def add_call_counts(tally: StepTally, counts: JudgeStats) -> None:
    """Add the counters of the step's judge calls (read from their results) to ``tally``."""
    tally.prompt_tokens += counts.prompt_tokens
    tally.output_tokens += counts.output_tokens
    tally.truncated_prompts += counts.truncated
    tally.engine_errors += counts.errors
    tally.judge_restarts += counts.restarts
    tally.deadline_exceeded += counts.deadline_exceeded
    tally.judge_unavailable += counts.unavailable_calls
    tally.judge_node_losses += counts.node_losses


def is_fatal(exc: BaseException) -> bool:
    """Whether a judge exception must stop training rather than become ``judge_error`` rewards.

    A misconfiguration fails again on every step, a judge that was shut down cannot answer any
    more, and a judge that stayed unavailable past its grace period will not come back.
    """
    return isinstance(exc, (ConfigError, JudgeClosedError, JudgeUnavailableError))


