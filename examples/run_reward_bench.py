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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nemo_genrm.config import RewardBenchConfig

logger = logging.getLogger("run_reward_bench")


def main(cfg: RewardBenchConfig) -> int:
    """Check inputs, start the judge, run the evaluation, clean up, compare; return the exit status."""
    from nemo_genrm.evals import compare_outcome, evaluator_for, examples_for, load_reference, open_judges

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
    from nemo_genrm.config import RewardBenchConfig, load_config, validate

    return validate(RewardBenchConfig, load_config(args.config, args.overrides, schema=RewardBenchConfig))


def cli(argv: list[str] | None = None) -> int:
    """The command: say what starts, load the config, evaluate; a mistake exits 2 with its fix."""
    from nemo_genrm.console import no_library_bars_off_terminal, setup_console

    setup_console()
    logger.info("RewardBench evaluation: loading %s", " ".join(sys.argv[1:] if argv is None else argv))
    no_library_bars_off_terminal()
    from nemo_genrm.config import ConfigError

    try:
        cfg = parse_config(argv)  # a mistake in the config is told before the slow imports
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from nemo_genrm.console import heartbeat

    logger.info("Importing torch, transformers and Ray (about a minute on the first start after an install)")
    with heartbeat("importing torch, transformers and Ray"):
        from nemo_genrm.errors import JudgeStartupError
        from nemo_genrm.evals import ComparisonError, RewardBenchDataError
    try:
        return main(cfg)
    except (ConfigError, JudgeStartupError, RewardBenchDataError, ComparisonError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(cli())
