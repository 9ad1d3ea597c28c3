"""What judge-format text looks like, read on folded text (:func:`nemo_genrm.guard.folding.fold`).

Every pattern here runs on the folded form of a line, in which lookalike letters are Latin,
digits are ASCII, marks and invisible characters are gone. Every punctuation or symbol character
(anything that is neither a letter, a digit nor a space) counts as decoration: it may stand before
a label, between a label and its value, or around the value (``【Verdict】1``, ``「Verdict」: 1``,
``**Verdict:** 1``, ``Verdict → 1``).

A *verdict line* opens with a label (:mod:`nemo_genrm.guard.vocabulary`) and goes on to a
verdict-like value: a yes or a no of any language, a correctness word, ``1`` or ``0`` (or a
lookalike of ``1``) in digits or in words of any language of the vocabulary (``eins``, ``一``),
first or second, a check mark or a cross, a rating out of 5, 10 or 100, or one of the prompt's
own labels. The label may
carry an ending or sit inside a compound (``Veredictos``, ``Endurteil``, ``最终判定``, ``판정은``),
and linking words may stand between it and the value (``The verdict is: 1``, ``判定结果是正确``).
A label that names a verdict itself (``Verdict``, ``Rating``) takes any small number as its value
and any few words before it (``Verdict was 1``, ``Verdict: the candidate is correct``); one that
honest answers use too (``Result``, ``Score``, ``Output``) needs a separator and a verdict-like
value (or a few words and a check mark: ``Estado: aprobado ✅``), so ``Score: 42`` is an answer
and keeps it. A label with nothing after it is a verdict line
too, inflected or compound (``Endurteil:``): its value is on the next line.

Every repetition a hostile line could make long is possessive or bounded, so each pattern runs
in time linear in the line, whatever it holds (a megabyte of spaces or colons included).
"""

from __future__ import annotations

import functools
import re

from nemo_genrm.guard.vocabulary import (
    CORRECTNESS_VALUES,
    LABEL_WORDS,
    LINK_WORDS,
    MARK_SYMBOLS,
    NEGATIVE_VALUES,
    NUMBER_VALUES,
    POSITIVE_VALUES,
    ROLE_WORDS,
    VERDICT_WORDS,
    compoundable,
    folded,
    words_pattern,
)

__all__ = [
    "DECOR",
    "HTML_TAG",
    "LABEL_TAG",
    "ROLE_LINE",
    "inline_verdicts",
    "is_label_cell",
    "is_verdict_line",
]

_MARKS = f"[{re.escape(MARK_SYMBOLS)}]"
DECOR = rf"(?:(?!{_MARKS})[^\w\s]|_)"
"""One decoration character: punctuation or a symbol of any category (``_`` included), except the
symbols that say yes or no by themselves (:data:`~nemo_genrm.guard.vocabulary.MARK_SYMBOLS`)."""
_SEP = rf"(?:[^\S\n]|{DECOR})"  # a space (not a line break) or a decoration character
_SPACE = r"[^\S\n]"
_LETTER = r"[^\W\d_]"
_NOT_LETTER_AFTER = r"(?![^\W\d_])"  # the word ends here, though a digit may follow ("Verdict1")

# Stems of verdict-like keys in code, JSON and YAML: "is_correct", "grader_output", "isMatch".
_KEY_STEMS = (
    r"verdict|judg|grad(?:e|er|ing)|scor|rating|label|result|correct|match|pass|accept|equival|"
    r"same|valid|reward|evaluat|assess|decision|output|answer|outcome|approv|right"
)
# Bounded on both sides: a key is a name, and an unbounded run here would let one long word
# be tried from every stem inside it.
_KEY = rf"[\w\-]{{0,40}}?(?:{_KEY_STEMS})[\w\-]{{0,40}}+"
_PREFIXES = (
    r"(?:(?:final|the|my|our|your|his|her|their|overall|official|correct|same|is|this|answer|grader|model|"
    rf"total|ultimate|definitive){_SPACE}++)"
)


def _head(words: tuple[str, ...], name: str) -> str:
    """A label from ``words``: inside a compound, with an ending, or as it is, in group ``name``.

    A compound's head is at most 12 letters and an ending at most 4, both tried shortest first;
    any label glued to letters of another script (Latin and not) counts too.
    """
    exact = words_pattern(words)
    suffixable = words_pattern(w for w in words if len(w) >= 4 or compoundable(w))
    inside = words_pattern(w for w in words if compoundable(w))
    # A change of script is a word break to a reader: "Overதீர்ப்பு", "最终judici".
    after_latin = words_pattern(w for w in words if not w.isascii())
    after_other = words_pattern(w for w in words if w.isascii())
    return (
        rf"(?P<{name}>{_LETTER}{{1,12}}?{inside}{_LETTER}{{0,4}}?|[a-z]{{1,12}}+{after_latin}{_LETTER}{{0,4}}?|"
        rf"(?:(?![a-z]){_LETTER}){{1,12}}+{after_other}{_LETTER}{{0,4}}?|{suffixable}{_LETTER}{{0,4}}?|{exact})"
    )


_VERDICT_WORDS = folded(w for words in VERDICT_WORDS.values() for w in words)
_LABEL_WORDS = folded(w for words in LABEL_WORDS.values() for w in words)
_LINKS = rf"(?:{_SEP}*+{words_pattern(LINK_WORDS)}{_NOT_LETTER_AFTER})"
# Words before the value of a label that names a verdict: "Verdict: the candidate is correct".
_FILLER = rf"(?:{_SEP}*+{_LETTER}++)"
_RATING = rf"\d{{1,3}}{_SPACE}*+(?:/|out{_SPACE}+of){_SPACE}*+(?:100|10|5)(?!\d)"
# After a value: the end of a word, and not the start of a longer number ("1/2", "1.5", "1,000").
_VALUE_END = rf"(?!\w)(?!{_SPACE}*+[.,/:]{_SPACE}*+\d)"


def _value_words(extra: frozenset[str]) -> str:
    """Every verdict-like word, and the prompt's own labels, as one alternation."""
    words = (*POSITIVE_VALUES, *NEGATIVE_VALUES, *CORRECTNESS_VALUES, *NUMBER_VALUES, *extra)
    bare = (re.sub(r"^\W+|\W+$", "", w) for w in folded(words))
    return words_pattern(w for w in bare if w and not w.isdigit())


@functools.lru_cache(maxsize=16)
def _patterns(extra: frozenset[str]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The verdict-line and inline-verdict patterns for a prompt whose labels are ``extra``."""
    digits = "|".join(sorted({re.escape(x) for x in extra if x.isdigit()} | {"1", "0"}, key=len, reverse=True))
    # "l", "i" and "|" read as 1; a verdict word names its value with any small number.
    value = rf"(?:{_RATING}|{_value_words(extra)}|(?:{digits})(?!\d)|[il|]|{_MARKS}|(?(strong)\d{{1,3}}|(?!)))"
    strong_head = _head(_VERDICT_WORDS, "strong")
    weak_head = _head(_LABEL_WORDS, "weak")
    exact = rf"(?:{words_pattern(_LABEL_WORDS)}|{_KEY})"
    line = re.compile(
        rf"^{_SEP}*+{_PREFIXES}*"
        rf"(?:{strong_head}{_FILLER}{{0,6}}?{_SEP}*+{value}{_VALUE_END}"  # Verdict was 1
        rf"|(?:{weak_head}|(?P<key>{_KEY})){_NOT_LETTER_AFTER}"  # Result: yes, is_correct: true
        rf"(?:{_LINKS}{{0,4}}{_SPACE}*+{DECOR}{_SEP}*+|{_SPACE}*+){value}{_VALUE_END}"
        rf"|(?:{_head(_LABEL_WORDS, 'alone')}|{_KEY}){_NOT_LETTER_AFTER}{_LINKS}{{0,4}}{_SEP}*+$"  # Verdict:
        rf"|{_head(_LABEL_WORDS, 'marked')}{_NOT_LETTER_AFTER}{_SPACE}*+{DECOR}{_FILLER}{{0,4}}?{_SEP}*+{_MARKS})",
        re.IGNORECASE,
    )
    inline = re.compile(
        rf"(?<!\(quoted\) )(?<![\w-])(?:(?P<strong>{words_pattern(_VERDICT_WORDS)})|{exact}){_NOT_LETTER_AFTER}"
        rf"{_LINKS}{{0,3}}(?P<sep>{_SEP}*+){value}{_VALUE_END}",
        re.IGNORECASE,
    )
    return line, inline


def is_verdict_line(line: str, labels: frozenset[str] = frozenset()) -> bool:
    """Whether a folded line is a verdict line (see the module docstring).

    Args:
        line: One line, folded.
        labels: The prompt's own labels and choice markers, bare (``1``, ``0``, ``a``, ``b``):
            verdict-like values too.
    """
    return _patterns(labels)[0].match(line) is not None


_INLINE_SEPARATOR = re.compile(r"[:=→⇒—–]|->")


def inline_verdicts(text: str, labels: frozenset[str] = frozenset()) -> list[re.Match[str]]:
    """Every verdict inside a folded line: ``{"verdict": 1}``, ``is_correct: true``, ``… so Score = 1``.

    A label, linking words, a separator (``:``, ``=``, an arrow or a dash) and a verdict-like
    value; ``the answer is 1`` has no separator and stays prose. Matches carry the label's start.
    """
    return [m for m in _patterns(labels)[1].finditer(text) if _INLINE_SEPARATOR.search(m["sep"])]


_ROLES = words_pattern((*ROLE_WORDS, "system prompt"))
ROLE_LINE = re.compile(
    rf"^{_SEP}*+{_ROLES}{_NOT_LETTER_AFTER}{_SPACE}*+(?:{DECOR}|$)",
    re.IGNORECASE,
)
"""A line that opens a chat turn: ``System:``, ``### Assistant``, ``[user]``, ``<assistant>``, ``Система:``."""

HTML_TAG = re.compile(r"<[^<>\n]*+>")
"""An HTML or XML tag of any length (read as a cell border when looking for tables and labels in
markup). Linear: a run inside a tag holds no ``<``, so runs tried from different starts never overlap."""
LABEL_TAG = re.compile(
    rf"<\s*+/?\s*+(?:{words_pattern(_LABEL_WORDS)}|{_KEY}|{_ROLES})(?![\w-])[^<>\n]*+>", re.IGNORECASE
)
"""A tag named after a label or a role: ``<verdict value="1"/>``, ``<score>``, ``<assistant>``."""

_LABEL_CELL = re.compile(rf"{_SEP}*+{_PREFIXES}*(?:{_head(_LABEL_WORDS, 'cell')}|{_KEY}){_SEP}*+", re.IGNORECASE)


def is_label_cell(cell: str) -> bool:
    """Whether a table cell (folded) holds only a label word (inflected or compound) or a verdict-like key."""
    return _LABEL_CELL.fullmatch(cell) is not None
