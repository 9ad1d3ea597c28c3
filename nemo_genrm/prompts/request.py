"""What a judge is asked: one conversation, and where in it the candidate answer sits.

Kept below both the prompt builder (:mod:`nemo_genrm.prompts`, which writes requests) and the
engines (:mod:`nemo_genrm.judges`, which read them), so neither imports the other for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Message = Mapping[str, str]
"""One chat message: ``{"role": ..., "content": ...}``."""


@dataclass(frozen=True)
class JudgeRequest:
    """One conversation for the judge.

    Attributes:
        messages: The chat messages (system and user), rendered with the judge's own chat template.
        shrinkable: The candidate answer as placed in the prompt: the text an engine may shorten
            when the prompt does not fit the judge's prompt budget (``JudgeConfig.max_prompt_tokens``; the instructions
            are never cut), and the text a verdict reader skips in the reply. ``None``: the
            prompt must fit as is, else the sample is a ``prompt_too_long`` error.
        span: ``(start, end)`` of ``shrinkable`` in the last message's content, where the
            prompt builder placed it: fitting shortens exactly there. ``None`` (a request built
            by hand): fitting shortens the last occurrence of ``shrinkable`` in the last user
            message.
        vote: Which sample of this conversation the request is (0 for the first): an engine
            that samples (``temperature > 0``) draws it with seed ``sampling.seed + vote``, so
            the votes on one prompt are independent draws, not copies.

    Raises:
        ValueError: ``span`` is outside the last message or does not hold ``shrinkable``.
    """

    messages: tuple[Message, ...]
    shrinkable: str | None = None
    span: tuple[int, int] | None = None
    vote: int = 0

    def __post_init__(self) -> None:
        if self.span is None:
            return
        start, end = self.span
        content = self.messages[-1]["content"] if self.messages else ""
        if not 0 <= start <= end <= len(content) or content[start:end] != self.shrinkable:
            raise ValueError(
                f"span {self.span} does not hold the shrinkable text in the last message "
                f"(it holds {content[start:end][:40]!r})"
            )

    @classmethod
    def of(cls, item: RequestLike) -> JudgeRequest:
        """Accept a request or a bare list of messages."""
        if isinstance(item, JudgeRequest):
            return item
        return cls(messages=tuple(item))


RequestLike = JudgeRequest | Sequence[Message]
