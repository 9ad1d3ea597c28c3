"""Turn per-prompt engine outcomes into the judge's result types, and count them.

Engines work on fitted prompts and return, per prompt, either a value or an error string. These
helpers put the prompts that could not be fitted back in their places, so every path returns one
result per input in input order; every engine (the HTTP one too) builds its results here, and
:class:`CallCounter` gives a caller the counters of its own calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from nemo_genrm.errors import TIMEOUT, Reason  # noqa: F401 - TIMEOUT is re-exported
from nemo_genrm.judges.base import Generation, Judge, JudgeStats, LabelScores, RequestLike
from nemo_genrm.judges.fitting import FittedPrompt

JUDGE_ERROR = Reason.JUDGE_ERROR

GenOut = tuple[str, int] | tuple[str, int, int, str | None]
"""What an engine returns for one generated prompt: (decoded text, tokens generated), and for a
reasoning judge also (reasoning tokens, ``closed``/``truncated``/``None``)."""
Outcome = GenOut | dict | str
"""An engine value for one prompt, or an error string."""
R = TypeVar("R", Generation, LabelScores)


def runnable(fitted: Sequence[FittedPrompt]) -> list[int]:
    """Indices of the prompts that fit and go to the engine."""
    return [i for i, f in enumerate(fitted) if f.error is None]


def generation(outcome: Outcome, *, prompt_tokens: int = 0, truncated: bool = False) -> Generation:
    """The :class:`Generation` of one prompt from its engine outcome.

    Args:
        outcome: ``(text, output_tokens)`` or ``(text, output_tokens, reasoning_tokens,
            reasoning_cut)``, or an error string.
        prompt_tokens: Tokens in the prompt as judged.
        truncated: Whether its candidate answer was shortened to fit.
    """
    if isinstance(outcome, str):
        return Generation(None, error=outcome, prompt_tokens=prompt_tokens, truncated=truncated)
    text, n_out, *reasoning = outcome
    thought, cut = reasoning or (0, None)
    return Generation(
        text,
        prompt_tokens=prompt_tokens,
        output_tokens=n_out,
        truncated=truncated,
        reasoning_tokens=thought,
        reasoning_cut=cut,
    )


def reasoning_summary(lengths: Mapping[int, int]) -> dict[str, float]:
    """Mean, 95th percentile and maximum of reasoning lengths counted as length -> replies.

    >>> reasoning_summary({10: 19, 200: 1})
    {'mean': 19.5, 'p95': 10.0, 'max': 200.0}
    >>> reasoning_summary({})
    {'mean': 0.0, 'p95': 0.0, 'max': 0.0}
    """
    total = sum(lengths.values())
    if not total:
        return {"mean": 0.0, "p95": 0.0, "max": 0.0}
    rank, seen, p95 = math.ceil(0.95 * total), 0, 0
    for length in sorted(lengths):  # the nearest-rank 95th percentile
        seen += lengths[length]
        if seen >= rank:
            p95 = length
            break
    mean = sum(length * count for length, count in lengths.items()) / total
    return {"mean": mean, "p95": float(p95), "max": float(max(lengths))}


def label_scores(outcome: Outcome, *, prompt_tokens: int = 0, truncated: bool = False) -> LabelScores:
    """The :class:`LabelScores` of one prompt from its engine outcome (label -> probability,
    or an error string); see :func:`generation`."""
    error = outcome if isinstance(outcome, str) else None
    probs = None if error else dict(outcome)  # type: ignore[arg-type]
    return LabelScores(probs, error=error, prompt_tokens=prompt_tokens, truncated=truncated)


def _build(fitted: Sequence[FittedPrompt], outcomes: Mapping[int, Outcome], make: Callable[..., R]) -> list[R]:
    """One result per fitted prompt, in order; prompts that did not fit carry their fitting error."""
    out = []
    for index, prompt in enumerate(fitted):
        if prompt.error is not None:
            out.append(make(prompt.error, truncated=prompt.truncated))
        else:
            out.append(make(outcomes[index], prompt_tokens=prompt.num_tokens, truncated=prompt.truncated))
    return out


def build_generations(fitted: Sequence[FittedPrompt], outcomes: Mapping[int, Outcome]) -> list[Generation]:
    """One :class:`Generation` per fitted prompt, in order.

    Args:
        fitted: The fitted prompts of the call.
        outcomes: Prompt index -> ``(text, output_tokens)`` or an error string, for every
            prompt that fit.

    Returns:
        The generations; prompts that did not fit carry their fitting error.
    """
    return _build(fitted, outcomes, generation)


def build_scores(fitted: Sequence[FittedPrompt], outcomes: Mapping[int, Outcome]) -> list[LabelScores]:
    """One :class:`LabelScores` per fitted prompt, in order (see :func:`build_generations`)."""
    return _build(fitted, outcomes, label_scores)


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


class CallCounter(Judge):
    """Forwards to a judge and adds the counters of every call made through it to :attr:`counts`.

    The counts come with each call (:meth:`Judge.generate_counted`): read from the results,
    plus what the engine saw during that call alone, so concurrent callers of one judge each
    count their own calls.

    Args:
        judge: The judge to call.
    """

    def __init__(self, judge: Judge):
        self.judge = judge
        self.counts = JudgeStats()

    def generate(self, batch: Sequence[RequestLike]) -> list[Generation]:
        results, counts = self.judge.generate_counted(batch)
        self.counts = self.counts.merge(counts)
        return results

    def score(self, batch: Sequence[RequestLike], labels: Sequence[str]) -> list[LabelScores]:
        results, counts = self.judge.score_counted(batch, labels)
        self.counts = self.counts.merge(counts)
        return results

    def top_logprobs(self, batch: Sequence[RequestLike], k: int) -> list[dict[str, float] | None]:
        return self.judge.top_logprobs(batch, k)

    def sleep(self) -> None:
        self.judge.sleep()

    def wake(self) -> None:
        self.judge.wake()

    def stats(self) -> JudgeStats:
        return self.judge.stats()
