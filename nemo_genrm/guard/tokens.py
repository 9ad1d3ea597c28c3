"""Chat-template special tokens: the shapes every family writes them in, and how they are broken.

A judge server applies its chat template and tokenizes the prompt; a special token that reaches it
as text inside an answer becomes a real turn boundary (a new system or user turn, the end of the
judge's instructions). The judge's own tokenizer names its tokens (the environment passes its
special and added special tokens); a judge behind HTTP whose tokenizer is unknown is covered by
the shapes the chat templates of the families that ``transformers`` supports write them in:

- ``<|name|>``: ChatML and its many users (Qwen, Yi, SmolLM, InternLM, Kimi), Llama 3 and 4,
  Phi, Granite, Cohere, GPT-OSS (harmony), GLM, OLMo, Zephyr, and DeepSeek's fullwidth
  ``<｜name｜>`` (with ``▁`` for spaces);
- ``[|name|]``: EXAONE (``[|system|]``, ``[|endofturn|]``) and BlueLM (``[|Human|]``);
- ``<name>`` and ``</name>`` where the name holds ``_``, ``:`` or a digit, is in capitals, or
  is one of the short names of :data:`SHORT_NAMES`: Gemma's ``<start_of_turn>``, Nemotron's
  ``<extra_id_1>``, Baichuan's ``<reserved_107>``, InternLM's ``<eoh>``/``<eoa>``, ChatGLM's
  ``<sop>``, ``<s>``/``</s>``, ``<bos>``, Seed's ``<seed:bos>``, Cohere's ``<BOS_TOKEN>``,
  Ling's ``<role>``; a name that starts with ``_`` (TeleChat's ``<_user>``, ``<_bot>``) or is
  outside ASCII (MiniCPM's ``<用户>``); an answer's markup and code (``<div>``,
  ``#include <vector>``) is left as written;
- ``[NAME]`` and ``[/NAME]`` in capitals, with an optional lowercase prefix: Llama 2 and
  Mistral's ``[INST]``, ``[SYSTEM_PROMPT]``, ``[TOOL_CALLS]``, ChatGLM's ``[gMASK]``, BERT-style
  ``[CLS]``/``[SEP]``; and ``[unused9]`` (openPangu's turns, BERT vocabularies' reserved tokens);
- ``<<SYS>>`` and ``<</SYS>>`` (Llama 2), and MiniMax's ``]~b]``, ``]~!b[``, ``[e~[`` and ``<]image[>``.

The list was checked against every token-shaped string literal in the model code of
``transformers`` 5.23 (the EXAONE and MiniMax shapes were missing) and against the chat templates
of the families above; ``tests/unit/test_injection.py`` breaks one token of every family.

:func:`break_tokens` puts a space after a token's opening bracket, which no tokenizer reads as
the token, and leaves the rest readable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["CHAT_TOKEN_SHAPES", "SHORT_NAMES", "break_tokens"]

SHORT_NAMES: tuple[str, ...] = (
    "s",
    "bos",
    "eos",
    "pad",
    "unk",
    "mask",
    "cls",
    "sep",
    "sop",
    "eop",
    "eoh",
    "eoa",
    "eosys",
    "eod",
    "eot",
    "eom",
    "think",
    "thinking",
    "reasoning",
    "reflection",
    "system",
    "user",
    "assistant",
    "human",
    "bot",
    "model",
    "tool",
    "image",
    "audio",
    "video",
    "img",
    "start",
    "end",
    "role",
)
"""Names without ``_``, ``:`` or a digit that chat templates use as ``<name>`` tokens."""

CHAT_TOKEN_SHAPES: tuple[str, ...] = (
    r"<[|｜][^\s<>|｜]{1,64}[|｜]>",  # <|im_start|>, <｜end▁of▁sentence｜>
    r"\[\|[^\s\[\]|]{1,64}\|\]",  # EXAONE's [|system|], [|endofturn|]; BlueLM's [|Human|]
    # <start_of_turn>, <extra_id_1>, <seed:bos>, <BOS_TOKEN>, </s>, <eoh>: a name with "_", ":" or a
    # digit, in capitals, or one of the short names special tokens use; TeleChat's <_user>, MiniCPM's
    # <用户> (a name outside ASCII); <vector>, <div>, <b> stay. Bounded: no run is tried twice.
    rf"</?(?:[A-Za-z](?=[\w.\-]{{0,62}}[_:\d])[\w.:\-]{{0,63}}+|[A-Z]{{2,64}}+|_[A-Za-z]{{1,32}}+|"
    rf"[^\x00-\x7f\s<>|｜]{{1,16}}+|(?i:{'|'.join(SHORT_NAMES)}))>",
    r"\[/?[a-z]?[A-Z][A-Z0-9_]{1,63}\]",  # [INST], [/INST], [SYSTEM_PROMPT], [gMASK]
    r"\[unused\d{1,4}\]",  # openPangu's [unused9]系统： (BERT vocabularies' reserved tokens)
    r"<</?[A-Z]{2,16}>>",  # <<SYS>>, <</SYS>>
    r"\]~!?b[\[\]]|\[e~\[|<\][a-z_]{1,32}\[>",  # MiniMax: ]~b], ]~!b[, [e~[, <]image[>
)
_SHAPES = re.compile("|".join(f"(?:{shape})" for shape in CHAT_TOKEN_SHAPES))


def _broken(token: str) -> str:
    cut = 2 if token.startswith("<<") else 1  # "<< SYS>>": "< <SYS>>" would hold "<SYS>" again
    return f"{token[:cut]} {token[cut:]}"


def break_tokens(text: str, special_tokens: Iterable[str] = ()) -> str:
    """``text`` with every chat-token shape and every token of ``special_tokens`` broken.

    Idempotent: a broken token matches no shape and no token (a space follows its first
    character; tokens shorter than two characters are left alone).

    Args:
        text: Normalised text (fullwidth forms already folded by NFKC, except DeepSeek's bars).
        special_tokens: The judge tokenizer's special and added special tokens.

    Returns:
        The text with those tokens broken.
    """
    for token in sorted({t for t in special_tokens if len(t) >= 2 and not t.isspace()}, key=len, reverse=True):
        if token in text:
            text = text.replace(token, _broken(token))
    return _SHAPES.sub(lambda m: _broken(m[0]), text)
