"""The judges' special tokens: read from their tokenizers (answers are defused of them), and a
warning for a judge whose tokens are unknown (reached over HTTP without ``judge.tokenizer``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from nemo_genrm.config import JudgeConfig
from nemo_genrm.judges.base import Judge

logger = logging.getLogger(__name__)


def judge_tokenizer(judge: Judge) -> Any:
    """The tokenizer a ready judge fits prompts with, or ``None`` (an HTTP judge without one).

    In-process engines and :class:`~nemo_genrm.judges.http.HttpJudge` have ``tokenizer`` (the
    HTTP judge's is ``None`` without ``judge.tokenizer``); pooled engines have ``fitter.tokenizer``.
    """
    return getattr(judge, "tokenizer", None) or getattr(getattr(judge, "fitter", None), "tokenizer", None)


def tokenizer_special_tokens(tokenizer: Any) -> list[str]:
    """A judge tokenizer's special tokens and added special tokens (none for ``None``).

    ``all_special_tokens`` lists only the named ones (BOS, EOS, ...); a chat template's turn
    tokens are often added special tokens only (``added_tokens_decoder``), so both are read.
    """
    if tokenizer is None:
        return []
    named = getattr(tokenizer, "all_special_tokens", None)
    tokens = list(named) if isinstance(named, (list, tuple)) else []
    added = getattr(tokenizer, "added_tokens_decoder", None)
    if isinstance(added, Mapping):
        tokens += [getattr(t, "content", None) for t in added.values() if getattr(t, "special", False)]
    return sorted({t for t in tokens if isinstance(t, str) and t})


def special_tokens(judge: Judge) -> list[str]:
    """The special tokens of a ready judge's tokenizer (:func:`tokenizer_special_tokens`)."""
    return tokenizer_special_tokens(judge_tokenizer(judge))


def warn_unknown_special_tokens(judges: Sequence[JudgeConfig]) -> None:
    """Say at start-up which HTTP judges leave their own special tokens unknown, and what that leaves open."""
    for judge in judges:
        if judge.backend == "http" and not judge.tokenizer:
            logger.warning(
                "judge %r is reached over HTTP without judge.tokenizer, so its own special tokens are "
                "unknown: answers are defused of the chat-token shapes of the template families only "
                "(<|name|>, <name>, [NAME], <<SYS>>, MiniMax's ]~b]); a special token of any other shape "
                "that the server's tokenizer parses would reach the judge as a turn boundary. Set "
                "judge.tokenizer to the judge's tokenizer (a path or hub id) to break its tokens too.",
                judge.model_name,
            )
