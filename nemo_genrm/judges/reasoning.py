"""Reasoning judges: a budget for the thought, a reserve for the verdict, and what a cut thought is.

With ``judge.sampling.reasoning.enabled``, a reply is a ``<think> ... </think>`` block (the chat
template may open it in the prompt) and then the verdict. Every engine runs the same rule:

1. the judge writes up to ``max_new_tokens + verdict_tokens`` tokens (an engine that can stops a
   row at ``max_new_tokens`` when its thought is still open there: the transformers static loop);
2. a reply whose thought is closed within its first ``max_new_tokens`` tokens is complete;
3. any other reply (the thought ran over budget, or the judge stopped inside it) is cut at the
   budget and, with ``on_budget: close``, continued: ``close_text`` is appended and the judge
   writes its verdict in ``verdict_tokens`` minus the closing text's tokens (:func:`continuation`);
   with ``on_budget: truncate`` it is returned as an open thought, which every verdict parser
   reads as ``truncated`` (:func:`cut_reply`), never as a verdict taken from inside the thought.

An engine that has the reply as text only (HTTP) cannot cut or continue it: it asks for
``max_new_tokens + verdict_tokens`` and reads a reply whose thought is left open, or which ran
out of tokens with no ``</think>`` (a template may open the thought in the prompt), as cut
(:func:`settle_text`); ``on_budget: close`` needs an engine with the tokens in hand.

The verdict parsers read after the last ``</think>`` only (:mod:`nemo_genrm.verdicts.parser`).
Each :class:`~nemo_genrm.judges.base.Generation` carries ``reasoning_tokens`` (up to the close, or
the budget) and ``reasoning_cut`` (``closed`` or ``truncated``), counted per call in
:class:`~nemo_genrm.judges.base.JudgeStats` and per step in the environment's ``genrm/reasoning_*``
metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nemo_genrm.verdicts.parser import strip_think

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CLOSED, TRUNCATED = "closed", "truncated"
"""``Generation.reasoning_cut``: the engine closed the thought at its budget and asked for the
verdict, or cut it and left it without one."""


@dataclass(frozen=True)
class ReasoningBudget:
    """The reasoning settings of one judge (``judge.sampling``), checked once.

    Attributes:
        budget: Tokens the thought may take, its closing tag included (``max_new_tokens``).
        verdict_tokens: Tokens kept after the thought.
        on_budget: ``close`` or ``truncate``.
        close_text: Appended to a thought the engine closes.
    """

    budget: int
    verdict_tokens: int
    on_budget: str
    close_text: str

    @classmethod
    def of(cls, sampling) -> ReasoningBudget | None:
        """The budget of a ``SamplingConfig``; ``None`` when the judge does not reason."""
        reasoning = sampling.reasoning
        if not reasoning.enabled:
            return None
        return cls(sampling.max_new_tokens, reasoning.verdict_tokens, reasoning.on_budget, reasoning.close_text)

    @property
    def reply_tokens(self) -> int:
        """Most tokens of a reply: the thought's budget plus the verdict's."""
        return self.budget + self.verdict_tokens


@dataclass(frozen=True)
class Settled:
    """What one first-pass reply needs (see :func:`settle`).

    Attributes:
        ids: The reply's ids to keep (cut at the budget when it ran over).
        reasoning_tokens: Tokens of the thought: up to its closing tag, else the ids kept.
        open: Whether the thought is still open in ``ids`` (the reply needs closing or is cut).
    """

    ids: list[int]
    reasoning_tokens: int
    open: bool


def opens_thought(prompt_text: str) -> bool:
    """Whether a rendered prompt leaves a ``<think>`` open for the reply (a template that opens it)."""
    return prompt_text.rstrip().endswith(THINK_OPEN)


def _open(prefix: str, text: str) -> bool:
    return strip_think(prefix + text) is None


def settle(
    ids: Sequence[int],
    eos_ids: Sequence[int],
    budget: int,
    opened: bool,
    decode: Callable[[Sequence[int]], str],
    close_id: int | None = None,
) -> Settled:
    """Read one first-pass reply: where its thought closes, and whether it must be cut.

    Args:
        ids: The reply's generated ids (EOS included when it ended on one).
        eos_ids: The ids that end a reply.
        budget: The thought's budget in tokens.
        opened: Whether the prompt opened the thought (:func:`opens_thought`).
        decode: Ids -> text, special tokens kept (the closing tag may be one).
        close_id: The id of ``</think>`` when it is one token (found directly), else ``None``.

    Returns:
        The reply to keep, its reasoning length, and whether its thought is left open.
    """
    prefix = THINK_OPEN if opened else ""
    head = list(ids[:budget])
    text = decode(head)
    if not _open(prefix, text):
        if THINK_CLOSE not in text:
            return Settled(list(ids), 0, False)  # no thought at all
        return Settled(list(ids), _closing_length(head, prefix, decode, close_id), False)
    while head and head[-1] in eos_ids:  # a judge that stopped inside its thought: drop the EOS
        head.pop()
    return Settled(head, len(head), True)


def _closing_length(head: list[int], prefix: str, decode: Callable[[Sequence[int]], str], close_id: int | None) -> int:
    """Tokens up to and including the ``</think>`` that closes the thought in ``head``."""
    if close_id is not None and close_id in head:
        return head.index(close_id) + 1

    def closed(n: int) -> bool:
        text = decode(head[:n])
        return THINK_CLOSE in text and not _open(prefix, text)

    low, high = 1, len(head)  # closed(len(head)) holds; find the first n where it does
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if closed(mid) else (mid + 1, high)
    return low


def continuation(prompt_ids: Sequence[int], kept: Sequence[int], close_ids: Sequence[int]) -> list[int]:
    """The prompt of the verdict pass: the prompt, the thought as kept, and the closing text."""
    return [*prompt_ids, *kept, *close_ids]


def cut_reply(text: str, opened: bool) -> str:
    """A reply left with its thought open, as every parser must read it: an unfinished thought.

    When the template opened the thought in the prompt, the reply's text lacks the ``<think>``;
    it is put back, so no parser reads a verdict from inside the thought.
    """
    return THINK_OPEN + text if opened and not text.lstrip().startswith(THINK_OPEN) else text


def verdict_room(budget: ReasoningBudget, close_ids: Sequence[int]) -> int:
    """Tokens the verdict pass may write after the closing text.

    Raises:
        ValueError: The closing text alone takes the whole verdict budget.
    """
    room = budget.verdict_tokens - len(close_ids)
    if room < 1:
        raise ValueError(
            f"judge.sampling.reasoning.close_text is {len(close_ids)} tokens, leaving no room for a verdict in "
            f"verdict_tokens ({budget.verdict_tokens}): raise verdict_tokens or shorten close_text"
        )
    return room


def _single_id(tokenizer, text: str) -> int | None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


@dataclass(frozen=True)
class ThoughtTokens:
    """A tokenizer's ids for the thought's tags and the closing text (checked against the budget).

    Attributes:
        open_id: The id of ``<think>`` when it is one token, else ``None``.
        close_id: The id of ``</think>`` when it is one token, else ``None``.
        close_ids: The ids of ``close_text``.
    """

    open_id: int | None
    close_id: int | None
    close_ids: tuple[int, ...]

    @classmethod
    def of(cls, tokenizer, budget: ReasoningBudget) -> ThoughtTokens:
        """Tokenize the tags and the closing text.

        Raises:
            ValueError: The closing text leaves no room for a verdict (:func:`verdict_room`).
        """
        tokens = cls(
            _single_id(tokenizer, THINK_OPEN),
            _single_id(tokenizer, THINK_CLOSE),
            tuple(tokenizer.encode(budget.close_text, add_special_tokens=False)),
        )
        if budget.on_budget == "close":
            verdict_room(budget, tokens.close_ids)
        return tokens


Generate = Callable[[list[list[int]], list[int], int, "list[bool] | None"], list[list[int]]]
"""``generate(prompt_ids, votes, max_new_tokens, thinking)``: new ids per prompt (EOS included when
it ended on one). ``thinking`` (per prompt, whether the template opened the thought) is given
for the first pass only: an engine may stop a row still inside its thought at the budget."""


def answer(
    prompt_ids: list[list[int]],
    votes: list[int],
    budget: ReasoningBudget,
    tokens: ThoughtTokens,
    tokenizer,
    eos_ids: Sequence[int],
    generate: Generate,
) -> list[tuple[str, int, int, str | None]]:
    """Replies of a reasoning judge from an engine's token-level ``generate`` (module docstring).

    Args:
        prompt_ids: The fitted prompts' ids.
        votes: Each prompt's vote index (its sampling seed is ``seed + vote``; the verdict pass
            of a prompt samples with the same).
        budget: The reasoning budget.
        tokens: The tokenizer's ids for the tags and closing text.
        tokenizer: Decodes replies.
        eos_ids: The ids that end a reply.
        generate: The engine's generation on ids.

    Returns:
        ``(text, reply tokens, reasoning tokens, reasoning_cut)`` per prompt, in order.
    """
    opened = [opens_thought(tokenizer.decode(ids[-8:], skip_special_tokens=False)) for ids in prompt_ids]
    first = generate(prompt_ids, votes, budget.reply_tokens, opened)

    def raw(ids: Sequence[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=False)

    def text(ids: Sequence[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True)

    settled = [
        settle(row, eos_ids, budget.budget, o, raw, tokens.close_id) for row, o in zip(first, opened, strict=True)
    ]
    out: list = [None] * len(prompt_ids)
    todo = []
    for i, reply in enumerate(settled):
        if not reply.open:
            out[i] = (text(reply.ids), len(reply.ids), reply.reasoning_tokens, None)
        elif budget.on_budget == "truncate":
            out[i] = (cut_reply(text(reply.ids), opened[i]), len(reply.ids), reply.reasoning_tokens, TRUNCATED)
        else:
            todo.append(i)
    if todo:
        close = list(tokens.close_ids)
        tails = generate(
            [continuation(prompt_ids[i], settled[i].ids, close) for i in todo],
            [votes[i] for i in todo],
            verdict_room(budget, close),
            None,
        )
        for i, tail in zip(todo, tails, strict=True):
            reply = [*settled[i].ids, *close, *tail]
            out[i] = (text(reply), len(reply), settled[i].reasoning_tokens, CLOSED)
    return out


def settle_text(text: str, ran_out: bool, count: Callable[[str], int] | None) -> tuple[str, int, str | None]:
    """Read a reply known by its text only (HTTP): ``(text, reasoning tokens, reasoning_cut)``.

    A reply whose thought is closed is kept (its thought counted up to the closing tag); one
    whose thought is left open, or that ran out of tokens without a closing tag, is cut: returned
    as an open thought (:func:`cut_reply`), so no parser reads a verdict from it. Anything else
    is a reply without a thought.

    Args:
        text: The reply.
        ran_out: Whether the server stopped it at ``max_tokens``.
        count: Text -> tokens with the judge's tokenizer, when there is one (else 0 is counted).
    """
    measure = count or (lambda _: 0)
    if THINK_CLOSE in text and strip_think(text) is not None:
        return text, measure(text[: text.index(THINK_CLOSE) + len(THINK_CLOSE)]), None
    if strip_think(text) is None or ran_out:
        return cut_reply(text, opened=True), measure(text), TRUNCATED
    return text, 0, None
