"""Turn per-prompt engine outcomes into the judge's result types, and count them.

Engines work on fitted prompts and return, per prompt, either a value or an error string. These
helpers put the prompts that could not be fitted back in their places, so every path returns one
result per input in input order, and they keep :class:`JudgeStats` in one place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from nemo_genrm.errors import TIMEOUT, Reason  # noqa: F401 - TIMEOUT is re-exported
from nemo_genrm.judges.base import Generation, JudgeStats, LabelScores
from nemo_genrm.judges.fitting import FittedPrompt

JUDGE_ERROR = Reason.JUDGE_ERROR

GenOut = tuple[str, int]
"""What an engine returns for one generated prompt: (decoded text, tokens generated)."""
Outcome = GenOut | dict | str
"""An engine value for one prompt, or an error string."""


def runnable(fitted: Sequence[FittedPrompt]) -> list[int]:
    """Indices of the prompts that fit and go to the engine."""
    return [i for i, f in enumerate(fitted) if f.error is None]


def build_generations(
    fitted: Sequence[FittedPrompt], outcomes: Mapping[int, Outcome]
) -> list[Generation]:
    """One :class:`Generation` per fitted prompt, in order.

    Args:
        fitted: The fitted prompts of the call.
        outcomes: Prompt index -> ``(text, output_tokens)`` or an error string, for every
            prompt that fit.

    Returns:
        The generations; prompts that did not fit carry their fitting error.
    """
    out = []
    for index, prompt in enumerate(fitted):
        if prompt.error is not None:
            out.append(Generation(None, error=prompt.error, truncated=prompt.truncated))
            continue
        outcome = outcomes[index]
        if isinstance(outcome, str):
            out.append(
                Generation(
                    None, error=outcome, prompt_tokens=prompt.num_tokens, truncated=prompt.truncated
                )
            )
            continue
        text, n_out = outcome
        out.append(
            Generation(
                text, prompt_tokens=prompt.num_tokens, output_tokens=n_out, truncated=prompt.truncated
            )
        )
    return out


def build_scores(fitted: Sequence[FittedPrompt], outcomes: Mapping[int, Outcome]) -> list[LabelScores]:
    """One :class:`LabelScores` per fitted prompt, in order (see :func:`build_generations`)."""
    out = []
    for index, prompt in enumerate(fitted):
        if prompt.error is not None:
            out.append(LabelScores(None, error=prompt.error, truncated=prompt.truncated))
            continue
        outcome = outcomes[index]
        error = outcome if isinstance(outcome, str) else None
        probs = None if error else dict(outcome)  # type: ignore[arg-type]
        out.append(
            LabelScores(probs, error=error, prompt_tokens=prompt.num_tokens, truncated=prompt.truncated)
        )
    return out


def build_top_logprobs(
    fitted: Sequence[FittedPrompt], outcomes: Mapping[int, Outcome]
) -> list[dict[str, float] | None]:
    """Token -> log-probability per prompt, ``None`` where the prompt failed."""
    out: list[dict[str, float] | None] = []
    for index, prompt in enumerate(fitted):
        outcome = outcomes.get(index) if prompt.error is None else None
        out.append(dict(outcome) if isinstance(outcome, dict) else None)  # type: ignore[arg-type]
    return out


def renormalise(label_logprobs: Mapping[str, float]) -> dict[str, float]:
    """Softmax over the labels' log-probabilities (a label at ``-inf`` gets 0).

    Args:
        label_logprobs: Label -> log-probability of the label as the whole reply start.

    Returns:
        Label -> probability, summing to 1.

    Raises:
        ValueError: If every label has log-probability ``-inf``.
    """
    top = max(label_logprobs.values())
    if top == -math.inf:
        raise ValueError("every label has probability 0")
    weights = {label: math.exp(lp - top) for label, lp in label_logprobs.items()}
    total = sum(weights.values())
    return {label: w / total for label, w in weights.items()}


def check_labels(labels: Sequence[str]) -> list[str]:
    """Validate verdict labels: at least one, non-empty, distinct.

    Raises:
        ValueError: If the labels are empty, blank or repeated.
    """
    labels = list(labels)
    if not labels or any(not isinstance(lab, str) or not lab for lab in labels):
        raise ValueError(f"labels must be non-empty strings, got {labels!r}")
    if len(set(labels)) != len(labels):
        raise ValueError(f"labels must be distinct, got {labels!r}")
    return labels


def count_generations(stats: JudgeStats, results: Sequence[Generation]) -> None:
    """Add one generate call and its results to ``stats``."""
    stats.generate_calls += 1
    stats.prompts_generated += len(results)
    stats.prompt_tokens += sum(r.prompt_tokens for r in results)
    stats.output_tokens += sum(r.output_tokens for r in results)
    stats.truncated += sum(r.truncated for r in results)
    stats.errors += sum(r.error is not None for r in results)


def count_scores(stats: JudgeStats, results: Sequence[LabelScores]) -> None:
    """Add one score call and its results to ``stats``."""
    stats.score_calls += 1
    stats.prompts_scored += len(results)
    stats.prompt_tokens += sum(r.prompt_tokens for r in results)
    stats.truncated += sum(r.truncated for r in results)
    stats.errors += sum(r.error is not None for r in results)
