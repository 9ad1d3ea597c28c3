"""Score a judge on RewardBench and, optionally, compare with reference numbers.

    uv run examples/run_reward_bench.py --config examples/configs/reward_bench_genrm.yaml key=value ...

Overrides use the Hydra grammar (``judge.model_name=/ckpt``, ``data.limit=100``,
``compare_to=ref.json``). Exit status: 0 on success, 1 when a compared score differs from the
reference by more than ``tolerance``, 2 on a configuration or data problem.
"""

from __future__ import annotations

import argparse
import logging
import sys

from nemo_genrm.config import ConfigError, RewardBenchConfig, load_config, validate
from nemo_genrm.errors import JudgeStartupError
from nemo_genrm.evals import (
    ComparisonError,
    RewardBenchDataError,
    compare_outcome,
    evaluator_for,
    examples_for,
    load_reference,
    open_judges,
)


def main(cfg: RewardBenchConfig) -> int:
    """Check inputs, start the judge, run the evaluation, clean up, compare; return the exit status."""
    # Prompt, data and reference problems surface before the (possibly slow) judge start.
    evaluator = evaluator_for(cfg)  # RewardBench, or RewardBench 2 for protocol: best_of_4
    examples = examples_for(cfg)
    if cfg.compare_to is not None:
        load_reference(cfg.compare_to)
    with open_judges(cfg) as judges:
        outcome = evaluator.run(examples, judges)
    print(outcome.scores.table())
    print(f"results: {outcome.results_path}  summary: {outcome.summary_path}  per example: {outcome.examples_path}")
    if cfg.compare_to is None:
        return 0
    comparison = compare_outcome(outcome, cfg.compare_to, cfg.tolerance)
    print(comparison.table())
    return comparison.exit_code


def parse_config(argv: list[str] | None = None) -> RewardBenchConfig:
    """``--config`` plus ``key=value`` overrides, validated."""
    parser = argparse.ArgumentParser(description="Score a judge on RewardBench.")
    parser.add_argument("--config", required=True, help="YAML config (see examples/configs/reward_bench_*.yaml)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides")
    args = parser.parse_args(argv)
    return validate(RewardBenchConfig, load_config(args.config, args.overrides, schema=RewardBenchConfig))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        sys.exit(main(parse_config()))
    except (ConfigError, JudgeStartupError, RewardBenchDataError, ComparisonError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
