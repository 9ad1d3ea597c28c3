"""The one interface every judge engine implements, and the types it speaks.

A judge takes a batch of chat conversations and either writes a reply to each (:meth:`Judge.generate`)
or, from a single forward pass, gives the probability of each verdict label (:meth:`Judge.score`).
Results come back in input order, one per input, always: a sample the engine could not judge
carries ``error`` and ``None`` in place of its text or probabilities, never a made-up value.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nemo_genrm.errors import PROMPT_TOO_LONG
from nemo_genrm.judges.reasoning import CLOSED, TRUNCATED
from nemo_genrm.prompts.request import JudgeRequest, Message, RequestLike  # noqa: F401 - re-exported


@dataclass
class Generation:
    """The judge's reply to one request.

    Attributes:
        text: The decoded reply (special tokens removed), or ``None`` when the engine failed.
        error: Why there is no text (e.g. ``prompt_too_long``, ``http_timeout``), else ``None``.
        prompt_tokens: Tokens in the (possibly shortened) prompt, when known.
        output_tokens: Tokens generated.
        truncated: Whether the candidate answer was shortened to fit the context.
        reasoning_tokens: Tokens of the judge's thought (reasoning judges; 0 without one).
        reasoning_cut: ``closed`` when the engine closed a thought that ran over its budget and
            asked for the verdict, ``truncated`` when it cut it and left it without one, else
            ``None`` (see :mod:`nemo_genrm.judges.reasoning`).
    """

    text: str | None
    error: str | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    truncated: bool = False
    reasoning_tokens: int = 0
    reasoning_cut: str | None = None


@dataclass
class LabelScores:
    """Verdict-label probabilities for one request, from one forward pass.

    Attributes:
        probs: Label -> probability renormalised over the labels (sums to 1), or ``None`` on error.
        error: Why there are no probabilities, else ``None``.
        prompt_tokens: Tokens in the (possibly shortened) prompt, when known.
        truncated: Whether the candidate answer was shortened to fit the context.
    """

    probs: dict[str, float] | None
    error: str | None = None
    prompt_tokens: int = 0
    truncated: bool = False


@dataclass
class JudgeStats:
    """Counters an engine keeps since start, or those of one call (:meth:`Judge.generate_counted`).

    ``errors`` counts results the engine failed to produce; a prompt refused as longer than the
    context (``prompt_too_long``) is not one of them (its sample is ``too_long``).
    ``reasoning_lengths`` counts the replies of a reasoning judge by their thought's length in
    tokens (length -> replies; bounded by the budget, so it can be summed over a whole run);
    ``reasoning_closed`` and ``reasoning_truncated`` count the thoughts cut at their budget.

    These are the only names of the engine counters: the environment's step tally holds one of
    these (``StepTally.judge``), and :meth:`~nemo_genrm.samples.metrics.StepTally.metrics` names
    the ``genrm/*`` metric of each (``errors`` is ``genrm/engine_errors``, and so on).
    """

    generate_calls: int = 0
    score_calls: int = 0
    prompts_generated: int = 0
    prompts_scored: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    truncated: int = 0
    errors: int = 0
    restarts: int = 0
    deadline_exceeded: int = 0
    unavailable_calls: int = 0
    node_losses: int = 0
    reasoning_lengths: dict[int, int] = field(default_factory=dict)
    reasoning_closed: int = 0
    reasoning_truncated: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, other: JudgeStats) -> None:
        """Add ``other``'s counters into these (``extra``: ``other``'s entries win)."""
        for name in self.__dataclass_fields__:
            if name not in ("extra", "reasoning_lengths"):
                setattr(self, name, getattr(self, name) + getattr(other, name))
        for length, count in other.reasoning_lengths.items():
            self.reasoning_lengths[length] = self.reasoning_lengths.get(length, 0) + count
        self.extra.update(other.extra)

    def merge(self, other: JudgeStats) -> JudgeStats:
        """Sum two sets of counters (e.g. over replicas) into new ones; neither is changed."""
        merged = JudgeStats()
        merged.add(self)
        merged.add(other)
        return merged

    @classmethod
    def of_call(cls, kind: str, results: Sequence[Generation] | Sequence[LabelScores]) -> JudgeStats:
        """The counters of one ``generate`` or ``score`` call (``kind``), read from its results."""
        stats = cls(
            prompt_tokens=sum(r.prompt_tokens for r in results),
            output_tokens=sum(getattr(r, "output_tokens", 0) for r in results),
            truncated=sum(r.truncated for r in results),
            # A prompt the context cannot hold is the sample's too_long, not an engine failure.
            errors=sum(r.error is not None and r.error != PROMPT_TOO_LONG for r in results),
        )
        if kind == "score":
            stats.score_calls, stats.prompts_scored = 1, len(results)
        else:
            stats.generate_calls, stats.prompts_generated = 1, len(results)
            for result in results:
                length = result.reasoning_tokens
                if length > 0:
                    stats.reasoning_lengths[length] = stats.reasoning_lengths.get(length, 0) + 1
                stats.reasoning_closed += result.reasoning_cut == CLOSED
                stats.reasoning_truncated += result.reasoning_cut == TRUNCATED
        return stats


class Judge(abc.ABC):
    """A frozen judge LLM behind a fixed interface (dtensor, vLLM or HTTP engine)."""

    @abc.abstractmethod
    def generate(self, batch: Sequence[RequestLike]) -> list[Generation]:
        """Write the judge's reply to each conversation.

        Sampling comes from the judge config: greedy when temperature is 0, seeded otherwise.

        Args:
            batch: Conversations (``JudgeRequest`` or lists of messages).

        Returns:
            One :class:`Generation` per input, in input order.
        """

    @abc.abstractmethod
    def score(self, batch: Sequence[RequestLike], labels: Sequence[str]) -> list[LabelScores]:
        """Probability of each label as the judge's reply, from one forward pass.

        The next-token distribution at the end of the templated prompt, renormalised over the
        labels; a label of several tokens is scored by its summed log-probabilities.

        Args:
            batch: Conversations.
            labels: The verdict labels, e.g. ``["1", "0"]``.

        Returns:
            One :class:`LabelScores` per input, in input order.
        """

    def generate_counted(self, batch: Sequence[RequestLike]) -> tuple[list[Generation], JudgeStats]:
        """:meth:`generate`, with the counters of this call alone.

        Default: counted from the results (each carries its token counts); engines that see
        more per call (replica restarts, HTTP retries) add it.
        """
        results = self.generate(batch)
        return results, JudgeStats.of_call("generate", results)

    def score_counted(
        self, batch: Sequence[RequestLike], labels: Sequence[str]
    ) -> tuple[list[LabelScores], JudgeStats]:
        """:meth:`score`, with the counters of this call alone (see :meth:`generate_counted`)."""
        results = self.score(batch, labels)
        return results, JudgeStats.of_call("score", results)

    def check_score_labels(self, labels: Sequence[str]) -> None:
        """Check, before any request, that :meth:`score` can score ``labels``.

        Default: nothing (engines with the model in hand score labels of any length).

        Raises:
            ConfigError: The engine cannot score these labels (e.g. the HTTP engine and labels
                of several tokens).
        """

    def top_logprobs(self, batch: Sequence[RequestLike], k: int) -> list[dict[str, float] | None]:
        """The ``k`` most likely first reply tokens and their log-probabilities, per request.

        Used by the judge service to answer OpenAI ``logprobs``/``top_logprobs`` requests. Keys are
        decoded token strings. ``None`` for a request the engine could not process.

        Raises:
            NotImplementedError: The engine cannot give token log-probabilities.
        """
        raise NotImplementedError(f"{type(self).__name__} does not expose token log-probabilities")

    def sleep(self) -> None:
        """Free device memory (weights offloaded) while the judge is idle. Default: nothing."""

    def wake(self) -> None:
        """Reclaim device memory freed by :meth:`sleep`. Default: nothing."""

    def shutdown(self) -> None:
        """Release every worker and resource; safe to call twice. Default: nothing."""

    @abc.abstractmethod
    def stats(self) -> JudgeStats:
        """Counters since start."""

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


@dataclass(frozen=True)
class ReplicaPlacement:
    """Where the workers of one judge replica run.

    Attributes:
        placement_group: The Ray placement group, or ``None`` to let Ray schedule freely.
        bundle_indices: One bundle index per tensor-parallel rank (empty when no group).
        num_gpus: GPUs each worker asks for (1.0 separate, ``gpu_fraction`` colocated, 0 on CPU).
        num_cpus: CPUs each worker asks for.
    """

    placement_group: Any = None
    bundle_indices: tuple[int, ...] = ()
    num_gpus: float = 0.0
    num_cpus: float = 1.0


@dataclass(frozen=True)
class Placement:
    """Where every replica of a judge runs (built by :mod:`nemo_genrm.judges.placement`)."""

    replicas: tuple[ReplicaPlacement, ...] = (ReplicaPlacement(),)

    @property
    def num_replicas(self) -> int:
        """Number of data-parallel replicas."""
        return len(self.replicas)
