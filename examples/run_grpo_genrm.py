"""Train a policy with GRPO and GenRM (LLM-as-judge) rewards.

Usage::

    uv run examples/run_grpo_genrm.py                       # the CPU demo: learned judge, policy learns (offline)
    uv run examples/run_grpo_genrm.py --config examples/configs/grpo_genrm_1B.yaml
    uv run examples/run_grpo_genrm.py grpo.max_num_steps=20 logger.wandb_enabled=true
    uv run examples/run_grpo_genrm.py checkpointing.resume=true   # continue the newest run
    <NeMo-RL venv>/bin/python examples/run_grpo_genrm.py --engine nemo_rl \
        --config examples/configs/grpo_genrm_nemo_rl.yaml   # NeMo-RL's GRPO (docs/nemo_rl.md)

Overrides follow NeMo-RL's Hydra grammar (``key=value``; ``+key=value`` adds a key). Each run
writes into folders of its own (``exp_001``, ``exp_002``, ... under ``logger.log_dir`` and
``checkpointing.checkpoint_dir``) and says in its first lines which run it is.

Only the standard library is imported before the first line is printed: torch, transformers and
Ray take seconds to import, and about a minute on the first start after an install.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nemo_genrm.grpo.config import GRPOMasterConfig

DEFAULT_CONFIG = Path(__file__).resolve().parent / "configs" / "grpo_genrm_tiny.yaml"
logger = logging.getLogger("run_grpo_genrm")


def main(cfg: GRPOMasterConfig) -> None:
    """Build the run, train, clean up, and report."""
    from nemo_genrm.console import heartbeat

    logger.info("Importing torch, transformers and Ray (about a minute on the first start after an install)")
    with heartbeat("importing torch, transformers and Ray"):
        from nemo_genrm.demo.report import demo_lines, reward_hacking_check
        from nemo_genrm.grpo.handles import EnvHandle
        from nemo_genrm.grpo.runner import build_run
        from nemo_genrm.tasks.digit_addition import DEMO_DATASET

    run = build_run(cfg)  # the run's folders, Ray, the policy actor, the environment and its judge, the data
    demo: list[str] = []
    try:
        summary = run.trainer.fit()
        if run.cfg.data.dataset_name == DEMO_DATASET:  # the default run: show what the judge did
            logger.info("Trying the judge on the red-team answers (the reward-hacking check)")
            hacking = reward_hacking_check(EnvHandle.of(run.env))
            demo = demo_lines(run.cfg.env.genrm.judge.model_name, summary, hacking)
    finally:
        run.shutdown()
    print("\n".join([*summary.lines(), *demo]))


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    """``--config``, ``--engine`` and the ``key=value`` overrides."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="GRPO YAML (default: the tiny CPU demo)")
    parser.add_argument(
        "--engine",
        choices=("builtin", "nemo_rl"),
        default="builtin",
        help="builtin: this package's single-node driver; nemo_rl: hand the config to NeMo-RL's GRPO",
    )
    return parser.parse_known_args(argv)


def cli(argv: list[str] | None = None) -> None:
    """The command: parse, say what starts, load the config, train; a mistake exits with its fix."""
    from nemo_genrm.console import no_library_bars_off_terminal, setup_console

    setup_console()
    args, overrides = parse_args(argv)
    shown = f" with {' '.join(overrides)}" if overrides else ""
    logger.info("GRPO with a GenRM judge (--engine %s): loading %s%s", args.engine, args.config, shown)
    no_library_bars_off_terminal()
    from nemo_genrm.config import ConfigError
    from nemo_genrm.errors import JudgeStartupError

    try:
        if args.engine == "nemo_rl":
            from nemo_genrm.grpo.nemo_rl_engine import run_with_nemo_rl

            run_with_nemo_rl(args.config, overrides)
        else:
            from nemo_genrm.grpo.config import load_grpo_config

            main(load_grpo_config(args.config, overrides))
    except (ConfigError, JudgeStartupError) as exc:  # the mistake and its fix, not a traceback
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    cli()
