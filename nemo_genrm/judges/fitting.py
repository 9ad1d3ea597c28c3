"""Fit judge prompts into the context window and cut them into engine batches.

Two building blocks of the judge pipeline (transformers, vLLM; the HTTP engine fits too):

- :func:`fit_prompt` renders a request with the judge tokenizer's chat template and, when the
  prompt is longer than ``max_model_len - max_new_tokens``, shortens the candidate answer at its
  place (``JudgeRequest.span``, set by the prompt builder) in the last message: its head and
  tail are kept around a short elision marker, with the cut found by binary search. The instructions, the question
  and the reference are never touched. A prompt that cannot fit is the ``prompt_too_long`` error.
- :func:`plan_batches` sorts prompts by length (so a batch pads little) and cuts batches by a
  token budget (padded length times count, new tokens included), not only by count.
- :func:`queue_shares` deals prompts into one queue per replica, for engines that schedule a
  queue themselves (continuous batching keeps their slots full; they split it to fit memory).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nemo_genrm.errors import PROMPT_TOO_LONG, ConfigError
from nemo_genrm.judges.base import JudgeRequest, Message, RequestLike

logger = logging.getLogger(__name__)

ELISION_MARKER = "\n[...]\n"
"""Put where the middle of a shortened candidate answer was."""


@dataclass(frozen=True)
class FittedPrompt:
    """A request rendered for the judge, possibly shortened.

    Attributes:
        token_ids: The templated prompt's token ids (generation prompt included), or ``None``
            when the prompt could not be fitted.
        truncated: Whether the candidate answer was shortened.
        error: ``prompt_too_long`` when it could not fit, else ``None``.
        messages: The messages as rendered (with the shortened candidate), for engines that
            template the conversation themselves (the HTTP engine); ``None`` on error.
        vote: The request's sample index (``JudgeRequest.vote``): sampled with seed
            ``sampling.seed + vote``.
    """

    token_ids: tuple[int, ...] | None
    truncated: bool = False
    error: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    vote: int = 0

    @property
    def num_tokens(self) -> int:
        """Prompt length in tokens (0 on error)."""
        return len(self.token_ids) if self.token_ids is not None else 0


def render_ids(messages: Sequence[Message], tokenizer: Any) -> list[int]:
    """Token ids of ``messages`` under the tokenizer's chat template, with the generation prompt.

    Args:
        messages: Chat messages (``role`` and ``content``).
        tokenizer: A ``transformers`` tokenizer with a chat template.

    Returns:
        The token ids (the template's own special tokens included, nothing added on top).
    """
    text = tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False, add_generation_prompt=True)
    return list(tokenizer.encode(text, add_special_tokens=False))


def prompt_tokens(request: RequestLike, tokenizer: Any) -> int:
    """Tokens of ``request`` as the judge is sent it (chat template and generation prompt included).

    Rendered with every field empty, this is the fixed part of a template: what the question,
    reference and answer must fit beside (see :mod:`nemo_genrm.env.room`).
    """
    return len(render_ids(JudgeRequest.of(request).messages, tokenizer))


def shorten(text: str, keep: int, marker: str = ELISION_MARKER) -> str:
    """Keep ``keep`` characters of ``text``: its head and tail around ``marker``.

    Args:
        text: The text to shorten.
        keep: Characters of ``text`` to keep (the head gets the extra one when odd).
        marker: What replaces the removed middle.

    Returns:
        ``text`` itself when ``keep >= len(text)``, else ``head + marker + tail``.
    """
    if keep >= len(text):
        return text
    tail = keep // 2
    head = keep - tail
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def _with_candidate(messages: tuple[Message, ...], index: int, start: int, old: str, new: str):
    """A copy of ``messages`` where ``old`` at ``start`` of message ``index`` becomes ``new``."""
    out = [dict(m) for m in messages]
    content = out[index]["content"]
    out[index]["content"] = content[:start] + new + content[start + len(old) :]
    return tuple(out)


def fit_prompt(request: RequestLike, tokenizer: Any, max_prompt_tokens: int) -> FittedPrompt:
    """Render ``request`` and shorten its candidate answer until it fits ``max_prompt_tokens``.

    Only the candidate is cut: at ``request.span`` in the last message, or, for a request built
    by hand without a span, the last occurrence of ``request.shrinkable`` in the last user
    message. The rest of the conversation stays as written. The number of characters kept is the largest
    that fits, found by binary search over renders of the whole prompt.

    Args:
        request: The conversation (``JudgeRequest`` or a list of messages).
        tokenizer: The judge's ``transformers`` tokenizer (with a chat template).
        max_prompt_tokens: Longest prompt allowed (``max_model_len - max_new_tokens``).

    Returns:
        A :class:`FittedPrompt`; its ``error`` is ``prompt_too_long`` when even the fully
        elided candidate does not fit, or when the prompt is too long and has nothing to cut.

    Raises:
        ValueError: If ``max_prompt_tokens`` is below 1.
    """
    if max_prompt_tokens < 1:
        raise ValueError(f"max_prompt_tokens must be at least 1, got {max_prompt_tokens}")
    request = JudgeRequest.of(request)
    messages = tuple(dict(m) for m in request.messages)
    ids = render_ids(messages, tokenizer)
    if len(ids) <= max_prompt_tokens:
        return FittedPrompt(tuple(ids), messages=messages, vote=request.vote)
    where = _locate(messages, request)
    if where is None:
        return FittedPrompt(None, error=PROMPT_TOO_LONG)
    index, start = where
    old = request.shrinkable or ""

    def attempt(keep: int) -> tuple[tuple[dict[str, str], ...], list[int]]:
        shortened = _with_candidate(messages, index, start, old, shorten(old, keep))
        return shortened, render_ids(shortened, tokenizer)

    best = attempt(0)
    if len(best[1]) > max_prompt_tokens:
        return FittedPrompt(None, truncated=True, error=PROMPT_TOO_LONG)
    lo, hi = 0, len(old) - 1  # invariant: keeping `lo` characters fits, the full text does not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        candidate = attempt(mid)
        if len(candidate[1]) <= max_prompt_tokens:
            lo, best = mid, candidate
        else:
            hi = mid - 1
    logger.debug("Shortened a candidate answer from %d to %d characters", len(old), lo)
    return FittedPrompt(tuple(best[1]), truncated=True, messages=best[0], vote=request.vote)


def _locate(messages: tuple[dict[str, str], ...], request: JudgeRequest) -> tuple[int, int] | None:
    """(message index, character offset) of the candidate to shorten, or None.

    With a span, the candidate is where the prompt builder put it, in the last message. Without
    one, the last occurrence of ``shrinkable`` in the last user message is taken: the built-in
    templates place the candidate after the question and the reference (which may hold the same
    text). A text no longer than the elision marker is never cut: cutting it cannot shorten the
    prompt, and such a short text could also match a piece of the instructions (a candidate
    ``1`` in "reply with 1").
    """
    shrinkable = request.shrinkable
    if not shrinkable or len(shrinkable) <= len(ELISION_MARKER):
        return None
    if request.span is not None:
        return len(messages) - 1, request.span[0]
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            start = messages[index]["content"].rfind(shrinkable)
            return (index, start) if start >= 0 else None
    return None


def plan_batches(
    lengths: Sequence[int],
    *,
    max_batch_size: int,
    max_tokens_per_batch: int,
    max_new_tokens: int,
    max_padding: float | None = None,
) -> list[list[int]]:
    """Group prompt indices into batches by length under a count and a token budget.

    Prompts are taken longest first, so the first prompt of a batch sets its padded length
    ``L``; a batch grows while ``count <= max_batch_size`` and
    ``count * (L + max_new_tokens) <= max_tokens_per_batch`` (and, with ``max_padding``, while
    the next prompt is padded by at most that share of ``L``). A prompt whose own cost is over
    the budget gets a batch of its own (it cannot be split).

    Args:
        lengths: Prompt lengths in tokens, one per prompt.
        max_batch_size: Most prompts in one batch.
        max_tokens_per_batch: Token budget of one batch (padded prompt plus new tokens, summed
            over the batch).
        max_new_tokens: Tokens each sequence may grow by (0 for a forward pass only).
        max_padding: Largest share of a batch's prompt width a prompt may be padded by
            (``None``: no bound); tighter buckets waste fewer padded positions on mixed lengths.

    Returns:
        Lists of indices into ``lengths``; every index appears exactly once.

    Raises:
        ValueError: If a size is not positive, ``max_new_tokens`` is negative or a length is
            negative.
    """
    if max_batch_size < 1 or max_tokens_per_batch < 1:
        raise ValueError(
            f"max_batch_size ({max_batch_size}) and max_tokens_per_batch ({max_tokens_per_batch}) must be at least 1"
        )
    if max_new_tokens < 0 or any(n < 0 for n in lengths):
        raise ValueError("lengths and max_new_tokens must not be negative")
    if max_padding is not None and not 0.0 <= max_padding < 1.0:
        raise ValueError(f"max_padding must be in [0, 1), got {max_padding}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    padded = 0
    for index in order:
        if current:
            fits_count = len(current) < max_batch_size
            fits_tokens = (len(current) + 1) * padded <= max_tokens_per_batch
            width = padded - max_new_tokens
            fits_padding = max_padding is None or width - lengths[index] <= max_padding * width
            if fits_count and fits_tokens and fits_padding:
                current.append(index)
                continue
            batches.append(current)
        current = [index]
        padded = lengths[index] + max_new_tokens
    if current:
        batches.append(current)
    return batches


def label_token_ids(tokenizer: Any, labels: Sequence[str]) -> list[list[int]]:
    """Token ids of each verdict label as the start of the judge's reply (no special tokens).

    Every engine scores a label as the summed log-probability of these tokens teacher-forced
    after the prompt, then renormalises over the labels; one encoding keeps them in step.

    Raises:
        ValueError: If a label encodes to no tokens.
    """
    label_ids = [list(tokenizer.encode(label, add_special_tokens=False)) for label in labels]
    if any(not ids for ids in label_ids):
        raise ValueError(f"a label encodes to no tokens: {list(labels)!r}")
    return label_ids


class PromptFitter:
    """Loads the judge tokenizer once and fits whole batches of requests.

    Args:
        tokenizer_name: Path or hub id of the tokenizer.
        max_prompt_tokens: Longest prompt allowed (``max_model_len - max_new_tokens``).
        tokenizer: The tokenizer itself, when already loaded (``tokenizer_name`` is then unused).
    """

    def __init__(self, tokenizer_name: str, max_prompt_tokens: int, *, tokenizer: Any = None):
        if tokenizer is None:
            tokenizer = load_tokenizer(tokenizer_name)
        self.tokenizer = tokenizer
        self.max_prompt_tokens = max_prompt_tokens

    @classmethod
    def for_judge(cls, judge_config: Any, tokenizer: Any = None) -> PromptFitter:
        """The fitter of a ``JudgeConfig``: its tokenizer (``tokenizer`` when one is already
        loaded) and its prompt budget.

        Raises:
            ConfigError: The tokenizer cannot be loaded; the message names ``judge.tokenizer``
                or ``judge.model_name``, whichever gave the name.
        """
        budget = judge_config.max_model_len - judge_config.sampling.reply_tokens
        if tokenizer is None:
            setting = "judge.tokenizer" if judge_config.tokenizer else "judge.model_name"
            tokenizer = load_tokenizer(judge_config.tokenizer_name, setting=setting)
        return cls(judge_config.tokenizer_name, budget, tokenizer=tokenizer)

    def fit(self, batch: Sequence[RequestLike]) -> list[FittedPrompt]:
        """Fit every request of ``batch`` (see :func:`fit_prompt`), in order."""
        return [fit_prompt(item, self.tokenizer, self.max_prompt_tokens) for item in batch]


def load_tokenizer(name: str, *, setting: str = "judge.tokenizer") -> Any:
    """The tokenizer at ``name`` (a local folder or a hub id), or the setting to change.

    A judge whose name points nowhere is a configuration mistake: it is reported as one typed
    error naming the setting, not as transformers' traceback.

    Args:
        name: Folder or hub id.
        setting: The config key that gave ``name``, for the message.

    Raises:
        ConfigError: Nothing loadable is at ``name`` (no such folder, no such model id, or none
            in the cache when offline).
    """
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as exc:  # not found / offline (OSError), malformed id (ValueError)
        why = _why_not_loadable(name, exc)
        raise ConfigError([f"{setting}: no tokenizer could be loaded from {name!r}: {why}"]) from None


def missing_folder(name: str) -> str | None:
    """Why ``name`` cannot be loaded when it is meant as a folder that does not exist, else ``None``.

    A hub id is ``name`` or ``namespace/name``; anything else (``/``, ``.``, ``~`` first, or more
    than one ``/``) is meant as a folder, which can be checked without reaching the hub.
    """
    is_path = name.startswith(("/", ".", "~")) or name.count("/") > 1
    if is_path and not os.path.exists(os.path.expanduser(name)):
        return "there is no such folder; give the judge checkpoint's folder or a model id on the hub"
    return None


def _why_not_loadable(name: str, exc: Exception) -> str:
    missing = missing_folder(name)
    if missing is not None:
        return missing
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{first} (give the judge checkpoint's folder, or a model id on the hub; offline, one in the cache)"


def queue_shares(lengths: Sequence[int], shares: int) -> list[list[int]]:
    """Deal prompt indices into ``shares`` queues of like length mix (longest first, in turn).

    Args:
        lengths: Prompt lengths in tokens, one per prompt.
        shares: Queues wanted (at most one per prompt; at least one).

    Returns:
        Non-empty lists of indices into ``lengths``; every index appears exactly once.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    count = max(1, min(shares, len(order)))
    return [order[k::count] for k in range(count)] if order else []
