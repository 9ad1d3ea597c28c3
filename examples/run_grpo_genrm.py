"""Train a policy with GRPO and GenRM (LLM-as-judge) rewards.

Usage::

    uv run examples/run_grpo_genrm.py                       # the CPU demo: learned judge, policy learns (offline)
    uv run examples/run_grpo_genrm.py --config examples/configs/grpo_genrm_1B.yaml
    uv run examples/run_grpo_genrm.py grpo.max_num_steps=20 logger.wandb_enabled=true
    <NeMo-RL venv>/bin/python examples/run_grpo_genrm.py --engine nemo_rl \
        --config examples/configs/grpo_genrm_nemo_rl.yaml   # NeMo-RL's GRPO (docs/nemo_rl.md)

Overrides follow NeMo-RL's Hydra grammar (``key=value``; ``+key=value`` adds a key).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from nemo_genrm.config import ConfigError
from nemo_genrm.demo.report import demo_lines, reward_hacking_check
from nemo_genrm.errors import JudgeStartupError
from nemo_genrm.grpo.config import GRPOMasterConfig, load_grpo_config
from nemo_genrm.grpo.handles import EnvHandle
from nemo_genrm.grpo.runner import build_run
from nemo_genrm.tasks.digit_addition import DEMO_DATASET

DEFAULT_CONFIG = Path(__file__).resolve().parent / "configs" / "grpo_genrm_tiny.yaml"


def main(cfg: GRPOMasterConfig) -> None:
    """Build the run, train, clean up, and report."""
    run = build_run(cfg)  # Ray, the policy actor, the GenRM environment and its judge, the data
    demo: list[str] = []
    try:
        summary = run.trainer.fit()
        if run.cfg.data.dataset_name == DEMO_DATASET:  # the default run: show what the judge did
            hacking = reward_hacking_check(EnvHandle.of(run.env))
            demo = demo_lines(run.cfg.env.genrm.judge.model_name, summary, hacking)
    finally:
        run.shutdown()
    print("\n".join([*summary.lines(), *demo]))


def _parse() -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="GRPO YAML (default: the tiny CPU demo)")
    parser.add_argument(
        "--engine", choices=("builtin", "nemo_rl"), default="builtin",
        help="builtin: this package's single-node driver; nemo_rl: hand the config to NeMo-RL's GRPO",
    )
    return parser.parse_known_args()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args, overrides = _parse()
    try:
        if args.engine == "nemo_rl":
            from nemo_genrm.grpo.nemo_rl_engine import run_with_nemo_rl

            run_with_nemo_rl(args.config, overrides)
        else:
            main(load_grpo_config(args.config, overrides))
    except (ConfigError, JudgeStartupError) as exc:  # the mistake and its fix, not a traceback
        sys.exit(f"error: {exc}")
