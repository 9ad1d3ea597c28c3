"""Reading one chat-completion reply of the HTTP judge, which is untrusted input.

A reply is read whole or not at all: anything in it that is not what the OpenAI API promises
(``usage`` that is not an object of non-negative integers, a log-probability above 0 or not a
number, more or fewer than one choice, a body nested too deep) makes :class:`BadReply` for that
reply only, which the judge turns into an ``http_bad_response`` sample.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["BadReply", "Reply", "label_key_problems", "label_probs", "read_first_token_top", "read_reply"]

# Without judge.tokenizer: labels taken as one token (ASCII letters alone, or one digit).
_PLAIN_LABEL = re.compile(r"[A-Za-z]+|[0-9]")

_LOGPROB_SLACK = 1e-4  # servers round; a log-probability a hair above 0 is still a probability of 1


class BadReply(ValueError):
    """The body is not a chat completion this client can trust."""


@dataclass(frozen=True)
class Reply:
    """What one reply says: its text and token counts (0 when the server gives none), and
    whether it stopped at ``max_tokens`` (``finish_reason: length``)."""

    text: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ran_out: bool = False


def read_reply(body: Any) -> Reply:
    """The text and usage of a chat-completion body.

    Args:
        body: The decoded JSON of a 200 reply.

    Returns:
        The reply; ``text`` is ``None`` when the message has no string content.

    Raises:
        BadReply: The body is not one chat completion with well-formed ``usage``.
    """
    choice = _only_choice(body)
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    prompt_tokens, completion_tokens = _usage(body.get("usage"))
    return Reply(
        text=content if isinstance(content, str) else None,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        ran_out=choice.get("finish_reason") == "length",
    )


def read_first_token_top(body: Any) -> dict[str, float] | None:
    """Token -> log-probability at the first reply position.

    Returns:
        The mapping, or ``None`` when the reply carries no log-probabilities at all (a server
        that does not give them).

    Raises:
        BadReply: Log-probabilities are present but malformed (not numbers, above 0, NaN).
    """
    choice = _only_choice(body)
    logprobs = choice.get("logprobs")
    if logprobs is None:
        return None
    try:
        entries = logprobs["content"][0]["top_logprobs"]
    except (KeyError, IndexError, TypeError) as exc:
        raise BadReply(f"logprobs without content[0].top_logprobs ({type(exc).__name__})") from None
    if not isinstance(entries, list) or not entries:
        raise BadReply("top_logprobs is not a non-empty list")
    top: dict[str, float] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
            raise BadReply("a top_logprobs entry without a string token")
        logprob = _logprob(entry.get("logprob"))
        # Two entries with one string (rare byte-level cases) keep the larger.
        top[entry["token"]] = max(logprob, top.get(entry["token"], -math.inf))
    return top


def label_probs(top: dict[str, float], labels: list[str]) -> dict[str, float] | None:
    """Renormalise the top-k mass over the labels; None when no label is among the tokens."""
    mass = dict.fromkeys(labels, 0.0)
    for token, logprob in top.items():
        key = token.strip()
        if key in mass:
            mass[key] += math.exp(logprob)
    total = sum(mass.values())
    if total <= 0.0:
        return None
    return {label: value / total for label, value in mass.items()}


def label_key_problems(labels: Sequence[str], tokenizer: Any, tokenizer_name: str) -> tuple[list[str], list[str]]:
    """The labels' keys (stripped) and why they cannot be scored from the first reply token.

    Over HTTP a label's probability is read from the first reply token's top log-probabilities,
    so each label must be one token: counted with ``tokenizer`` when there is one; without it,
    only labels of ASCII letters alone or one digit are taken as one token (brackets and other
    punctuation, as in ``[[A]]``, make several in common tokenizers).

    Args:
        labels: The labels to score.
        tokenizer: The judge's tokenizer (``judge.tokenizer``), or ``None``.
        tokenizer_name: Its name, for the messages.

    Returns:
        ``(keys, problems)``; ``problems`` is empty when every label can be scored.
    """
    problems = []
    keys = [label.strip() for label in labels]
    if not keys or any(not key for key in keys) or len(set(keys)) != len(keys):
        problems.append(f"labels must be distinct non-empty strings, got {list(labels)!r}")
    for key in keys:
        if any(ch.isspace() for ch in key):
            problems.append(
                f"label {key!r} is several tokens and cannot be scored from top_logprobs over "
                "HTTP: use one-token labels or judge.verdict_from: text"
            )
        elif tokenizer is not None:
            ids = tokenizer.encode(key, add_special_tokens=False)
            if len(ids) != 1:
                problems.append(
                    f"label {key!r} is {len(ids)} tokens for {tokenizer_name}: over HTTP only "
                    "one-token labels can be scored; use judge.verdict_from: text"
                )
        elif not _PLAIN_LABEL.fullmatch(key):
            problems.append(
                f"label {key!r} is likely several tokens (brackets and other punctuation are, in "
                "common tokenizers), and over HTTP only one-token labels can be scored from the "
                "first reply token: set judge.tokenizer (the served model's, to count its tokens), "
                "use one-token labels (e.g. verdict.choice_markers: [A, B]), or judge.verdict_from: text"
            )
    return keys, problems


def _only_choice(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadReply("the body is not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        count = len(choices) if isinstance(choices, list) else type(choices).__name__
        raise BadReply(f"expected exactly one choice (n=1 was asked), got {count}")
    return choices[0]


def _usage(usage: Any) -> tuple[int, int]:
    if usage is None:
        return 0, 0
    if not isinstance(usage, dict):
        raise BadReply(f"usage is a {type(usage).__name__}, not an object")
    counts = []
    for name in ("prompt_tokens", "completion_tokens"):
        value = usage.get(name)
        if value is None:
            value = 0
        # bool is an int subclass; a count of True is as wrong as a count of "7".
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise BadReply(f"usage.{name} is {type(value).__name__} {value!r:.20}, not a count")
        counts.append(value)
    return counts[0], counts[1]


def _logprob(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadReply(f"a logprob is {type(value).__name__}, not a number")
    value = float(value)
    if math.isnan(value) or value > _LOGPROB_SLACK:
        raise BadReply(f"a logprob is {value}, outside [-inf, 0]")
    return min(value, 0.0)
