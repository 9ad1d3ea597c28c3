"""Judge engines behind one interface: transformers (DTensor), vLLM, or an OpenAI-compatible server.

Build one with :func:`create_judge`; every engine returns results in input order, one per input,
with ``error`` set (and ``None`` text or probabilities) where a sample could not be judged.
"""

from __future__ import annotations

from typing import Any

from nemo_genrm.config import FaultToleranceConfig, JudgeConfig, validate
from nemo_genrm.judges.base import (
    Generation,
    Judge,
    JudgeRequest,
    JudgeStats,
    LabelScores,
    Message,
    Placement,
    ReplicaPlacement,
    RequestLike,
)
from nemo_genrm.judges.fitting import PROMPT_TOO_LONG, FittedPrompt, fit_prompt, plan_batches
from nemo_genrm.judges.results import JUDGE_ERROR, TIMEOUT

__all__ = [
    "JUDGE_ERROR",
    "PROMPT_TOO_LONG",
    "TIMEOUT",
    "FittedPrompt",
    "Generation",
    "Judge",
    "JudgeRequest",
    "JudgeStats",
    "LabelScores",
    "Message",
    "Placement",
    "ReplicaPlacement",
    "RequestLike",
    "create_judge",
    "fit_prompt",
    "plan_batches",
]


def create_judge(
    judge_config: JudgeConfig | dict[str, Any],
    placement: Placement | None = None,
    *,
    fault_tolerance: FaultToleranceConfig | dict[str, Any] | None = None,
) -> Judge:
    """Build the judge engine named by ``judge_config.backend``.

    - ``dtensor``: :class:`~nemo_genrm.judges.transformers.TransformersJudge` (transformers on Ray actors,
      ``placement.num_replicas`` replicas of ``dtensor.tensor_parallel_size`` ranks).
    - ``vllm``: :class:`~nemo_genrm.judges.vllm.VllmJudge` (vLLM in Ray actors; needs the
      ``vllm`` extra and a GPU).
    - ``http``: :class:`~nemo_genrm.judges.http.HttpJudge` (an OpenAI-compatible server;
      ``placement`` does not apply; ``fault_tolerance.step_timeout_s`` is its per-call deadline).

    Args:
        judge_config: A ``JudgeConfig`` or a dict of one.
        placement: Where the replicas run (Ray engines); ``None`` gives one replica without a
            placement group, on one GPU per rank when the cluster has GPUs, else on CPU.
        fault_tolerance: Restarts (Ray engines) and the per-call deadline (every engine);
            defaults when ``None``.

    Returns:
        The judge; call ``shutdown()`` (or use it as a context manager) to free its workers.

    Raises:
        ConfigError: If the config or the placement is invalid.
    """
    config = validate(JudgeConfig, judge_config, prefix="judge")
    if fault_tolerance is not None:
        fault_tolerance = validate(FaultToleranceConfig, fault_tolerance, prefix="fault_tolerance")
    if config.backend == "dtensor":
        from nemo_genrm.judges.transformers import TransformersJudge

        return TransformersJudge(config, placement, fault_tolerance=fault_tolerance)
    if config.backend == "vllm":
        from nemo_genrm.judges.vllm import VllmJudge

        return VllmJudge(config, placement, fault_tolerance=fault_tolerance)
    from nemo_genrm.judges.http import HttpJudge

    return HttpJudge(config, fault_tolerance=fault_tolerance)
