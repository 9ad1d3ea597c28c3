"""The environment's side of the reward watchdog (:mod:`nemo_genrm.watchdog`): each judge call's
real samples read for the drift signals, and the canaries (with the ``context`` probes of the judged
samples) judged after them in a call of their own.

The canaries go through the environment's own road (``prepare_sample``, the reward mode, the
prompt builder's fence, the verdict parser), after the real results are settled: they never
change a real sample's reward, order, grouping or ``genrm/*`` counters, and a failure among them
is logged and counted (``genrm/canary/errors``), never raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from nemo_genrm.config import GenRMConfig
from nemo_genrm.env.intake import StepCall
from nemo_genrm.prompts import PromptBuilder
from nemo_genrm.samples.inputs import PreparedSample, prepare_sample
from nemo_genrm.samples.metrics import StepTally
from nemo_genrm.samples.types import SampleResult
from nemo_genrm.watchdog import Canary, Watchdog, WatchTally
from nemo_genrm.watchdog.shapes import response_text

logger = logging.getLogger(__name__)

JudgeSamples = Callable[[list[PreparedSample], list[Any]], tuple[list[SampleResult], StepTally]]
"""``(samples, metas) -> (results, tally of the judge call)``: the reward mode on a call of its own."""


def observe_calls(
    watchdog: Watchdog,
    calls: Sequence[StepCall],
    per_call: list[list[SampleResult]],
    batch: StepTally,
    watch: WatchTally,
) -> list[list[SampleResult]]:
    """Each call's samples read for the signals (under ``action: mask``, flagged shapes masked)."""
    out = []
    for index, (call, results) in enumerate(zip(calls, per_call, strict=True)):
        texts = [response_text(log) for log in call.logs] if call.logs is not None else [None] * len(results)
        modes = batch.modes if index == 0 else {}  # the judge call's mode counters, counted once
        out.append(watchdog.observe(call.samples, texts, results, modes, watch))
    return out


def build_watchdog(cfg: GenRMConfig, mode: str) -> Watchdog | None:
    """The reward watchdog of ``reward.watchdog`` (``None`` when off); canaries in reference mode only."""
    watch = cfg.reward.watchdog
    if not watch.enabled:
        return None
    if mode != "reference" and watch.canaries.rate > 0:
        logger.info(
            "reward.watchdog: no canaries in mode %r (no reference to be wrong against); "
            "its drift signals and alarm run",
            mode,
        )
    return Watchdog(watch, canaries=mode == "reference")


def canary_preparer(
    builder: PromptBuilder, needs_reference: bool, response_chars: int | None
) -> Callable[[Canary], PreparedSample]:
    """Reads a canary as the environment reads a policy's sample."""

    def prepare(canary: Canary) -> PreparedSample:
        log = [{"role": "user", "content": canary.question}, {"role": "assistant", "content": canary.response}]
        meta = {"question": canary.question, "ground_truth": canary.reference}
        return prepare_sample(log, meta, builder, needs_reference=needs_reference, response_chars=response_chars)

    return prepare


def judge_canaries(
    watchdog: Watchdog,
    calls: Sequence[StepCall],
    real_prompts: int,
    watch: WatchTally,
    *,
    prepare: Callable[[Canary], PreparedSample],
    judge: JudgeSamples,
    per_call: Sequence[Sequence[SampleResult]] | None = None,
) -> None:
    """Plan this judge call's canaries, judge them with ``judge`` and count their outcomes.

    ``per_call`` (the real results, per call) lets the judged samples give ``context`` probes.
    """
    samples = [s for call in calls for s in call.samples]
    results = [r for call_results in per_call for r in call_results] if per_call is not None else None
    try:
        planned = watchdog.plan(samples, real_prompts, prepare, watch, results)
        if not planned:
            return
        metas = [{"question": c.question, "ground_truth": c.reference} for c, _ in planned]
        results, tally = judge([p for _, p in planned], metas)
        watch.bump("judge_prompts", float(tally.judge_prompts), canary=True)
        watch.bump("judge_time_s", tally.judge_time_s, canary=True)
        watchdog.record(planned, results, watch)
    except Exception:
        logger.exception("the watchdog's canaries failed; the real samples are not affected")
        watch.bump("errors", canary=True)
