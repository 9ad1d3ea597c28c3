"""A :class:`~nemo_genrm.judges.base.Judge` over a Ray replica pool (shared by dtensor and vLLM).

The driver fits every prompt with the judge tokenizer (so prompt shortening and its counters
live in one place), cuts the fitted prompts into length-sorted chunks under the token budget,
and lets :class:`~nemo_genrm.judges.ray_pool.ReplicaPool` spread the chunks over the replicas.
Results are put back in input order; prompts that could not be fitted or judged carry an error.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import Any

import ray

from nemo_genrm.config import FaultToleranceConfig, JudgeConfig, validate
from nemo_genrm.deadline import deadline_within, step_deadline
from nemo_genrm.errors import JudgeClosedError
from nemo_genrm.judges.base import (
    Generation,
    Judge,
    JudgeStats,
    LabelScores,
    Placement,
    ReplicaPlacement,
    RequestLike,
)
from nemo_genrm.judges.fitting import FittedPrompt, PromptFitter, label_token_ids, plan_batches
from nemo_genrm.judges.ray_pool import ReplicaPool, WorkerSpec
from nemo_genrm.judges.results import (
    JUDGE_ERROR,
    Outcome,
    build_generations,
    build_scores,
    build_top_logprobs,
    check_labels,
    count_generations,
    count_scores,
    runnable,
)

logger = logging.getLogger(__name__)


def ensure_ray() -> None:
    """Start (or join, via ``RAY_ADDRESS``) a Ray cluster when none is running in this process."""
    if not ray.is_initialized():
        logger.info("Ray is not initialised: starting a local cluster")
        ray.init()


def default_placement(judge_config: JudgeConfig, num_replicas: int = 1) -> Placement:
    """Replicas without a placement group: one GPU per rank when the cluster has GPUs, else CPU.

    Args:
        judge_config: The judge (its tensor parallel size is checked against the GPUs).
        num_replicas: Data-parallel replicas.

    Returns:
        A :class:`Placement` with ``num_replicas`` replicas of one CPU (and maybe one GPU) per rank.
    """
    ensure_ray()
    gpus = ray.cluster_resources().get("GPU", 0)
    per_rank = 1.0 if gpus >= judge_config.tensor_parallel_size else 0.0
    return Placement(tuple(ReplicaPlacement(num_gpus=per_rank) for _ in range(num_replicas)))


class PooledJudge(Judge):
    """Fits prompts here, runs them on a :class:`ReplicaPool` of engine workers.

    Workers implement ``generate_fitted(prompts)``, ``score_fitted(prompts, labels)``,
    ``top_logprobs_fitted(prompts, k)``, ``sleep()`` and ``wake()``.

    Args:
        judge_config: A ``JudgeConfig`` or dict.
        spec: The workers to start (built by the engine subclass from the validated config).
        placement: Where the replicas run.
        fault_tolerance: Restart budget and call deadline (defaults when ``None``).
    """

    def __init__(
        self,
        judge_config: JudgeConfig,
        spec: WorkerSpec,
        placement: Placement,
        fault_tolerance: FaultToleranceConfig | dict | None = None,
    ):
        self.config = judge_config
        self.fault_tolerance = validate(
            FaultToleranceConfig, fault_tolerance or {}, prefix="fault_tolerance"
        )
        self.placement = placement
        self.fitter = PromptFitter.for_judge(judge_config)
        ensure_ray()
        self.pool = ReplicaPool(spec, placement, self.fault_tolerance)
        self._stats = JudgeStats()
        self._pool_base = JudgeStats()
        self._closed = False

    def _run(self, method: str, fitted: Sequence[FittedPrompt], new_tokens: int, *extra: Any
             ) -> dict[int, Outcome]:
        """Send the runnable prompts as chunks; per-prompt outcomes keyed by input index."""
        index = runnable(fitted)
        if not index:
            return {}
        lengths = [fitted[i].num_tokens for i in index]
        batching = self.config.batching
        # Chunks no bigger than an even share, so every replica gets work on small calls.
        share = math.ceil(len(index) / max(1, self.pool.num_alive))
        chunks = plan_batches(
            lengths,
            max_batch_size=max(1, min(batching.max_batch_size, share)),
            max_tokens_per_batch=batching.max_tokens_per_batch,
            max_new_tokens=new_tokens,
        )
        payloads = [([fitted[index[j]] for j in chunk], *extra) for chunk in chunks]
        costs = [len(chunk) * (max(lengths[j] for j in chunk) + new_tokens) for chunk in chunks]
        outcomes: dict[int, Outcome] = {}
        results = self.pool.run(method, payloads, costs)
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

    def generate(self, batch: Sequence[RequestLike]) -> list[Generation]:
        """See :meth:`Judge.generate`; chunks run on every replica.

        Raises:
            JudgeClosedError: After :meth:`shutdown`.
            JudgeUnavailableError: No replica alive past ``fault_tolerance.unavailable_grace_s``.
        """
        self._check_open()
        with self._deadline():
            fitted = self.fitter.fit(batch)
            outcomes = self._run("generate_fitted", fitted, self.config.sampling.max_new_tokens)
        results = build_generations(fitted, outcomes)
        count_generations(self._stats, results)
        return results

    def score(self, batch: Sequence[RequestLike], labels: Sequence[str]) -> list[LabelScores]:
        """See :meth:`Judge.score`; chunks run on every replica."""
        self._check_open()
        labels = check_labels(labels)
        longest = max(len(ids) for ids in label_token_ids(self.fitter.tokenizer, labels))
        with self._deadline():
            fitted = self.fitter.fit(batch)
            outcomes = self._run("score_fitted", fitted, longest, labels)
        results = build_scores(fitted, outcomes)
        count_scores(self._stats, results)
        return results

    def top_logprobs(self, batch: Sequence[RequestLike], k: int) -> list[dict[str, float] | None]:
        """See :meth:`Judge.top_logprobs`."""
        self._check_open()
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        with self._deadline():
            fitted = self.fitter.fit(batch)
            outcomes = self._run("top_logprobs_fitted", fitted, 1, k)
        return build_top_logprobs(fitted, outcomes)

    def sleep(self) -> None:
        """Offload every replica's weights (restarted replicas come back asleep)."""
        self._check_open()
        self.pool.asleep = True
        self.pool.broadcast("sleep")

    def wake(self) -> None:
        """Bring every replica's weights back."""
        self._check_open()
        self.pool.asleep = False
        self.pool.broadcast("wake")

    def stats(self) -> JudgeStats:
        """Counters of this judge, with ``restarts`` from the pool."""
        stats = JudgeStats(**{k: v for k, v in vars(self._stats).items() if k != "extra"})
        base = self._pool_base
        stats.restarts = self.pool.restarts - base.restarts
        stats.deadline_exceeded = self.pool.deadline_exceeded - base.deadline_exceeded
        stats.unavailable_calls = self.pool.unavailable_calls - base.unavailable_calls
        stats.extra = {
            "replicas_alive": self.pool.num_alive,
            "replacements": self.pool.replacements,
            "restart_budget": round(self.pool.budget.available(time.monotonic()), 3),
            "chunks_per_replica": self.pool.chunks_done(),
            "asleep": self.pool.asleep,
        }
        return stats

    def reset_stats(self) -> None:
        """Zero the counters (the pool's restart budget is not reset)."""
        self._stats = JudgeStats()
        pool = self.pool
        self._pool_base = JudgeStats(restarts=pool.restarts, deadline_exceeded=pool.deadline_exceeded,
                                     unavailable_calls=pool.unavailable_calls)

    def shutdown(self) -> None:
        """Kill every worker; safe to call twice."""
        if not self._closed:
            self._closed = True
            self.pool.shutdown()
