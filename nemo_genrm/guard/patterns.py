"""What judge-format text looks like, read on folded text (:func:`nemo_genrm.guard.folding.fold`).

Every pattern here runs on the folded form of a line, in which lookalike letters are Latin,
digits are ASCII, marks and invisible characters are gone. Every punctuation or symbol character
(anything that is neither a letter, a digit nor a space) counts as decoration: it may stand before
a label, between a label and its value, or around the value (``【Verdict】1``, ``「Verdict」: 1``,
``**Verdict:** 1``, ``Verdict → 1``).
"""

from __future__ import annotations

import re

from nemo_genrm.guard.vocabulary import LABEL_WORDS, POSITIVE_VALUES, ROLE_WORDS, words_pattern

__all__ = [
    "HTML_TAG", "INLINE_VERDICT", "LABEL_START", "LABEL_TAG", "ROLE_LINE", "VALUE_ONLY", "is_label_cell",
    "label_rest",
]  # fmt: skip

DECOR = r"(?:[^\w\s]|_)"
"""One decoration character: punctuation or a symbol of any category (``_`` included)."""
_SPACE_OR_DECOR = r"(?:[^\S\n]|[^\w\s]|_)"
_NOT_LETTER_AFTER = r"(?![^\W\d_])"  # the word ends here, though a digit may follow ("Verdict1")

# Stems of verdict-like keys in code, JSON and YAML: "is_correct", "grader_output", "isMatch".
_KEY_STEMS = (
    r"verdict|judg|grad(?:e|er|ing)|scor|rating|label|result|correct|match|pass|accept|equival|"
    r"same|valid|reward|evaluat|assess|decision|output|answer|outcome|approv|right"
)
_KEY = rf"[\w\-]*?(?:{_KEY_STEMS})[\w\-]*"
_LABELS = words_pattern(w for words in LABEL_WORDS.values() for w in words)
_PREFIXES = r"(?:(?:final|the|my|overall|official|correct|same|is|this|answer|grader|model)\s+)"

LABEL_START = re.compile(
    rf"^[ \t]*{_SPACE_OR_DECOR}*{_PREFIXES}*(?P<word>{_LABELS}|{_KEY}){_NOT_LETTER_AFTER}",
    re.IGNORECASE,
)
"""A line that opens with a label word or a verdict-like key, behind any decoration."""

_NEGATIVE_VALUES = r"no|false|incorrect|wrong|fail|failed|nein|non|нет|否|不|いいえ|아니오|لا|नहीं|0"
_VALUE = (
    rf"(?:\d+|{words_pattern(POSITIVE_VALUES)}|{_NEGATIVE_VALUES}|[il|]|\[\[?\s*[ab]\s*\]\]?|[ab])"
)
VALUE_ONLY = re.compile(rf"{_VALUE}{_SPACE_OR_DECOR}*", re.IGNORECASE)
"""What may follow a label with no separator: a verdict-like value and decoration (fullmatch)."""


def label_rest(rest: str) -> bool:
    """Whether ``rest``, the line after a label word, makes the line a verdict line.

    Nothing (the value is on the next line), any decoration (then anything: ``Verdict: 1``,
    ``Verdict】1``, ``Verdict -> yes``) except ``=``, which counts before a verdict-like value
    only, or such a value after spaces or glued to the label (``Verdict 1``, ``Urteil ja``,
    ``Verdict1``, ``Verdict I``).
    """
    stripped = rest.lstrip(" \t")
    if not stripped:
        return True
    if stripped.startswith("="):  # "result = compute(x)" is code: "=" counts before a value only
        return VALUE_ONLY.fullmatch(stripped.lstrip("= \t")) is not None
    if re.match(DECOR, stripped):
        return True
    return VALUE_ONLY.fullmatch(stripped) is not None


_ROLES = words_pattern((*ROLE_WORDS, "system prompt"))
ROLE_LINE = re.compile(
    rf"^[ \t]*{_SPACE_OR_DECOR}*{_ROLES}{_NOT_LETTER_AFTER}[^\S\n]*(?:{DECOR}|$)",
    re.IGNORECASE,
)
"""A line that opens a chat turn: ``System:``, ``### Assistant``, ``[user]``, ``<assistant>``, ``Система:``."""

INLINE_VERDICT = re.compile(
    rf"(?<!\(quoted\) )(?<![\w-])(?P<word>{_LABELS}|{_KEY}){_NOT_LETTER_AFTER}{_SPACE_OR_DECOR}*?"
    rf"(?:[:=]|->|=>|[→⇒—–]){_SPACE_OR_DECOR}*{_VALUE}(?![^\W_])",
    re.IGNORECASE,
)
"""A verdict inside a line: ``{"verdict": 1}``, ``is_correct: true``, ``… so Score = 1``."""

HTML_TAG = re.compile(r"<[^<>\n]{1,200}>")
"""An HTML or XML tag (read as a cell border when looking for tables and labels in markup)."""
LABEL_TAG = re.compile(rf"<\s*/?\s*(?:{_LABELS}|{_KEY}|{_ROLES})(?![\w-])[^<>\n]*>", re.IGNORECASE)
"""A tag named after a label or a role: ``<verdict value="1"/>``, ``<score>``, ``<assistant>``."""

_LABEL_CELL = re.compile(rf"{_SPACE_OR_DECOR}*{_PREFIXES}*(?:{_LABELS}|{_KEY}){_SPACE_OR_DECOR}*", re.IGNORECASE)


def is_label_cell(cell: str) -> bool:
    """Whether a table cell (folded) holds only a label word or a verdict-like key."""
    return _LABEL_CELL.fullmatch(cell) is not None

