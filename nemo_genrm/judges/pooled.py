"""The judge pipeline over a Ray replica pool (shared by the transformers and vLLM engines).

:class:`PooledJudge` is a :class:`~nemo_genrm.judges.pipeline.PipelineJudge` whose runner,
:class:`PoolRunner`, is a :class:`~nemo_genrm.judges.ray_pool.ReplicaPool` spreading the planned
chunks over the replicas (restarts, per-call deadline, token-balanced hand-out).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import ray

from nemo_genrm.config import FaultToleranceConfig, JudgeConfig
from nemo_genrm.config.loading import typed
from nemo_genrm.judges.base import JudgeStats, Placement, ReplicaPlacement
from nemo_genrm.judges.fitting import PromptFitter
from nemo_genrm.judges.pipeline import PipelineJudge
from nemo_genrm.judges.ray_hosts import WorkerSpec
from nemo_genrm.judges.ray_pool import ReplicaPool
from nemo_genrm.ray_env import ensure_ray as _connect

logger = logging.getLogger(__name__)


def ensure_ray() -> None:
    """Start (or join, via ``RAY_ADDRESS``) a Ray cluster when none is running in this process
    (:func:`nemo_genrm.ray_env.ensure_ray`)."""
    _connect()


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


class PoolRunner(ReplicaPool):
    """A :class:`ReplicaPool` as the runner of a :class:`PipelineJudge`."""

    @property
    def worker_cls(self) -> type:
        """The engine worker class each rank hosts."""
        return self.spec.worker_cls

    def batch_limits(self, longest: int, new_tokens: int) -> None:
        """The config's limits: each worker keeps a chunk within its own free memory."""
        return None

    def sleep(self) -> None:
        """Offload every replica's weights (restarted replicas come back asleep)."""
        self.asleep = True
        self.broadcast("sleep")

    def wake(self) -> None:
        """Bring every replica's weights back."""
        self.asleep = False
        self.broadcast("wake")

    def totals(self) -> JudgeStats:
        """Restarts, deadlines passed, calls that found no replica and node losses, since start."""
        return JudgeStats(
            restarts=self.restarts,
            deadline_exceeded=self.deadline_exceeded,
            unavailable_calls=self.unavailable_calls,
            node_losses=self.node_losses,
        )

    def extra(self) -> dict[str, Any]:
        """How the replicas stand and how the work was spread."""
        return {
            "replicas_alive": self.num_alive,
            "replicas_starting": self.num_starting,
            "replica_nodes": self.replica_nodes(),
            "replacements": self.replacements,
            "restart_budget": round(self.budget.available(time.monotonic()), 3),
            "chunks_per_replica": self.chunks_done(),
            "asleep": self.asleep,
        }


class PooledJudge(PipelineJudge):
    """Fits prompts here, runs them on a pool of engine-worker replicas on Ray.

    An engine subclass says what each rank runs in :meth:`worker_spec`.

    Args:
        judge_config: A ``JudgeConfig`` or dict.
        placement: Where the replicas run; ``None`` gives one replica without a placement
            group (see :func:`default_placement`). Pass a :class:`Placement` with N replicas
            (built by ``nemo_genrm.judges.placement`` or by hand) for N data-parallel replicas.
        fault_tolerance: Restart budget and per-call deadline (defaults when ``None``).
        spec: The workers to start (default: the engine's :meth:`worker_spec`).

    Raises:
        ConfigError: If the config or the placement is invalid.
        RuntimeError: If the workers fail to start.
    """

    def __init__(
        self,
        judge_config: JudgeConfig,
        placement: Placement | None = None,
        *,
        fault_tolerance: FaultToleranceConfig | None = None,
        spec: WorkerSpec | None = None,
    ):
        config = typed(JudgeConfig, judge_config, type(self).__name__)
        fault_tolerance = typed(FaultToleranceConfig, fault_tolerance or FaultToleranceConfig(), type(self).__name__)
        self.placement = placement or default_placement(config)
        spec = spec or self.worker_spec(config, self.placement)
        fitter = PromptFitter.for_judge(config)  # a bad tokenizer fails before any actor starts
        ensure_ray()
        runner = PoolRunner(spec, self.placement, fault_tolerance)
        super().__init__(config, runner, fault_tolerance, fitter=fitter)

    @classmethod
    def worker_spec(cls, config: JudgeConfig, placement: Placement) -> WorkerSpec:
        """What each rank of a replica runs (engine subclasses define it).

        Raises:
            ConfigError: If the placement does not suit the engine.
        """
        raise NotImplementedError(f"{cls.__name__} needs a WorkerSpec")

    @property
    def pool(self) -> PoolRunner:
        """The replica pool (for inspection and tests)."""
        return self.runner  # type: ignore[return-value]
