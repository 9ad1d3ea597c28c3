"""Starting judges, running a RewardBench evaluation from a config, comparing with a reference.

The entry point's building blocks: :func:`open_judges` starts every voting judge and frees them,
:func:`run_reward_bench` loads the data and runs the evaluator the protocol needs (RewardBench,
or RewardBench 2 for ``best_of_4``), :func:`compare_outcome` compares with reference numbers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from nemo_genrm.config import JudgeConfig, RewardBenchConfig
from nemo_genrm.evals.reward_bench.compare import Comparison, compare, load_reference, plot_comparison
from nemo_genrm.evals.reward_bench.evaluator import RewardBenchOutcome
from nemo_genrm.evals.reward_bench.v2 import evaluator_for, examples_for
from nemo_genrm.judges.base import Judge, Placement, ReplicaPlacement

PLOT_FILE = "comparison.png"


# -------------------------------------------------------------------------------- entry helpers
@contextlib.contextmanager
def open_judges(cfg: RewardBenchConfig) -> Iterator[list[Judge]]:
    """Start every voting judge (``judges``, else ``judge``) and free them all on exit.

    Each is started as :func:`open_judge` starts one, with the shared ``resources``.

    Yields:
        The started judges, in ``cfg.members`` order.
    """
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(open_judge(cfg, member)) for member in cfg.members]


@contextlib.contextmanager
def open_judge(cfg: RewardBenchConfig, judge_cfg: JudgeConfig | None = None) -> Iterator[Judge]:
    """Start the judge the config describes and free it (and its placement groups) on exit.

    One CPU replica (``resources.gpus_per_replica: 0``) runs without a placement group, on CPU
    even where the cluster has GPUs. Anything else (GPUs, several replicas) reserves its
    placement through :func:`nemo_genrm.judges.placement.acquire_resources` on the connected Ray cluster
    (started here, locally, when none is).

    Args:
        cfg: The evaluation config (its ``resources``).
        judge_cfg: The judge to start; ``cfg.judge`` when ``None``.

    Yields:
        The started judge.

    Raises:
        ConfigError: Invalid engine or resources settings.
    """
    from nemo_genrm.judges import create_judge

    judge_cfg = judge_cfg or cfg.judge
    held = None
    placement: Placement | None = None
    res = cfg.resources
    if judge_cfg.backend != "http" and res.num_replicas == 1 and res.gpus_per_replica == 0:
        placement = Placement((ReplicaPlacement(num_gpus=0.0, num_cpus=res.cpus_per_replica),))
    elif judge_cfg.backend != "http":
        from nemo_genrm.judges.placement import acquire_resources
        from nemo_genrm.ray_runtime import ensure_ray

        ensure_ray(log_to_driver=False)
        held = acquire_resources(judge_cfg, res, name_prefix="reward_bench_judge")
        placement = held.placement
    try:
        judge = create_judge(judge_cfg, placement)
        try:
            yield judge
        finally:
            judge.shutdown()
    finally:
        if held is not None:
            held.release()


def run_reward_bench(
    cfg: RewardBenchConfig, judge: Judge | Sequence[Judge], examples: Sequence | None = None
) -> RewardBenchOutcome:
    """Load the examples (unless given), judge them and write the results.

    Args:
        cfg: The evaluation config.
        judge: A started judge; the caller shuts it down.
        examples: Examples to judge instead of ``cfg.data``.

    Returns:
        The outcome.

    Raises:
        nemo_genrm.evals.reward_bench.compare.ComparisonError: ``compare_to`` names an unusable file.
        nemo_genrm.evals.reward_bench.data.RewardBenchDataError: The data cannot be used.
    """
    if cfg.compare_to is not None:
        load_reference(cfg.compare_to)  # fail before judging, not after
    if examples is None:
        examples = examples_for(cfg)
    return evaluator_for(cfg).run(examples, judge)


def compare_outcome(outcome: RewardBenchOutcome, reference_path: str | Path, tolerance: float) -> Comparison:
    """Compare a run with a reference results JSON and save the bar chart next to the results.

    Returns:
        The comparison (``exit_code`` 1 when a delta exceeds ``tolerance``).

    Raises:
        nemo_genrm.evals.reward_bench.compare.ComparisonError: The reference cannot be used.
    """
    comparison = compare(outcome.scores.flat(), load_reference(reference_path), tolerance)
    plot_comparison(
        comparison,
        outcome.output_dir / PLOT_FILE,
        ours_label=Path(str(outcome.results["model"])).name or "ours",
        reference_label=Path(reference_path).stem,
    )
    return comparison
