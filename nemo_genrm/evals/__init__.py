"""Evaluations of a judge: RewardBench scoring and parity with the reference implementation.

Heavy pieces (judge engines, ``datasets``, matplotlib) are imported only when used.
"""

from nemo_genrm.evals.reward_bench.compare import Comparison, ComparisonError, compare, load_reference, plot_comparison
from nemo_genrm.evals.reward_bench.data import (
    RewardBenchDataError,
    RewardBenchExample,
    load_examples,
    rows_to_examples,
    write_examples,
)
from nemo_genrm.evals.reward_bench.evaluator import RewardBenchEvaluator, RewardBenchOutcome
from nemo_genrm.evals.reward_bench.preset import RewardBenchPreset, load_rewardbench_preset
from nemo_genrm.evals.reward_bench.run import compare_outcome, open_judge, open_judges, run_reward_bench
from nemo_genrm.evals.reward_bench.scores import (
    EXAMPLE_COUNTS,
    SECTIONS,
    SUBSET_MAPPING,
    SUBSETS,
    ExampleScore,
    RewardBenchScores,
    SubsetScore,
    chosen_at_a,
    section_scores,
)
from nemo_genrm.evals.reward_bench.v2 import RewardBench2Evaluator, evaluator_for, examples_for, load_v2_examples

__all__ = [
    "EXAMPLE_COUNTS",
    "SECTIONS",
    "SUBSETS",
    "SUBSET_MAPPING",
    "Comparison",
    "ComparisonError",
    "ExampleScore",
    "RewardBench2Evaluator",
    "RewardBenchDataError",
    "RewardBenchEvaluator",
    "RewardBenchExample",
    "RewardBenchOutcome",
    "RewardBenchPreset",
    "RewardBenchScores",
    "SubsetScore",
    "chosen_at_a",
    "compare",
    "compare_outcome",
    "evaluator_for",
    "examples_for",
    "load_examples",
    "load_reference",
    "load_v2_examples",
    "load_rewardbench_preset",
    "open_judge",
    "open_judges",
    "plot_comparison",
    "rows_to_examples",
    "run_reward_bench",
    "section_scores",
    "write_examples",
]
