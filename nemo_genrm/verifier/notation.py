"""A stated value written as one LaTeX expression, or ``None`` when it is not a value alone.

math-verify's own ``parse`` extracts a number from anywhere in a text: ``not 42``, ``42 thousand``,
``4.2 \\times 10^{1}`` (as 10) and ``±42`` (as 42) all come out as a single number, ``42%`` and
``42`` compare equal, and ``٤٢`` or ``forty-two`` are not read at all. A value verifier that
gives rewards cannot read text that way, so :func:`as_latex` first writes what a reader takes
for the value in plain LaTeX, and refuses (``None``) whatever is more than a value:

- digits of every script (category Nd) are ASCII digits; superscript digits an exponent
  (``4²`` is ``4^{2}``, never ``42``); the minus sign, its look-alikes (``˗``, a ``⁻`` opening
  the value) and a hyphen, a dash or a heavy minus right before a digit (``‐42``, ``—42``,
  ``➖42``; not ``— 42``) a minus; subscript digits an index or a base
  (``101010₂``), which is no plain value; circled and enclosed digits are digits (``④②``);
  ``±``/``∓``, ``×``/``·``/``÷``, ``√``, ``π``, ``∞`` and vulgar fractions (``3½``) their LaTeX;
- a percent is a hundredth (``42%`` is ``\\frac{42}{100}``, so it equals ``0.42``, not ``42``),
  ``‰`` a thousandth; a scale word multiplies (``42 thousand`` is ``42\\times10^{3}``);
  ``squared`` and ``cubed`` are powers; ``4.2e1`` is ``4.2\\times10^{1}``;
- number words are numbers: English within a value (``minus forty-two point five``,
  text2num's ``alpha2digit``), and, for an answer, a whole value in one of text2num's other
  languages (``quarante-deux``, ``zweiundvierzig``);
- digit groups split by commas, spaces or ``\\,`` are one number (``1 000``, ``42\\,000``);
- a leading one-letter assignment or membership is dropped (``x = 42``, ``x \\in [1, 5]``).

Whatever still holds a word, a relation (``=``, ``<``), a digit run split by a space (``3 1/2``,
a mixed number or a product), a factorial or an exponent tower is not a value: the verifier
decides nothing about it and the judge is asked. Expressions are kept short (at most
:data:`MAX_CHARS` characters, exponents of at most three digits) because math-verify's own
timeout uses ``signal.alarm``, which only works on the main thread; the environment verifies
on worker threads, so what could keep sympy busy is refused before it is parsed.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from fractions import Fraction

from text_to_num import alpha2digit, text2num

from nemo_genrm.guard.folding import is_invisible

__all__ = ["MAX_CHARS", "as_latex", "is_invalid_numeral", "percent_number", "split_remark"]

MAX_CHARS = 96
"""Longest value (after normalisation) the verifier parses; longer ones are not decided."""

FOREIGN_LANGUAGES = ("fr", "es", "de", "it", "pt", "nl", "da")
"""text2num's languages besides English, read for a whole answer value (``quarante-deux``)."""

_SYMBOLS = {
    "\u2212": "-",
    "\u2012": "-",
    "\u2013": "-",
    "\ufe63": "-",
    "\uff0d": "-",  # minus and dashes
    "\u02d7": "-",  # modifier letter minus
    "\u00b1": r"\pm ",
    "\u2213": r"\mp ",
    "\u00d7": r"\times ",
    "\u2715": r"\times ",
    "\u2a2f": r"\times ",
    "\u00b7": r"\cdot ",
    "\u22c5": r"\cdot ",
    "\u2219": r"\cdot ",
    "\u00f7": r"\div ",
    "\u2215": "/",
    "\u2044": "/",  # division and fraction slashes
    "\u221a": r"\sqrt ",
    "\u03c0": r"\pi ",
    "\u221e": r"\infty ",
    "\u066b": ".",
    "\u066c": ",",  # Arabic decimal and thousands separators
}
# Read as a minus right before a digit: hyphens, the em dash and the horizontal bar, the heavy
# minus, the subscript minus and the hyphen bullet (extraction drops a dash that follows a label
# as punctuation: "Answer:—42" states 42).
_MINUS_BEFORE_DIGIT = "\u2010\u2011\u2014\u2015\u2796\u208b\u2043"
_SUBSCRIPT_DIGITS = "".join(chr(0x2080 + d) for d in range(10))
_SUPERSCRIPT_DIGITS = "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"
_SUPERSCRIPTS = {"\u207b": "-", "\u207a": "+", **{c: str(unicodedata.digit(c)) for c in _SUPERSCRIPT_DIGITS}}
# LaTeX a value may hold; anything else with a backslash is not a value alone.
_COMMANDS = ("dfrac", "tfrac", "frac", "sqrt", "pi", "times", "cdot", "div", "pm", "mp", "infty")
_SPACING = re.compile(r"\\(?:left|right|displaystyle|[,;:! ])|~")
_WRAPPERS = (
    re.compile(r"^\$+(.*?)\$+$", re.S),
    re.compile(r"^\\\((.*)\\\)$", re.S),
    re.compile(r"^\\\[(.*)\\\]$", re.S),
    re.compile(r"^\\(?:boxed|fbox)\{(.*)\}$", re.S),
    # Formatting around the whole value: LaTeX text and font commands, colour, Markdown emphasis
    # and code, a dollar sign, check marks after it ("\\mathbf{41}", "**41**", "`41`", "\\$41").
    re.compile(
        r"^\\(?:text|textbf|textrm|textnormal|textup|mathbf|mathrm|mathit|mathsf|mathnormal|bm|boldsymbol|mbox)"
        r"\s*\{(.*)\}$",
        re.S,
    ),
    re.compile(r"^\\(?:textcolor|colorbox)\s*\{[^{}]*\}\s*\{(.*)\}$", re.S),
    re.compile(r"^\\color\s*\{[^{}]*\}(.*)$", re.S),
    re.compile(r"^(?:\*\*|__)(.*)(?:\*\*|__)$", re.S),
    re.compile(r"^\*([^*].*)\*$", re.S),
    re.compile(r"^`+(.*?)`+$", re.S),
    re.compile(r"^\\\$\s*(.*)$", re.S),
    re.compile(r"^(.*?)\s*[\u2705\u2714\u2611\u2713]+$", re.S),
)
_SCALES = {"hundred": 2, "thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_NUMBER = r"(?:\d+(?:\.\d+)?|\.\d+)"
_SCALE = re.compile(rf"({_NUMBER})\s*({'|'.join(_SCALES)})\b", re.I)
_PERCENT = re.compile(rf"({_NUMBER})\s*(?:\\?%|\bper\s?cent\b)", re.I)
_PER_MILLE = re.compile(rf"({_NUMBER})\s*(‰|‱)")
_POWER_WORD = re.compile(rf"({_NUMBER})\s+(squared|cubed)\b", re.I)
_EXPONENT_E = re.compile(r"(\d(?:\.\d+)?)[eE]([+-]?\d+)\b")
_SIGN_WORD = re.compile(r"^(?:minus|negative)\s+(?=[\d.])", re.I)
_PLUS_MINUS_WORD = re.compile(r"^plus\s+or\s+minus\s+(?=[\d.])", re.I)
_ASSIGNMENT = re.compile(r"^[A-Za-z]\s*(?:=|\\in(?![A-Za-z])|∈)\s*(?=\S)")
_GROUPED = re.compile(r"(?<![\d.])\d{1,3}(?:(?:,|\s)\d{3})+(?![\d.])")
_ALLOWED = re.compile(r"^[0-9+\-*/^(){}\[\].,\s]*$")
_EXPONENT = re.compile(r"\^(?:\{\s*-?\d{1,3}\s*\}|-?\d{1,3}(?!\d))")


# LaTeX's comma in braces (no space after it): a thousands separator before three digits
# ("1{,}000"), else a decimal comma ("3{,}5" is 3.5).
_BRACED_COMMA = re.compile(r"(?<=\d)\{,\}(?=(\d{3}(?!\d))?)")
# A decimal whose last digit repeats before an ellipsis is that repeating decimal: "0.333..." is
# 1/3, "0.1666…" is 1/6 (two dots: the full stop a sentence cut took). One digit at least twice;
# "0.3..." or "3.14159..." only say "about", and so does "0.99..." (a policy's way to 1 without it).
_REPEATING = re.compile(r"(?<![\d.])(\d*)\.(\d*?)([0-8])\3+(?:\.{2,}|…|\\[lc]?dots)")


def _repeating_fraction(match: re.Match[str]) -> str:
    whole, prefix, digit = match[1] or "0", match[2], match[3]
    value = Fraction(int(whole)) + Fraction(int(prefix or "0"), 10 ** len(prefix))
    value += Fraction(int(digit), 9 * 10 ** len(prefix))
    return rf"\frac{{{value.numerator}}}{{{value.denominator}}}"


def repeating_digits(text: str) -> str | None:
    """``text`` with its repeating decimal's ellipsis dropped (``0.333...`` -> ``0.333``), or
    ``None`` when it holds no repeating decimal."""
    if not _REPEATING.search(text):
        return None
    return _REPEATING.sub(
        lambda m: m[0].rstrip(".…").removesuffix("\\ldots").removesuffix("\\cdots").removesuffix("\\dots"), text
    )


@functools.lru_cache(maxsize=65_536)
def as_latex(text: str | None, *, foreign_words: bool = False) -> str | None:
    """The value ``text`` states, as ``$...$`` LaTeX math-verify parses whole, or ``None``.

    Args:
        text: A final answer or a reference, as written.
        foreign_words: Also read a whole value written in words in one of text2num's other
            languages (for answers; a reference such as ``elf`` is more likely a word than 11).

    Returns:
        The value in LaTeX between ``$`` signs, or ``None`` when ``text`` is not a value alone
        (see the module docstring).
    """
    if text is None:
        return None
    # Before unwrapping, which drops a trailing full stop (and so an ellipsis).
    value = _unwrap(_REPEATING.sub(_repeating_fraction, _characters(text)))
    value = _BRACED_COMMA.sub(lambda m: "" if m[1] else ".", value)
    value = _EXPONENT_E.sub(r"\1\\times10^{\2}", value)
    if re.search(r"[A-Za-z]{2}", _SPACING.sub(" ", re.sub(r"\\[A-Za-z]+", " ", value))):
        value = _words(value, foreign_words)
        if value is None:
            return None
    value = _PER_MILLE.sub(lambda m: rf"\frac{{{m.group(1)}}}{{{1000 if m.group(2) == '‰' else 10000}}}", value)
    value = _PERCENT.sub(r"\\frac{\1}{100}", value)
    value = _scaled(value)
    value = _ASSIGNMENT.sub("", value)
    value = _GROUPED.sub(lambda m: re.sub(r"[,\s]", "", m.group(0)), _SPACING.sub(" ", value)).strip()
    return f"${value}$" if _is_plain_value(value) else None


# A value, a space, then one bracketed remark that ends it: "1/2 (0.5)", "42 (rounded)". Without
# the space it is a product or a call ("2(3+4)", "f(x)").
_REMARK = re.compile(r"^(?P<head>.*?\S)\s+(?:\((?P<remark>[^()]*)\)|\[(?P<square>[^\[\]]*)\])[\s.]*$", re.S)
# A head that ends in a relation or an operator is no value with a remark: the bracket is its
# other side ("x \in [1, 5]", "P = (1, 2)", "2 \times (3)").
_OPEN_HEAD = re.compile(r"(?:\\[A-Za-z]+|[=<>≤≥∈+\-−*/^:,×·÷])\s*$")


# A numeral with its base as a subscript: "101010₂", "101010_2", "2A_{16}".
_BASE_NUMERAL = re.compile(
    r"^\s*(?:\$\s*)?((?=[0-9A-Za-z]{0,64}\d)[0-9A-Za-z]{1,64})\s*(?:_\{?\s*(\d{1,2})\s*\}?|([\u2080-\u2089]{1,2}))"
    r"\s*(?:\$\s*)?$"
)


def is_invalid_numeral(text: str | None) -> bool:
    """Whether ``text`` is a numeral in a base its digits do not exist in (``4₂``, ``41₁``,
    ``19_8``): no value at all, though a reader folding the subscript takes it for ``42``. A
    valid one (``101010₂``) is a value in another notation, which the verifier leaves to the judge."""
    match = _BASE_NUMERAL.match(text or "")
    if match is None:
        return False
    base = int(match[2] or "".join(str(unicodedata.digit(c)) for c in match[3]))
    if base <= 10 and not match[1].isdigit():
        return False  # "2a_1", "3x_2": a letter with an index, no numeral
    if not 2 <= base <= 36:
        return True
    try:
        int(match[1], base)
    except ValueError:
        return True
    return False


_PERCENT_ALONE = re.compile(rf"([-+]?\s*{_NUMBER})\s*(?:\\?%|per\s?cent)", re.I)


def percent_number(text: str | None) -> str | None:
    """The number of a value that is one percent alone (``20%``, ``\\boxed{20\\%}``, ``$50\\%$``,
    ``20 percent``), as written without its percent sign (``20``); else ``None``."""
    if text is None or len(text) > MAX_CHARS:
        return None
    match = _PERCENT_ALONE.fullmatch(_unwrap(_characters(text)))
    return match[1].replace(" ", "") if match else None


def split_remark(text: str | None) -> tuple[str, str] | None:
    """``(value, remark)`` for a value followed by one bracketed remark (``1/2 (0.5)``, ``42 [6 x 7]``), else
    ``None``. math-verify would read the two side by side as a product."""
    match = _REMARK.match(text or "")
    if match is None or _OPEN_HEAD.search(match["head"]):
        return None
    return match["head"], match["remark"] if match["remark"] is not None else match["square"]


def _characters(text: str) -> str:
    """Every character as a reader takes it (see the module docstring), outer space stripped."""
    out: list[str] = []
    superscript: list[str] = []
    for at, char in enumerate(text):
        if char in _SUPERSCRIPTS:
            superscript.append(_SUPERSCRIPTS[char])
            continue
        if superscript:
            lone_sign = superscript in (["-"], ["+"]) and not out and (char.isdigit() or char == ".")
            out.append(superscript[0] if lone_sign else "^{" + "".join(superscript) + "}")  # ⁻42 is -42
            superscript = []
        if is_invisible(char):
            continue
        if char.isascii():
            out.append(char)
        elif unicodedata.category(char) == "Nd":
            out.append(str(unicodedata.decimal(char)))
        elif unicodedata.category(char) == "Zs":
            out.append(" ")
        elif char in _SYMBOLS:
            out.append(_SYMBOLS[char])
        elif char in _MINUS_BEFORE_DIGIT and _digit_follows(text, at + 1):
            out.append("-")  # a hyphen or a minus look-alike right before a digit (‐42, ➖42)
        elif char in _SUBSCRIPT_DIGITS:
            out.append("_{" + str(unicodedata.digit(char)) + "}")  # an index or a base, never a value
        elif unicodedata.category(char) == "No" and float(unicodedata.numeric(char, 0.5)).is_integer():
            out.append(str(int(unicodedata.numeric(char))))  # enclosed or circled digits: ④② is 42
        elif unicodedata.category(char) == "No" and unicodedata.numeric(char, None) is not None:
            out.append(_vulgar(char, bool(out) and out[-1][-1:].isdigit()))
        elif "\uff01" <= char <= "\uff5e":  # fullwidth ASCII
            out.append(unicodedata.normalize("NFKC", char))
        else:
            out.append(char)
    if superscript:
        out.append("^{" + "".join(superscript) + "}")
    return "".join(out).strip()


def _digit_follows(text: str, at: int) -> bool:
    """Whether the first visible character from ``at`` on is a digit."""
    for char in text[at:]:
        if not is_invisible(char):
            return char.isdigit()
    return False


def _vulgar(char: str, after_digit: bool) -> str:
    """A vulgar fraction (``½``) in LaTeX; after a digit it adds to it (``3½`` is 3.5)."""
    fraction = Fraction(unicodedata.numeric(char)).limit_denominator(1000)
    latex = rf"\frac{{{fraction.numerator}}}{{{fraction.denominator}}}"
    return "+" + latex if after_digit else latex


def _unwrap(value: str) -> str:
    """``value`` without math delimiters, a box around all of it and final punctuation."""
    while True:
        stripped = value.strip().rstrip(".;,").strip()  # never "!" (a factorial) or "?" (a doubt)
        for wrapper in _WRAPPERS:
            match = wrapper.match(stripped)
            if match:
                stripped = match.group(1)
        if stripped == value:
            return value
        value = stripped


def _words(value: str, foreign_words: bool) -> str | None:
    """``value`` with its number, scale, sign and percent words read, or ``None`` when other
    words remain."""
    if "\\" in value:  # LaTeX with words in it (\text{...}, \mathrm{cm}): not a value alone
        return None
    if foreign_words:
        whole = _foreign_number(value)
        if whole is not None:
            return whole
    # Scale words after digits first: alpha2digit would read "42 thousand" as "42 1000".
    value = _POWER_WORD.sub(lambda m: f"{m.group(1)}^{{{2 if m.group(2).lower() == 'squared' else 3}}}", value)
    read = alpha2digit(_scaled(value), "en", threshold=0).strip()
    read = _PLUS_MINUS_WORD.sub(r"\\pm ", _SIGN_WORD.sub("-", read))
    rest = re.sub(r"\\[A-Za-z]+", " ", _PERCENT.sub(" ", read))
    return None if re.search(r"[A-Za-z]{2}", rest) else read


def _scaled(value: str) -> str:
    """``value`` with each number followed by a scale word multiplied out (``42\\times10^{3}``)."""
    return _SCALE.sub(lambda m: rf"{m.group(1)}\times10^{{{_SCALES[m.group(2).lower()]}}}", value)


def _foreign_number(value: str) -> str | None:
    """A whole value in number words of one of :data:`FOREIGN_LANGUAGES`, as digits."""
    for language in FOREIGN_LANGUAGES:
        try:
            return str(text2num(value.strip(), language))
        except ValueError:
            continue
    return None


def _is_plain_value(value: str) -> bool:
    """Whether ``value`` is short, arithmetic only, and nothing math-verify could read in part."""
    if not value or len(value) > MAX_CHARS or not re.search(r"\d|\\pi|\\infty", value):
        return False
    bare = re.sub(r"\\(?:" + "|".join(_COMMANDS) + r")(?![A-Za-z])|\\[{}]", " ", value)
    if not _ALLOWED.match(bare) or re.search(r"\d\s+\d", value):
        return False
    # At most two exponents, each a plain integer of up to three digits (no towers).
    carets = value.count("^")
    return carets <= 2 and len(_EXPONENT.findall(value)) == carets
