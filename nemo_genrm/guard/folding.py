"""The form in which checks read judged text: what a reader sees, not how it is encoded.

An answer can hide a verdict from a pattern while a judge model still reads it: a combining mark
on a letter (``V̇erdict``), an invisible character that is not a format character (U+034F, U+FE0F,
U+3164, U+2800), a letter from another script drawn like a Latin one (small capitals, Cherokee,
Lisu, Cyrillic), a Roman numeral or a digit from another script. :func:`fold` maps every character
to what a reader takes it for:

1. line breaks of every kind become ``\\n``, and every space separator (category Zs, the Ogham
   space mark included) a plain space;
2. every default-ignorable code point (Unicode's ``Default_Ignorable_Code_Point``, read with the
   ``regex`` module) and the blank Braille pattern are dropped;
3. NFKD (compatibility decomposition: fullwidth forms, mathematical letters, Roman numerals,
   superscripts, ligatures, circled letters), then every combining mark is dropped; a
   parenthesised letter or digit (``⒱``, ``⑴``, whose NFKD is ``(v)``) reads as the bare one;
4. a decimal digit of any script becomes its ASCII digit;
5. any other non-ASCII character becomes its confusable prototype from Unicode TR39 (the
   ``confusables.txt`` data bundled by the ``disarm`` library, see :data:`CONFUSABLES_VERSION`)
   when that prototype is ASCII, or else the prototype of its other case (so a word folds
   alike in any case).

Punctuation and symbols are kept as they are (NFKD already makes most of them ASCII); the
patterns that read the folded text treat every punctuation and symbol character as decoration.

The folded text is for checks only: :class:`Folded` also records, for every folded character, the
offset of the character it came from, so a check that finds something in the folded text can
edit the text as written (which keeps a Russian answer in Cyrillic for the judge).
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass

import disarm
import regex

__all__ = ["CONFUSABLES_VERSION", "Folded", "fold", "fold_char", "is_invisible"]

CONFUSABLES_VERSION: str = disarm.CONFUSABLES_VERSION
"""Version of the Unicode ``confusables.txt`` the lookalike mapping comes from."""

LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# Default-ignorable code points (invisible by definition), plus the blank Braille pattern, a
# symbol that renders as nothing and is not default-ignorable.
_INVISIBLE = regex.compile(r"[\p{Default_Ignorable_Code_Point}\u2800]")
_MARK = regex.compile(r"\p{M}")
_SPACE = regex.compile(r"\p{Zs}")


def is_invisible(char: str) -> bool:
    """Whether ``char`` renders as nothing (default-ignorable, or the blank Braille pattern)."""
    return _INVISIBLE.match(char) is not None


@functools.lru_cache(maxsize=65_536)
def fold_char(char: str) -> str:
    """What one character reads as: ``""`` for an invisible one, else ASCII where possible."""
    if char.isascii():
        return "\n" if char == "\r" else char
    if char in LINE_BREAKS:
        return "\n"
    if is_invisible(char):
        return ""
    decomposed = unicodedata.normalize("NFKD", char)
    if len(decomposed) > 2 and decomposed[0] == "(" and decomposed[-1] == ")":
        decomposed = decomposed[1:-1]  # "⒱" and "⑴" read as "v" and "1", not "(v)"
    out = []
    for piece in decomposed:
        if _MARK.match(piece) or is_invisible(piece):
            continue
        if _SPACE.match(piece):
            out.append(" ")
            continue
        if piece.isascii():
            out.append(piece)
            continue
        digit = unicodedata.decimal(piece, None)
        if digit is not None:
            out.append(str(digit))
            continue
        out.append(_ascii_prototype(piece))
    return "".join(out)


def _ascii_prototype(char: str) -> str:
    """The ASCII TR39 prototype of ``char``, else of its other case, else ``char`` itself.

    Falling back to the other case makes the fold of a word the same in any case: TR39 maps
    capital ``В`` to ``B`` and small ``ш`` to ``w`` but neither ``в`` nor ``Ш``, so without it
    ``Вердикт`` and ``вердикт`` (or ``Шаг`` and ``шаг``) would fold apart.
    """
    for form in dict.fromkeys((char, char.lower(), char.upper())):
        if len(form) != 1:
            continue
        prototype = disarm.normalize_confusables(form)
        if prototype.isascii() and prototype.strip():
            return prototype
    return char


@dataclass(frozen=True)
class Folded:
    """Text in the form checks read, and where each of its characters came from.

    Attributes:
        text: The folded text.
        origin: ``origin[i]`` is the offset in the source of the character that ``text[i]`` came
            from; one more entry, the source's length, ends the list. ``None`` when the folded
            text is the source itself (ASCII without ``\\r``).
    """

    text: str
    origin: tuple[int, ...] | None

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The source offsets of the folded span ``[start, end)`` (whole source characters)."""
        if self.origin is None:
            return start, end
        begin = self.origin[start]
        if end <= start:
            return begin, begin
        return begin, self.origin[end - 1] + 1

    def source_offset(self, index: int) -> int:
        """The source offset of folded offset ``index`` (the source's end for the text's end)."""
        return index if self.origin is None else self.origin[index]


def fold(text: str) -> Folded:
    """``text`` in the form checks read (see the module docstring), with its origin map.

    ASCII text without ``\\r`` is its own folded form. Idempotent on the folded text.
    """
    if text.isascii() and "\r" not in text:
        return Folded(text, None)
    pieces: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if char == "\r" and text[index + 1 : index + 2] == "\n":
            continue  # \r\n is one line break, written by the \n
        folded = fold_char(char)
        pieces.append(folded)
        origin.extend([index] * len(folded))
    origin.append(len(text))
    return Folded("".join(pieces), tuple(origin))
