"""The generated configuration reference, ``docs/configuration.md``: which schemas it documents.

This package sits above every package that defines a schema (the driver's and the service's
included), so naming them here keeps ``config/`` free of imports from above; the drawing itself
is :func:`nemo_genrm.config.docs.render`'s. A test fails when the committed file is stale.

Usage::

    uv run python -m nemo_genrm.config_reference --write   # regenerate docs/configuration.md
    uv run python -m nemo_genrm.config_reference --check   # exit 1 when the file is stale

The package was ``nemo_genrm.docs`` (a name that read as the top-level ``docs/`` folder);
``python -m nemo_genrm.docs`` still runs it (:mod:`nemo_genrm.docs` is an alias).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nemo_genrm.config import GenRMConfig, RewardBenchConfig
from nemo_genrm.config.docs import Section, render
from nemo_genrm.grpo.config import GRPOMasterConfig
from nemo_genrm.serve.config import ServiceConfig

__all__ = ["COMMAND", "DOC_PATH", "SECTIONS", "main", "reference"]

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
COMMAND = "uv run python -m nemo_genrm.config_reference --write"

# Every schema a shipped YAML is checked against, in the order the reference shows them.
SECTIONS: tuple[Section, ...] = (
    Section("env.genrm", GenRMConfig, "The GenRM environment (NeMo-RL's `env` section)."),
    Section("(top level of reward_bench_*.yaml)", RewardBenchConfig, "The RewardBench evaluation."),
    Section("(top level of grpo_*.yaml)", GRPOMasterConfig, "The single-node GRPO driver."),
    Section("(top level of serve_*.yaml)", ServiceConfig, "The judge service."),
)


def reference() -> str:
    """The text ``docs/configuration.md`` should hold."""
    return render(SECTIONS, COMMAND)


def main(argv: list[str] | None = None) -> int:
    """Write or check docs/configuration.md.

    Returns:
        The exit status: 1 when ``--check`` finds the file stale, else 0.
    """
    parser = argparse.ArgumentParser(description="Write or check docs/configuration.md.")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="regenerate the file")
    group.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    args = parser.parse_args(argv)
    text = reference()
    if args.write:
        DOC_PATH.parent.mkdir(parents=True, exist_ok=True)
        DOC_PATH.write_text(text)
        print(f"wrote {DOC_PATH}")
        return 0
    if not DOC_PATH.exists() or DOC_PATH.read_text() != text:
        print(f"{DOC_PATH} is stale: run `{COMMAND}`")
        return 1
    return 0
