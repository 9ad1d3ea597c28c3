"""The one judge pipeline every local engine runs through: fit, plan, run, build, count.

:class:`PipelineJudge` implements :class:`~nemo_genrm.judges.base.Judge` once for the
transformers and vLLM engines. It fits every prompt with the judge tokenizer (prompt shortening
and its counters live in one place), cuts the fitted prompts into length-sorted chunks under
the token budget (planned here, once: a worker runs each chunk it is given as one batch), runs
the chunks on a runner, puts the results back in input order with
:mod:`nemo_genrm.judges.results`, and counts each call from its results.

A runner runs ``worker.<method>(*payload)`` per chunk:

- :class:`LocalRunner`: one engine worker in this process (tests, RewardBench, the judge
  service, benchmarks); a worker exception propagates to the caller;
- :class:`~nemo_genrm.judges.ray_pool.ReplicaPool`: replicas on Ray with restarts and a
  per-call deadline (:mod:`nemo_genrm.judges.pooled`); a failed chunk ends as an error.

Engine workers implement only the token-level protocol: ``generate_fitted(prompts)``,
``score_fitted(prompts, labels)``, ``top_logprobs_fitted(prompts, k)``, ``sleep()``,
``wake()``, and may declare ``MAX_PADDING`` (method -> largest padded share of a batch, for
engines that pad), ``QUEUE_METHODS`` (methods whose chunk is a queue the worker schedules
itself: continuous batching keeps its slots busy across the whole queue, so such a call is dealt
into one queue per replica instead of being cut into batches) and
``batch_limits(longest, new_tokens)`` (limits from free device memory).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from nemo_genrm.config import FaultToleranceConfig, JudgeConfig
from nemo_genrm.config.loading import typed
from nemo_genrm.errors import JudgeClosedError
from nemo_genrm.judges.base import Generation, Judge, JudgeStats, LabelScores, RequestLike
from nemo_genrm.judges.deadline import deadline_within, step_deadline
from nemo_genrm.judges.fitting import FittedPrompt, PromptFitter, label_token_ids, plan_batches, queue_shares
from nemo_genrm.judges.results import (
    JUDGE_ERROR,
    Outcome,
    build_generations,
    build_scores,
    build_top_logprobs,
    check_labels,
    runnable,
)


class Runner(Protocol):
    """Where the chunks of a :class:`PipelineJudge` run."""

    worker_cls: type
    num_alive: int

    def batch_limits(self, longest: int, new_tokens: int) -> tuple[int, int] | None:
        """``(max_batch_size, max_tokens_per_batch)`` the workers can take, ``None``: the config's."""

    def run(
        self, method: str, payloads: Sequence[tuple], costs: Sequence[int], events: JudgeStats | None = None
    ) -> list[tuple[Any, str | None]]:
        """``(value, None)`` or ``(None, error)`` per chunk, in chunk order; restarts, deadlines
        and unavailable calls of this run are added to ``events``."""

    def sleep(self) -> None: ...

    def wake(self) -> None: ...

    def totals(self) -> JudgeStats:
        """The runner's own counters since start (restarts, deadlines, unavailable calls)."""

    def extra(self) -> dict[str, Any]:
        """Facts for ``stats().extra``."""

    def shutdown(self) -> None: ...


RUNNER_EVENTS = ("restarts", "deadline_exceeded", "unavailable_calls", "node_losses")
"""The :class:`JudgeStats` counters a runner counts itself (per call and since start)."""


class LocalRunner:
    """One engine worker in this process: chunks run one after the other.

    Args:
        worker: The engine worker (e.g. a :class:`~nemo_genrm.judges.transformers.TransformersWorker`).
    """

    num_alive = 1

    def __init__(self, worker: Any):
        self.worker = worker
        self.worker_cls = type(worker)

    def batch_limits(self, longest: int, new_tokens: int) -> tuple[int, int] | None:
        limits = getattr(self.worker, "batch_limits", None)
        return limits(longest, new_tokens) if limits is not None else None

    def run(
        self, method: str, payloads: Sequence[tuple], costs: Sequence[int], events: JudgeStats | None = None
    ) -> list[tuple[Any, str | None]]:
        fn = getattr(self.worker, method)
        return [(fn(*payload), None) for payload in payloads]

    def sleep(self) -> None:
        self.worker.sleep()

    def wake(self) -> None:
        self.worker.wake()

    def totals(self) -> JudgeStats:
        return JudgeStats()

    def extra(self) -> dict[str, Any]:
        facts = getattr(self.worker, "stats_extra", None)
        return facts() if facts is not None else {}

    def shutdown(self) -> None:
        self.worker.shutdown()


class PipelineJudge(Judge):
    """Fits prompts, plans their chunks once, runs them on a runner, builds and counts results.

    Args:
        judge_config: The validated judge section.
        runner: Where the chunks run (:class:`LocalRunner` or a ``ReplicaPool``).
        fault_tolerance: Its ``step_timeout_s`` is the deadline of one call, fitting included
            (defaults when ``None``).
        fitter: The prompt fitter (default: built from the judge config).
    """

    def __init__(
        self,
        judge_config: JudgeConfig,
        runner: Runner,
        fault_tolerance: FaultToleranceConfig | None = None,
        *,
        fitter: PromptFitter | None = None,
    ):
        self.config = judge_config
        self.fault_tolerance = typed(
            FaultToleranceConfig, fault_tolerance or FaultToleranceConfig(), type(self).__name__
        )
        self.fitter = fitter or PromptFitter.for_judge(judge_config)
        self.runner = runner
        self._stats = JudgeStats()
        self._lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------------------ pipeline
    def _plan(self, method: str, lengths: list[int], new_tokens: int) -> list[list[int]]:
        """Length-sorted chunks under the token budget, at most an even share per runner replica;
        for a method the worker schedules itself, one queue per replica."""
        if method in getattr(self.runner.worker_cls, "QUEUE_METHODS", ()):
            return queue_shares(lengths, self.runner.num_alive)
        limits = self.runner.batch_limits(max(lengths), new_tokens)
        batching = self.config.batching
        max_batch, max_tokens = limits or (batching.max_batch_size, batching.max_tokens_per_batch)
        # Chunks no bigger than an even share, so every replica gets work on small calls.
        share = math.ceil(len(lengths) / max(1, self.runner.num_alive))
        return plan_batches(
            lengths,
            max_batch_size=max(1, min(max_batch, share)),
            max_tokens_per_batch=max_tokens,
            max_new_tokens=new_tokens,
            max_padding=getattr(self.runner.worker_cls, "MAX_PADDING", {}).get(method),
        )

    def run_fitted(
        self,
        method: str,
        fitted: Sequence[FittedPrompt],
        new_tokens: int,
        *extra: Any,
        events: JudgeStats | None = None,
    ) -> dict[int, Outcome]:
        """Run ``method`` over the prompts that fit, in planned chunks.

        Args:
            method: The worker's token-level method (``generate_fitted``...).
            fitted: The fitted prompts of the call.
            new_tokens: Tokens each sequence may grow by (for the token budget).
            *extra: Arguments after the prompts (labels, ``k``).
            events: Counters the runner adds this run's restarts and deadlines to.

        Returns:
            Prompt index -> the worker's value or an error string, for every prompt that fit.
        """
        index = runnable(fitted)
        if not index:
            return {}
        lengths = [fitted[i].num_tokens for i in index]
        chunks = self._plan(method, lengths, new_tokens)
        payloads = [([fitted[index[j]] for j in chunk], *extra) for chunk in chunks]
        costs = [len(chunk) * (max(lengths[j] for j in chunk) + new_tokens) for chunk in chunks]
        outcomes: dict[int, Outcome] = {}
        results = self.runner.run(method, payloads, costs, events)
        for chunk, (values, error) in zip(chunks, results, strict=True):
            if error is None and len(values) != len(chunk):
                error = JUDGE_ERROR
            for pos, j in enumerate(chunk):
                outcomes[index[j]] = error if error is not None else values[pos]
        return outcomes

    def _check_open(self) -> None:
        if self._closed:
            raise JudgeClosedError("this judge was shut down")

    def _deadline(self):
        """The call's deadline, started before fitting (the step's own when it is earlier)."""
        return step_deadline(deadline_within(self.fault_tolerance.step_timeout_s))

    def _counted(self, counts: JudgeStats, events: JudgeStats) -> JudgeStats:
        """Add a call's result counts to the totals; the call's counts with its runner events."""
        with self._lock:
            self._stats = self._stats.merge(counts)
        for name in RUNNER_EVENTS:
            setattr(counts, name, getattr(events, name))
        return counts

    # ----------------------------------------------------------------------- Judge interface
    def generate(self, batch: Sequence[RequestLike]) -> list[Generation]:
        """See :meth:`Judge.generate`.

        Raises:
            JudgeClosedError: After :meth:`shutdown`.
            JudgeUnavailableError: No replica alive past ``fault_tolerance.unavailable_grace_s``.
        """
        return self.generate_counted(batch)[0]

    def generate_counted(self, batch: Sequence[RequestLike]) -> tuple[list[Generation], JudgeStats]:
        """See :meth:`Judge.generate_counted`."""
        self._check_open()
        events = JudgeStats()
        with self._deadline():
            fitted = self.fitter.fit(batch)
            outcomes = self.run_fitted("generate_fitted", fitted, self.config.sampling.reply_tokens, events=events)
        results = build_generations(fitted, outcomes)
        return results, self._counted(JudgeStats.of_call("generate", results), events)

    def score(self, batch: Sequence[RequestLike], labels: Sequence[str]) -> list[LabelScores]:
        """See :meth:`Judge.score`."""
        return self.score_counted(batch, labels)[0]

    def score_counted(
        self, batch: Sequence[RequestLike], labels: Sequence[str]
    ) -> tuple[list[LabelScores], JudgeStats]:
        """See :meth:`Judge.score_counted`."""
        self._check_open()
        labels = check_labels(labels)
        longest = max(len(ids) for ids in label_token_ids(self.fitter.tokenizer, labels))
        events = JudgeStats()
        with self._deadline():
            fitted = self.fitter.fit(batch)
            outcomes = self.run_fitted("score_fitted", fitted, longest, labels, events=events)
        results = build_scores(fitted, outcomes)
        return results, self._counted(JudgeStats.of_call("score", results), events)

    def top_logprobs(self, batch: Sequence[RequestLike], k: int) -> list[dict[str, float] | None]:
        """See :meth:`Judge.top_logprobs`."""
        self._check_open()
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        with self._deadline():
            fitted = self.fitter.fit(batch)
            outcomes = self.run_fitted("top_logprobs_fitted", fitted, 1, k)
        return build_top_logprobs(fitted, outcomes)

    def sleep(self) -> None:
        """Offload the weights of every worker (restarted replicas come back asleep)."""
        self._check_open()
        self.runner.sleep()

    def wake(self) -> None:
        """Bring every worker's weights back."""
        self._check_open()
        self.runner.wake()

    def stats(self) -> JudgeStats:
        """Counters of this judge, with the runner's restarts and deadlines and its facts."""
        with self._lock:
            stats = JudgeStats(**{k: v for k, v in vars(self._stats).items() if k != "extra"})
        totals = self.runner.totals()
        for name in RUNNER_EVENTS:
            setattr(stats, name, getattr(totals, name))
        stats.extra = self.runner.extra()
        return stats

    def shutdown(self) -> None:
        """Release every worker; safe to call twice."""
        if not self._closed:
            self._closed = True
            self.runner.shutdown()
