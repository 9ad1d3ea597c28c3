"""A small synthetic dataset in RewardBench's schema, for tests and CPU smoke runs.

Every RewardBench subset name appears; the texts are short made-up requests and responses
(the chosen one answers, the rejected one does not), so a tiny judge runs through it in seconds.

Write one with::

    uv run python -m nemo_genrm.evals.reward_bench.synthetic results/rb_synthetic.jsonl --per-subset 3
"""

from __future__ import annotations

import argparse
import logging
import random
from collections.abc import Mapping
from pathlib import Path

from nemo_genrm.evals.reward_bench.data import RewardBenchExample, write_examples
from nemo_genrm.evals.reward_bench.scores import SUBSETS

logger = logging.getLogger(__name__)

_TOPICS = ("rivers", "prime numbers", "bread", "sorting a list", "the moon", "tea", "bicycles", "clouds")


def synthetic_examples(per_subset: int | Mapping[str, int] = 2, seed: int = 0) -> list[RewardBenchExample]:
    """Examples for every RewardBench subset, with unique integer ids.

    Args:
        per_subset: Examples per subset, or subset -> count (subsets not named get none).
        seed: Seeds the choice of topics (ids and subsets do not depend on it).

    Returns:
        The examples, grouped by subset in the reference's order.

    Raises:
        ValueError: A negative count or an unknown subset name.
    """
    counts = {s: per_subset for s in SUBSETS} if isinstance(per_subset, int) else dict(per_subset)
    unknown = [s for s in counts if s not in SUBSETS]
    if unknown or any(n < 0 for n in counts.values()):
        raise ValueError(f"per_subset: need counts >= 0 for RewardBench subsets, got {counts}")
    rng = random.Random(seed)
    examples = []
    next_id = 0
    for subset in SUBSETS:
        for i in range(counts.get(subset, 0)):
            topic = rng.choice(_TOPICS)
            examples.append(
                RewardBenchExample(
                    id=next_id,
                    subset=subset,
                    prompt=f"Tell me one fact about {topic}. (case {i} of {subset})",
                    chosen=f"Here is a fact about {topic}: it is well studied.",
                    rejected="I do not know.",
                )
            )
            next_id += 1
    return examples


def main(argv: list[str] | None = None) -> Path:
    """Write a synthetic dataset as JSONL (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="JSONL file to write")
    parser.add_argument("--per-subset", type=int, default=2, help="examples per subset")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path = write_examples(args.path, synthetic_examples(args.per_subset, args.seed))
    logger.info("wrote %s", path)
    return path


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    main()
