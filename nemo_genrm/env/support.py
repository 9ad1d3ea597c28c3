"""Small helpers of the GenRM environment: judge counters, fatal errors, tokenizer specials, worker facts."""

from __future__ import annotations

import logging
from typing import Any

import ray

from nemo_genrm.errors import ConfigError, JudgeClosedError, JudgeUnavailableError
from nemo_genrm.judges.base import Judge, JudgeStats
from nemo_genrm.env.metrics import StepTally

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


def safe_stats(judge: Judge) -> JudgeStats | None:
    """The judge's counters, or ``None`` (logged) when it cannot give them."""
    try:
        return judge.stats()
    except Exception:
        logger.warning("could not read the judge's counters", exc_info=True)
        return None


def add_stats_delta(tally: StepTally, before: JudgeStats | None, after: JudgeStats | None) -> None:
    """Add what the judge's counters grew by between two readings to ``tally``."""
    if before is None or after is None:
        return
    tally.prompt_tokens += max(0, after.prompt_tokens - before.prompt_tokens)
    tally.output_tokens += max(0, after.output_tokens - before.output_tokens)
    tally.truncated_prompts += max(0, after.truncated - before.truncated)
    tally.engine_errors += max(0, after.errors - before.errors)
    tally.judge_restarts += max(0, after.restarts - before.restarts)
    tally.deadline_exceeded += max(0, after.deadline_exceeded - before.deadline_exceeded)
    tally.judge_unavailable += max(0, after.unavailable_calls - before.unavailable_calls)


def is_fatal(exc: BaseException) -> bool:
    """Whether a judge exception must stop training rather than become ``judge_error`` rewards.

    A misconfiguration fails again on every step, a judge that was shut down cannot answer any
    more, and a judge that stayed unavailable past its grace period will not come back.
    """
    return isinstance(exc, (ConfigError, JudgeClosedError, JudgeUnavailableError))


