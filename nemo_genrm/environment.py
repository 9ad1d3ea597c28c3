"""The GenRM environment: a frozen judge LLM turns each policy answer into a reward.

:class:`GenRMEnvironmentImpl` holds the logic and runs without Ray when given a judge;
:class:`GenRMEnvironment` is the Ray actor a GRPO loop (NeMo-RL's or this package's) starts with
the ``env.genrm`` config section. One :meth:`~GenRMEnvironmentImpl.step`:

1. reads each sample (last assistant message, ``metadata["question"]`` or the user message,
   ``metadata["ground_truth"]``) and extracts the answer; malformed samples are decided here;
2. joins the concurrent step calls (:mod:`nemo_genrm.coalesce`): calls that arrive within
   ``coalesce.max_wait_ms`` of each other, or while the judge is busy, share one judge call
   (NeMo-RL's asynchronous rollout calls ``step`` once per sample, from many threads);
3. renders one judge prompt per distinct (question, reference, answer) across those calls
   (``reward.dedup``);
4. makes ONE batched judge call (``generate`` then parse, or ``score`` for verdicts from
   logprobs), waking a colocated judge before it and putting it to sleep after;
5. returns to each caller NeMo-RL's ``EnvironmentReturn`` with one reward per sample of its own
   call, in its input order.

A caller's bad input raises in that caller only; when a judge call shared by several step calls
raises, each call is judged again on its own, so one caller's samples never change another's
rewards.

Bad data never raises out of ``step``: every sample gets a reward and a reason
(:data:`nemo_genrm.env_types.REASONS`), and a judge engine that fails at run time gives its
samples ``judge_error``. What training must not run through raises: caller bugs (a ``metadata``
list whose length differs from the batch, or ``metadata`` that is not a list), a judge config
the engine refuses (:class:`~nemo_genrm.errors.ConfigError`), a judge that was shut down
(:class:`~nemo_genrm.errors.JudgeClosedError`) and a judge that is gone for good
(:class:`~nemo_genrm.errors.JudgeUnavailableError`); all are told apart by type.
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ray
import torch

from nemo_genrm.coalesce import Coalescer
from nemo_genrm.config import GenRMConfig, JudgeConfig, validate
from nemo_genrm.deadline import step_deadline
from nemo_genrm.env_inputs import PreparedSample, metadata_list, prepare_sample
from nemo_genrm.env_support import add_stats_delta, check_count, is_fatal, safe_stats, special_tokens, worker_facts
from nemo_genrm.env_types import (
    JUDGE_ERROR,
    JUDGED,
    PARSE_FAILURE,
    TOO_LONG,
    EnvironmentInterface,
    EnvironmentReturn,
)
from nemo_genrm.errors import JudgeClosedError
from nemo_genrm.judges.base import Judge, JudgeRequest, JudgeStats
from nemo_genrm.metrics import StepTally
from nemo_genrm.prompts import PromptBuilder
from nemo_genrm.ray_env import actor_runtime_env
from nemo_genrm.resources import JudgeResources, acquire_resources
from nemo_genrm.verdicts import VerdictParser

logger = logging.getLogger(__name__)

LATENCY_WINDOW = 100
"""Judge calls kept for the latency percentiles."""

_LENGTH_ERRORS = frozenset({"prompt_too_long"})


@dataclass(frozen=True)
class _StepCall:
    """One ``step`` call waiting for its share of a judge call."""

    samples: list[PreparedSample]
    metas: list[Any]
    start: float
    deadline: float  # time.monotonic() by which this call must be answered


class _SharedCallFailed(Exception):
    """A judge call shared by several step calls raised; retry each alone."""


@dataclass(frozen=True)
class JudgeOutcome:
    """The judge's result for one distinct prompt.

    Attributes:
        reason: ``judged``, ``parse_failure``, ``too_long`` or ``judge_error``.
        verdict: 1 or 0 when judged, else ``None``.
        prob: P(positive label) when the verdict came from logprobs, else ``None``.
    """

    reason: str
    verdict: int | None = None
    prob: float | None = None


class GenRMEnvironmentImpl(EnvironmentInterface):
    """The environment's logic, usable without Ray (see the module docstring).

    Args:
        cfg: The ``env.genrm`` section (dict, DictConfig or :class:`GenRMConfig`).
        judge: A ready judge to use instead of building one (it is then not shut down here).
        placement_group: Colocated only: the placement group to join (wins over
            ``resources.colocate_with``).
        policy_gpu_fraction: Colocated only: share of each GPU the policy holds, when known,
            to check that the fractions add up to at most 1.

    Raises:
        ConfigError: Every problem with the config or the resource layout, at once.
    """

    def __init__(
        self,
        cfg: Any,
        *,
        judge: Judge | None = None,
        placement_group: Any = None,
        policy_gpu_fraction: float | None = None,
    ) -> None:
        self.cfg: GenRMConfig = validate(GenRMConfig, cfg, prefix="env.genrm")
        self._builder = PromptBuilder.from_config(self.cfg.prompt, self.cfg.verdict)
        self._parser = VerdictParser.from_config(self.cfg.verdict)
        self._needs_reference = "reference" in self._builder.template.fields
        self._labels = (self.cfg.verdict.positive, self.cfg.verdict.negative)
        self._colocated = self.cfg.resources.placement == "colocated"
        self._resources: JudgeResources | None = None
        self._owns_judge = judge is None
        if judge is None:
            judge = self._start_judge(placement_group, policy_gpu_fraction)
        self._judge: Judge | None = judge
        try:
            special = special_tokens(judge)
            if special:  # also defang the judge tokenizer's own special tokens inside answers
                self._builder = PromptBuilder.from_config(self.cfg.prompt, self.cfg.verdict, special_tokens=special)
            if self._colocated:
                judge.sleep()  # free the device for the policy until the first step
        except BaseException:
            self.shutdown()
            raise
        self._latencies: collections.deque[float] = collections.deque(maxlen=LATENCY_WINDOW)
        self._last = StepTally()
        self._since_global = StepTally()
        self._metrics_lock = threading.Lock()
        self._coalescer: Coalescer[_StepCall, EnvironmentReturn] = Coalescer(
            self._run_calls,
            max_wait_s=self.cfg.coalesce.max_wait_ms / 1000.0,
            max_items=self.cfg.coalesce.max_samples,
        )

    def _judge_config(self) -> JudgeConfig:
        """The judge section, with ``sleep_buffers: auto`` resolved for this placement."""
        judge = self.cfg.judge
        if judge.dtensor.sleep_buffers != "auto" or not self._colocated:
            return judge
        # A colocated judge sleeps every step: its pinned buffers are allocated at load, so the
        # first sleep runs at copy speed too.
        return judge.model_copy(update={"dtensor": judge.dtensor.model_copy(update={"sleep_buffers": "at_load"})})

    def _start_judge(self, placement_group: Any, policy_gpu_fraction: float | None) -> Judge:
        from nemo_genrm.judges import create_judge

        self._resources = acquire_resources(
            self.cfg, placement_group=placement_group, policy_gpu_fraction=policy_gpu_fraction
        )
        try:
            return create_judge(
                self._judge_config(), self._resources.placement, fault_tolerance=self.cfg.fault_tolerance
            )
        except BaseException:
            self._resources.release()
            raise

    # ------------------------------------------------------------------------------ step
    def step(self, message_log_batch: Sequence[Any], metadata: Sequence[Any] | None) -> EnvironmentReturn:
        """Judge a batch of responses; one reward per sample, in order.

        Safe to call from many threads at once: concurrent calls share judge calls (see the
        module docstring) and each gets exactly its own results.

        Args:
            message_log_batch: Per sample, the conversation (dicts with ``role`` and
                ``content``); the last ``assistant`` message is the response judged.
            metadata: Per sample, a dict with ``ground_truth`` and optionally ``question``
                (``None`` entries, or ``None`` for the whole batch, are accepted).

        Returns:
            ``EnvironmentReturn(observations, metadata, next_stop_strings, rewards,
            terminateds, answers)``; ``rewards`` is float32 ``[B]``, ``terminateds`` all True.

        Raises:
            ValueError: ``metadata`` has a different length than the batch.
            TypeError: ``metadata`` is neither ``None`` nor a list.
            ConfigError: The judge refused its config (e.g. labels it cannot score).
            JudgeClosedError: The environment or its judge was shut down.
            JudgeUnavailableError: The judge has had no live worker past
                ``fault_tolerance.unavailable_grace_s``.
        """
        start = time.perf_counter()
        # The deadline starts now: input checks, coalescing waits and fitting all count.
        deadline = time.monotonic() + self.cfg.fault_tolerance.step_timeout_s
        logs = list(message_log_batch or [])
        metas = metadata_list(metadata, len(logs))
        samples = [
            prepare_sample(log, meta, self._builder, needs_reference=self._needs_reference)
            for log, meta in zip(logs, metas, strict=True)
        ]
        return self._coalescer.submit(_StepCall(samples, metas, start, deadline), size=max(1, len(samples)))

    def _run_calls(self, calls: list[_StepCall]) -> list[EnvironmentReturn | BaseException]:
        """Judge every call's samples in one engine call; one result (or error) per call."""
        engine = StepTally()
        with step_deadline(min(call.deadline for call in calls)):  # the earliest caller's
            per_call = self._judge_calls(calls, engine)
        results: list[EnvironmentReturn | BaseException] = []
        batch = StepTally()
        batch.add(engine)
        for call, outcomes in zip(calls, per_call, strict=True):
            tally = StepTally(steps=1, samples=len(call.samples))
            try:
                results.append(self._assemble(call.samples, outcomes, call.metas, tally))
            except Exception as exc:  # this caller's own failure; the others keep their results
                logger.exception("could not assemble the results of one step call")
                results.append(exc)
                continue
            tally.step_time_s = time.perf_counter() - call.start
            batch.add(tally)
        with self._metrics_lock:
            self._last = batch
            self._since_global.add(batch)
        logger.debug("genrm judge call for %d step call(s): %d prompt(s)", len(calls), engine.judge_prompts)
        return results

    def _judge_calls(self, calls: list[_StepCall], tally: StepTally) -> list[list[JudgeOutcome]]:
        """Per call, per sample, the judge's outcome; dedup runs across calls.

        When the shared engine call raises (a non-fatal error), each call's prompts are judged
        again on their own, so a prompt that breaks the engine only costs its own caller.
        """
        merged = [sample for call in calls for sample in call.samples]
        try:
            outcomes = self._judge_samples(merged, tally, isolate=len(calls) > 1)
        except _SharedCallFailed:
            logger.warning("a judge call shared by %d step calls failed; judging each alone", len(calls))
            return [self._judge_samples(call.samples, tally, isolate=False) for call in calls]
        per_call, offset = [], 0
        for call in calls:
            per_call.append(outcomes[offset : offset + len(call.samples)])
            offset += len(call.samples)
        return per_call

    def _judge_samples(self, samples: list[PreparedSample], tally: StepTally, *, isolate: bool) -> list[JudgeOutcome]:
        slot, requests = self._requests(samples)
        outcomes = self._judge_all(requests, tally, isolate=isolate)
        return [
            outcomes[s] if s is not None else JudgeOutcome(sample.reason or JUDGE_ERROR)
            for s, sample in zip(slot, samples, strict=True)
        ]

    def _requests(self, samples: list[PreparedSample]) -> tuple[list[int | None], list[JudgeRequest]]:
        """Per sample, the index of its prompt (``None`` when not sent); the distinct prompts."""
        slot: list[int | None] = []
        requests: list[JudgeRequest] = []
        seen: dict[tuple[str, str, str], int] = {}
        for sample in samples:
            if sample.reason is not None:
                slot.append(None)
                continue
            if self.cfg.reward.dedup and sample.key in seen:
                slot.append(seen[sample.key])
                continue
            prompt = self._builder.build(
                question=sample.question, reference=sample.reference, candidate=sample.answer or ""
            )
            seen[sample.key] = len(requests)
            slot.append(len(requests))
            requests.append(JudgeRequest(prompt.messages, shrinkable=prompt.candidate or None))
        return slot, requests

    def _judge_all(self, requests: list[JudgeRequest], tally: StepTally, *, isolate: bool = False) -> list[JudgeOutcome]:
        """One batched judge call; one outcome per request, whatever happens.

        With ``isolate``, a non-fatal engine exception raises :class:`_SharedCallFailed` (the
        caller retries per step call) instead of giving every request ``judge_error``.
        """
        if not requests:
            return []
        judge = self._require_judge()
        before = safe_stats(judge)
        try:
            if self._colocated:
                t0 = time.perf_counter()
                judge.wake()
                tally.wake_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            try:
                outcomes = self._call(judge, requests)
            finally:
                elapsed = time.perf_counter() - t0
                tally.judge_calls += 1
                tally.judge_time_s += elapsed
                with self._metrics_lock:
                    self._latencies.append(elapsed)
        except Exception as exc:
            if is_fatal(exc):
                raise
            if isolate:
                raise _SharedCallFailed from exc
            logger.exception("judge call failed for %d prompt(s); their samples get judge_error", len(requests))
            outcomes = [JudgeOutcome(JUDGE_ERROR)] * len(requests)
        finally:
            if self._colocated:
                self._sleep(judge, tally)
            # Counted on every path: a shared call that failed (and is retried per caller) still
            # sent its prompts and may have spent tokens and engine errors.
            tally.judge_prompts += len(requests)
            add_stats_delta(tally, before, safe_stats(judge))
        return outcomes

    @staticmethod
    def _sleep(judge: Judge, tally: StepTally) -> None:
        """Put a colocated judge to sleep; a failure is logged, the verdicts are kept."""
        t0 = time.perf_counter()
        try:
            judge.sleep()
        except Exception:
            logger.exception("could not put the colocated judge to sleep")
        tally.sleep_s += time.perf_counter() - t0

    def _call(self, judge: Judge, requests: list[JudgeRequest]) -> list[JudgeOutcome]:
        if self.cfg.judge.verdict_from == "logprobs":
            scores = judge.score(requests, list(self._labels))
            check_count(scores, requests)
            return [self._from_probs(s.probs, s.error) for s in scores]
        generations = judge.generate(requests)
        check_count(generations, requests)
        return [self._from_text(g.text, g.error) for g in generations]

    def _from_text(self, text: str | None, error: str | None) -> JudgeOutcome:
        if error is not None or text is None:
            return JudgeOutcome(_error_reason(error))
        verdict = self._parser.parse(text)
        if verdict.value is None:
            return JudgeOutcome(PARSE_FAILURE)
        return JudgeOutcome(JUDGED, verdict=int(verdict.value))

    def _from_probs(self, probs: dict[str, float] | None, error: str | None) -> JudgeOutcome:
        if error is not None or probs is None:
            return JudgeOutcome(_error_reason(error))
        positive, negative = (probs.get(label) for label in self._labels)
        if positive is None or negative is None or math.isnan(positive) or math.isnan(negative):
            return JudgeOutcome(PARSE_FAILURE)
        # Binary reward from logprobs is the argmax label; a tie is not a positive verdict.
        return JudgeOutcome(JUDGED, verdict=int(positive > negative), prob=float(positive))

    # -------------------------------------------------------------------------- results
    def _reward(self, outcome: JudgeOutcome) -> float:
        if outcome.reason != JUDGED:
            return 0.0
        if self.cfg.reward.kind == "probability" and outcome.prob is not None:
            return outcome.prob
        return float(outcome.verdict or 0)

    def _assemble(
        self,
        samples: list[PreparedSample],
        outcomes: list[JudgeOutcome],
        metas: list[Any],
        tally: StepTally,
    ) -> EnvironmentReturn:
        mask_failures = self.cfg.verdict.on_parse_failure == "mask"
        rewards, observations, out_meta, answers = [], [], [], []
        for sample, outcome, meta in zip(samples, outcomes, metas, strict=True):
            reward = self._reward(outcome)
            masked = mask_failures and outcome.reason == PARSE_FAILURE
            tally.counts[outcome.reason] += 1
            if masked:
                tally.masked += 1
            else:
                tally.reward_sum += reward
                tally.reward_count += 1
            sent = sample.reason is None
            tally.sent_samples += int(sent)
            rewards.append(reward)
            answers.append(sample.answer if sent else None)
            observations.append({"role": "environment", "content": _observation(outcome, reward)})
            if isinstance(meta, dict):
                meta = {**meta, "genrm": {"reason": outcome.reason, "verdict": outcome.verdict, "masked": masked}}
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

    # -------------------------------------------------------------------------- metrics
    def last_metrics(self) -> dict[str, float]:
        """The ``genrm/*`` metrics of the last judge call (see :mod:`nemo_genrm.metrics`).

        That is every step call that shared the most recent judge call, together: the last
        step when calls do not overlap (synchronous rollouts), the last coalesced group of
        per-sample calls under asynchronous rollouts. For a whole training step use
        :meth:`global_post_process_and_metrics`.
        """
        with self._metrics_lock:
            return self._last.metrics(list(self._latencies))

    def global_post_process_and_metrics(self, batch: Any) -> tuple[Any, dict[str, float]]:
        """Return the batch unchanged and the metrics of every step since the previous call.

        Args:
            batch: The rollout batch (a ``BatchedDataDict`` or a dict); not modified.

        Returns:
            ``(batch, metrics)`` with the ``genrm/*`` metrics summed over those steps.
        """
        with self._metrics_lock:
            metrics = self._since_global.metrics(list(self._latencies))
            self._since_global = StepTally()
        return batch, metrics

    # ------------------------------------------------------------------------- lifecycle
    def judge_stats(self) -> JudgeStats:
        """The judge engine's own counters (for tests and benchmarks)."""
        return self._require_judge().stats()

    def placement_info(self) -> dict[str, Any]:
        """Where the judge runs: the layout, and per worker its pid, resources and group.

        Returns:
            ``{"layout": ..., "owned_groups": [group ids], "joined_group": id or None,
            "replicas": [[{"pid", "resources", "placement_group_id", "gpu_ids"}, ...], ...]}``;
            ``replicas`` is empty for an engine without Ray workers (in process, HTTP).
        """
        res = self._resources
        info: dict[str, Any] = {
            "layout": res.layout if res is not None else "injected",
            "owned_groups": [g.id.hex() for g in res.owned_groups] if res is not None else [],
            "joined_group": res.joined_group.id.hex() if res is not None and res.joined_group is not None else None,
            "replicas": [],
        }
        actors = getattr(getattr(self._require_judge(), "pool", None), "actors", None)
        for hosts in (actors() if callable(actors) else actors) or []:
            info["replicas"].append(ray.get([h.__ray_call__.remote(worker_facts) for h in hosts], timeout=60))
        return info

    def shutdown(self) -> None:
        """Stop the judge's workers and remove its placement groups; safe to call twice."""
        judge, self._judge = self._judge, None
        try:
            if judge is not None and self._owns_judge:
                judge.shutdown()
        finally:
            if self._resources is not None:
                self._resources.release()

    def _require_judge(self) -> Judge:
        if self._judge is None:
            raise JudgeClosedError("the GenRM environment was shut down")
        return self._judge


def _error_reason(error: str | None) -> str:
    """``too_long`` for a prompt the judge's context cannot hold, else ``judge_error``."""
    return TOO_LONG if error in _LENGTH_ERRORS else JUDGE_ERROR


def _observation(outcome: JudgeOutcome, reward: float) -> str:
    if outcome.reason != JUDGED:
        return f"GenRM: not scored ({outcome.reason})"
    word = "correct" if outcome.verdict == 1 else "incorrect"
    return f"GenRM: {word}" if outcome.prob is None else f"GenRM: {word} (p={outcome.prob:.3f})"


MAX_CONCURRENCY = 512
"""Step calls the actor runs at once (threads); calls beyond wait in Ray's queue."""


@ray.remote(max_concurrency=MAX_CONCURRENCY, runtime_env=actor_runtime_env())
class GenRMEnvironment(GenRMEnvironmentImpl):
    """The GenRM environment as a Ray actor: ``GenRMEnvironment.remote(cfg)``.

    NeMo-RL starts it from its registry with the ``env.genrm`` section; its methods are those of
    :class:`GenRMEnvironmentImpl` (``step``, ``global_post_process_and_metrics``,
    ``last_metrics``, ``shutdown``). It is a threaded actor, so concurrent ``step`` calls share
    judge calls, and it runs on the driver's interpreter (:mod:`nemo_genrm.ray_env`): a caller
    that passes ``.options(runtime_env=...)`` replaces that default and should build its
    runtime environment with :func:`nemo_genrm.ray_env.actor_runtime_env`.
    """
