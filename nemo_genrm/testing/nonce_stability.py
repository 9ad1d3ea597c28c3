"""Whether a judge's verdicts hang on the fence nonce: the same answers judged under several nonces.

Every judge prompt holds the candidate between ``<candidate-NONCE>`` tags with a fresh random
nonce (``nemo_genrm.guard.injection``). A judge that reads the answer gives it the same verdict
whatever the nonce; a judge that has not learned to look past the tags (a small one, or one
reading a form it never trained on) can answer differently under two nonces, and then the
reward of one answer is a draw. This check runs the same cases through the environment once per
``prompt.fence_seed`` (the seed of the nonce key, so each run draws other nonces) and counts the
cases whose reward differs between runs. It needs no labels: a split is a split whatever the
right verdict is.

    from nemo_genrm.testing.nonce_stability import nonce_stability

    result = nonce_stability(make_env, cases, seeds=range(8))
    print(result.split, "of", len(result.rewards), "answers change reward with the nonce")
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["NonceStability", "nonce_stability"]

Case = tuple[str, str, str]
"""(question, reference, response)."""


@dataclass(frozen=True)
class NonceStability:
    """The rewards of each case under each fence seed.

    Attributes:
        seeds: The ``prompt.fence_seed`` of each run, in order.
        rewards: Per case, its reward under each seed (in the order of ``seeds``).
        reasons: Per case, its reason under each seed (a masked sample shows ``judge_error``).
    """

    seeds: tuple[int, ...]
    rewards: tuple[tuple[float, ...], ...]
    reasons: tuple[tuple[str, ...], ...]

    @property
    def split_cases(self) -> list[int]:
        """Indices of the cases whose reward is not the same under every seed."""
        return [i for i, row in enumerate(self.rewards) if len(set(row)) > 1]

    @property
    def split(self) -> int:
        """How many cases change reward with the nonce."""
        return len(self.split_cases)

    @property
    def split_rate(self) -> float:
        """The share of cases that change reward with the nonce (0 with no cases)."""
        return self.split / len(self.rewards) if self.rewards else 0.0

    def summary(self) -> dict[str, Any]:
        """Counts for a JSON report."""
        return {
            "cases": len(self.rewards),
            "seeds": list(self.seeds),
            "split": self.split,
            "split_rate": self.split_rate,
        }


def nonce_stability(
    make_env: Callable[[int], Any], cases: Sequence[Case], seeds: Iterable[int] = range(8), chunk: int = 512
) -> NonceStability:
    """Judge ``cases`` once per fence seed and keep each case's rewards side by side.

    Args:
        make_env: Builds the environment to check for one ``prompt.fence_seed`` (a
            :class:`nemo_genrm.env.environment.GenRMEnvironmentImpl`, or anything with its
            ``step`` and ``shutdown``); it is shut down after its run.
        cases: (question, reference, response) triples.
        seeds: The fence seeds, at least two.
        chunk: Cases per ``step`` call.

    Returns:
        The :class:`NonceStability`.

    Raises:
        ValueError: Fewer than two seeds.
    """
    seeds = tuple(seeds)
    if len(seeds) < 2:
        raise ValueError(f"nonce stability needs at least two fence seeds, got {list(seeds)}")
    per_seed_rewards: list[list[float]] = []
    per_seed_reasons: list[list[str]] = []
    for seed in seeds:
        env = make_env(seed)
        rewards: list[float] = []
        reasons: list[str] = []
        try:
            for start in range(0, len(cases), chunk):
                part = cases[start : start + chunk]
                logs = [[{"role": "user", "content": q}, {"role": "assistant", "content": r}] for q, _, r in part]
                out = env.step(logs, [{"question": q, "ground_truth": ref} for q, ref, _ in part])
                rewards += [float(x) for x in out.rewards.tolist()]
                reasons += [str(m["genrm"]["reason"]) for m in out.metadata]
        finally:
            env.shutdown()
        per_seed_rewards.append(rewards)
        per_seed_reasons.append(reasons)
    return NonceStability(
        seeds=seeds,
        rewards=tuple(zip(*per_seed_rewards, strict=True)),
        reasons=tuple(zip(*per_seed_reasons, strict=True)),
    )
