"""Answers with no answer in them ("master keys"): they are not judged.

An answer that promises an answer and gives none (``:``, ``¿?``, ``∴``, ``Let's think.``,
``Veamos paso a paso.``, ``Lösung:``, ``Let's solve this step by step.\\nStep 1:``) has been
seen to make judge models say yes, so the environment gives it ``no_answer`` without asking
the judge. Whether it holds anything is read on the folded text
(:mod:`nemo_genrm.guard.folding`) with the opener and step words of
:mod:`nemo_genrm.guard.vocabulary`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from nemo_genrm.guard.folding import fold
from nemo_genrm.guard.vocabulary import OPENER_WORDS, STEP_WORDS, words_pattern
from nemo_genrm.guard.vocabulary import folded as folded_words

__all__ = ["is_content_free"]


def _word_sets(words: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    """``words`` as written in ASCII (case-folded), and every one folded.

    A word of the answer written in ASCII is looked up among the words written in ASCII: the
    folded form of another script's word can be an English one (Cyrillic ``шаг`` folds to
    ``war``, ``по`` to ``no``), which must not make ``War`` or ``No`` an opener.
    """
    words = tuple(words)
    return frozenset(w.casefold() for w in words if w.isascii()), frozenset(folded_words(words))


_OPENERS = _word_sets(OPENER_WORDS)
_LONGEST_OPENER = max(len(w) for w in _OPENERS[1])
_STEPS = _word_sets(STEP_WORDS)


def _in(word: str, written: str, sets: tuple[frozenset[str], frozenset[str]]) -> bool:
    """Whether a folded, case-folded ``word`` (``written`` in the answer) is one of ``sets``."""
    return word in sets[0] if written.isascii() else word in sets[1]


def _only_openers(word: str) -> bool:
    """Whether ``word`` is opener words run together (scripts written without spaces: 让我们思考)."""
    reachable = [True] + [False] * len(word)
    for end in range(1, len(word) + 1):
        reachable[end] = any(
            reachable[start] and word[start:end] in _OPENERS[1] for start in range(max(0, end - _LONGEST_OPENER), end)
        )
    return reachable[-1]


# "Step 1:", "Paso 2", "Шаг 3", "第1步": a step's number, not an answer.
_STEP_NUMBER = re.compile(
    rf"(?P<word>{words_pattern(STEP_WORDS)})[^\S\n]*+#?\d{{1,2}}(?!\d)|第[^\S\n]*+\d{{1,2}}[^\S\n]*+步", re.IGNORECASE
)
# A list item's number alone on its line ("1.", "2)", "(3)"): numbering, in an answer that
# announces steps or a list; alone in an answer, "1." is the answer 1.
_LIST_NUMBER = re.compile(r"^[^\S\n]*+\(?\d{1,2}[.)][^\S\n]*+$", re.MULTILINE)
_ANNOUNCES_LIST = _word_sets((*STEP_WORDS, "steps", "follows", "following", "below"))
# Symbols of logic that hold no answer: therefore, because, end of proof.
_NO_ANSWER_SYMBOLS = frozenset("∴∵∎∷")
_ASCII_DIGIT = re.compile(r"[0-9]")
_DIGIT = re.compile(r"\d")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*+")  # "Let's" is one word, read as "lets"


def is_content_free(answer: str) -> bool:
    """Whether an answer carries no answer at all: no number, no symbol of mathematics, no word but openers.

    Such "master key" answers (``:``, ``¿?``, ``—``, ``∴``, ``Thought process:``, ``Let's
    think.``, ``Veamos paso a paso.``, ``Lösung:``, ``Ответ:``, a lone ``Verdict:``, ``Let's solve
    this step by step.\\nStep 1:``) have been seen to make judge models say yes; they are not
    judged. Any number (digits of any script, superscripts, fractions) that does not number a
    step, any mathematical symbol that is not an arrow or one of ``∴ ∵ ∎ ∷`` (``∞``, ``∅``) and
    any word outside the opener vocabulary (:data:`nemo_genrm.guard.vocabulary.OPENER_WORDS`, in
    many languages) is content: ``No``, ``x``, ``π``, ``A``, ``1.``, ``-1`` and ``3/4`` are answers.
    """
    for char in () if answer.isascii() else unicodedata.normalize("NFKD", answer):
        if (
            not char.isascii()
            and unicodedata.category(char) == "Sm"
            and char not in _NO_ANSWER_SYMBOLS
            and "ARROW" not in unicodedata.name(char, "")
        ):
            return False
    folded = fold(answer)
    text = folded.text

    def written(start: int, end: int) -> str:
        begin, stop = folded.source_span(start, end)
        return answer[begin:stop]

    numbering = [
        m.span()
        # A step's number has a digit: without one the (slow, many-worded) scan finds nothing.
        for m in (_STEP_NUMBER.finditer(text) if _DIGIT.search(text) else ())
        if m["word"] is None or _in(m["word"].casefold(), written(*m.span("word")), _STEPS)
    ]
    if any(_in(m[0].casefold(), written(*m.span()), _ANNOUNCES_LIST) for m in _WORD.finditer(text)):
        numbering += [m.span() for m in _LIST_NUMBER.finditer(text)]
    for start, end in numbering:  # blanked, keeping every offset
        text = text[:start] + " " * (end - start) + text[end:]
    # A digit as written (not a lookalike: Cyrillic "з" folds to "3") outside a step's number.
    # Only digits are looked at: an ASCII text's are found by a regex, at C speed.
    digits = (m.start() for m in _ASCII_DIGIT.finditer(text)) if text.isascii() else range(len(text))
    for index in digits:
        if text[index].isdigit() and unicodedata.numeric(answer[folded.source_offset(index)], None) is not None:
            return False
    words = [(m[0].casefold(), written(*m.span())) for m in _WORD.finditer(text)]
    if len(words) == 1 and len(words[0][0]) == 1 and words[0][0].isascii():
        return False  # "A", "x": a one-letter answer, though "a" is an opener in "paso a paso"
    return all(
        _in(word.replace("'", "").replace("’", ""), source, _OPENERS) or (not source.isascii() and _only_openers(word))
        for word, source in words
    )
