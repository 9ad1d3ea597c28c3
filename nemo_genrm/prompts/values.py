"""How many distinct values an answer states, compared as values rather than as strings.

Extraction (:mod:`nemo_genrm.prompts.extraction`) must tell an answer that commits to one value
from one that offers several (a hedge). It compares the values the answer states, not their
spelling: ``42``, ``42.0``, ``84/2``, ``6 \\times 7`` and ``x = 42`` are one value, and so are
``\\frac{1}{2}`` and ``0.5``; ``-42``, ``42\\%`` and ``0.42`` are other values than ``42``.

A stated value is read in three steps (:func:`value_keys`):

1. its wrappers go (math delimiters, ``\\text{}``, emphasis, quotes, a closing full stop, one
   pair of brackets around the whole);
2. it is split where it offers alternatives: ``or`` (in the languages of the verdict vocabulary's
   first ten), ``and/or``, ``;``, ``\\lor``, ``∨``, ``±``, a LaTeX line break (``\\\\``, the rows
   of ``cases``); ``maybe``, ``perhaps``, ``else``, ``vs``, ``or`` in further languages (``o``,
   ``ili``, ...), ``&``, ``\\cup`` and their kin when values follow them (``41, but maybe 42``;
   ``42 (possibly rounded)`` and ``42 or so`` are one value); and between values a comma,
   ``and``, ``?``, ``|`` or ``~`` (``41~42``); when the reference is a whole number, a slash
   between whole numbers that does not make one (``41/42``; ``84/2`` is 42). A label of words
   before the values goes first (``Possible answers: 40, 41, 42``), and so does ``x \\in`` before
   a set (``x \\in \\{41, 42\\}`` offers both). A struck-out value (``~~41~~``, ``<s>41</s>``) is
   withdrawn;
3. each piece becomes a key: the last side of an equation, a number (exact, as a
   :class:`~fractions.Fraction`, arithmetic of numbers evaluated), a percentage, or the piece's
   normalised text; plain numbers set equal that differ (``41 = 42``, ``41 \\approx 42`` past
   rounding) offer each, and so do numbers side by side (``41 42``; ``1 000 042`` is one), the
   bounds of an inequality (``41 < x \\le 42``) and a value with another in brackets after it
   (``42 (41)``; ``1/2 (0.5)`` and ``0.333 (1/3)`` restate one). A
   piece of prose counts as its one number, as both ends of a range when those are its only two
   (``between 41 and 42``, ``from 41 to 42``), and as nothing when it holds several (working,
   not an alternative); a piece that negates (``not 41``) offers nothing.

The reference is read the same way (:func:`reference_count`): an answer may state as many values
as the reference holds (roots ``3 or 4``, ``x = 3, y = 4``) and no more.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
import re
import unicodedata
from collections.abc import Iterator
from fractions import Fraction

from nemo_genrm.guard.folding import fold, is_invisible

__all__ = [
    "POLAR",
    "Key",
    "distinct_values",
    "is_value_list",
    "is_prose",
    "is_whole_number",
    "ratio_key",
    "reference_count",
    "same_value",
    "value_keys",
    "values_text",
    "without_ruled_out",
]

Key = tuple[str, object]
"""A value as compared: ``("n", Fraction)``, ``("%", Fraction)`` or ``("t", normalised text)``."""

# ------------------------------------------------------------------------------------- cleaning
_TEXT_COMMANDS = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mathit|operatorname|mbox|emph)\s*\{([^{}]*)\}")
_BOX = re.compile(r"\\(?:boxed|fbox|framebox)\s*\{")
_CASES = re.compile(r"\\begin\s*\{cases\}(.*?)\\end\s*\{cases\}", re.S)
_STRUCK = re.compile(r"~~[^~\n]+~~|<(s|del|strike)>[^<\n]*</\1>", re.IGNORECASE)
# "~" is LaTeX's unbreakable space, except between two numbers: "41~42" is a range, two values
# ("42~000" groups thousands).
_SPACING = re.compile(
    r"(?<!\\)\\[,;:! ]|\\q?quad\b|\\(?:hfill|enspace|thinspace|medspace|thickspace)\b|\\hspace\*?\s*\{[^{}]*\}"
    r"|(?<!\d)~|~(?!\d)|~(?=\d{3}(?!\d))|\\left\b|\\right\b|\\displaystyle\b"
)
_DELIMITERS = re.compile(r"\$+|\\[()\[\]]")
_EMPHASIS = re.compile(r"\*\*|__|`+")
_QUOTES = "\"'“”„«»「」『』"
_TRAILING = ".,;:。、"  # never "!": "5!" is a factorial
_PAIRS = {"(": ")", "[": "]", "{": "}"}
_VALUE_CHARS = 400


def _unbox(text: str) -> str:
    """``\\boxed{x}`` and its friends replaced by ``x`` (nested braces balanced)."""
    while True:
        match = _BOX.search(text)
        if match is None:
            return text
        depth, end = 1, len(text)
        for i in range(match.end(), len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                end = i
                break
        text = text[: match.start()] + " " + text[match.end() : end] + " " + text[end + 1 :]  # 41\boxed{42}: two


# "x \in S" states the set S: "x \in \{41, 42\}" offers two values, "x \in [41, 42]" its bounds.
_MEMBERSHIP = re.compile(r"^[^\W\d_]\w{0,2}\s*(?:\\in\b|∈)\s*")


_ROW_BREAK = re.compile(r"\\\\(?:\[[^\]]*\])?")


def _rows(text: str) -> str:
    """LaTeX line breaks (``\\\\``) as row separators (``;``) where they separate values: outside
    any environment, and between the rows of ``cases``; inside an ``aligned`` or a matrix they
    are working or one value, and stay."""
    # Rows with conditions are one piecewise value; rows of bare values are a list of them.
    text = _CASES.sub(lambda m: m[0] if "&" in m[1] else ";".join(_ROW_BREAK.split(m[1])), text)
    return text if "\\begin" in text else _ROW_BREAK.sub(";", text)


_BLANKS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u2061\u2062\u2063\u2064")


_OTHER_DIGIT = re.compile(r"(?![0-9])\d")  # a decimal digit of another script


def _clean(text: str) -> str:
    """A stated value without its wrappers (see the module docstring, step 1)."""
    # An invisible character is nothing ("o\u200br" is "or"); a filler that renders blank, or an
    # invisible operator, stands between what it separates ("41\u3164or\u316442").
    text = "".join(" " if char in _BLANKS else char for char in text if char in _BLANKS or not is_invisible(char))
    text = _OTHER_DIGIT.sub(lambda m: str(unicodedata.decimal(m[0])), text)  # "٤١", "４１" are 41
    text = _rows(_unbox(text)).replace("\\$", " ")  # "\\$18" is 18
    for _ in range(3):  # nested \text{\textbf{x}}
        text = _TEXT_COMMANDS.sub(r" \1 ", text)
    text = _STRUCK.sub(" ", text)  # "~~41~~ 42": a struck-out value is withdrawn
    text = _SPACING.sub(" ", text)
    text = _DELIMITERS.sub(" ", text)
    text = _EMPHASIS.sub("", text)
    text = text.replace("\\%", "%").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = text.strip().strip(_QUOTES).strip().rstrip(_TRAILING).strip()
    return _unwrap(_MEMBERSHIP.sub("", text))


def _unwrap(text: str) -> str:
    """``(3, 4)`` -> ``3, 4``: one pair of brackets around the whole value goes."""
    if len(text) >= 2 and text[0] in _PAIRS and _closing(text, 0) == len(text) - 1:
        return text[1:-1].strip()
    if text.startswith("\\{") and text.endswith("\\}"):
        return text[2:-2].strip()
    return text


def _closing(text: str, start: int) -> int | None:
    """Offset of the bracket closing the one at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] in _PAIRS:
            depth += 1
        elif text[i] in _PAIRS.values():
            depth -= 1
            if depth == 0:
                return i
    return None


# ------------------------------------------------------------------------------------ splitting
# "or" in the first languages of the verdict vocabulary (guard.vocabulary), as a whole word.
_OR_WORDS = (
    "or",
    "oder",
    "ou",
    "oppure",
    "ovvero",
    "lub",
    "albo",
    "или",
    "або",
    "veya",
    "yoksa",
    "hoặc",
    "atau",
    "eller",
    "tai",
    "vagy",
    "sau",
    "nebo",
    "alebo",
    "ή",
    "או",
    "یا",
    "أو",
    "या",
)
# Words that offer another value only when one follows (as "maybe" does): "42 o 41" (Spanish,
# Italian), "42 ili 41", "42, else 41", "42 vs 41"; "42 o más" and "nothing else matters" offer
# nothing.
_OFFER_WORDS = (
    "maybe",
    "perhaps",
    "possibly",
    "alternatively",
    "otherwise",
    "else",
    "vs\\.?",
    "versus",
    "alt\\.?",
    "resp\\.?",
    "bzw\\.?",
)
# "or" in further languages, read only between two numbers ("42 o 41", "42 ili 41"): elsewhere
# these are ordinary words ("18 euro o 18,00 €", "42 o más"). So is "&" ("42 & 41"; spaced or
# not, so a matrix row reads alike in an answer and its reference).
_NUMBER_OR_WORDS = (
    "o",
    "ó",
    "o\\s+bien",
    "ili",
    "либо",
    "чи",
    "arba",
    "vai",
    "eða",
    "hay",
    "au",
    "ya",
    "nor",
    # and further languages' "or" ("42 ya da 41", "42 หรือ 41", "42 या 41"), and "respectively"
    # or "alternatively" abbreviated ("42 resp. 41", "42 bzw. 41")
    "ya\\s+da",
    "yoki",
    "หรือ",
    "अथवा",
    "অথবা",
    "বা",
    "ወይም",
    "ossia",
    "vel",
    "あるいは",
    "もしくは",
    "resp\\.?",
    "bzw\\.?",
    "\\\\cup",
    "∪",
    "\\\\mid",
)
# "&" between two numbers outside an environment (in a matrix or aligned rows it is alignment).
_NUMBER_AMPERSAND = re.compile(r"(?<=\d)\s*\\?&\s*(?=[-−]?\d)")
_AND_WORDS = ("and", "und", "et", "и", "і", "ve", "và", "og", "och", "és", "și", "oraz")
_OR = re.compile(
    rf"(?:\s+|(?<=[(\[]))(?:and/or|{'|'.join(_OR_WORDS)})\s+|或者|或|还是|還是|または|もしくは|또는|혹은|\\(?:lor|vee)\b|∨|"
    r"\\text\s*\{\s*or\s*\}|[;；\n]|\\(?:newline|cr)\b|"
    rf"(?<=\d)\s+(?:{'|'.join(_NUMBER_OR_WORDS)})\s+(?=[-−]?\d)",
    re.IGNORECASE,
)
# Between values only: "41? 42?", "41 | 42", "3, 4", "3 and 4" (a question or a table of prose is no offer).
_LIST = re.compile(rf"\s+(?:{'|'.join(_AND_WORDS)})\s+|和|与|與|および|그리고|[,，、?？|~]", re.IGNORECASE)
# "maybe" and its kin offer what follows them when that is a value ("41, but maybe 42"), and
# only then: "42 (possibly rounded)" is a remark, not an offer.
_MAYBE = re.compile(rf"(?:\s+|(?<=[(\[]))(?:{'|'.join(_OFFER_WORDS)})(?![\w])\s*", re.IGNORECASE)
# A range between exactly two numbers offers both ends: "between 41 and 42", "from 41 to 42".
_RANGE = re.compile(r"\b(?:between\s+(\S+)\s+and|from\s+(\S+)\s+to)\s+(\S+)", re.IGNORECASE)
# So does a bare range: "41 to 42", "41–42", "41--42" (a dash of Unicode's or LaTeX's, a wave
# dash; a lone hyphen may be a minus sign).
_DASH = r"[\u2010-\u2015\u2053\u301c\uff5e…]|-{2,3}|\.{2,3}|\\text(?:en|em)dash\b\s*"
_RANGE_UNIT = r"(?:\s*%|\s*[^\W\d_]{1,12}\.?)?"  # "41 to 42 cm", "41 cm to 42 cm", "41–42%"
_BARE_RANGE = re.compile(
    rf"\s*([-−]?\d+(?:\.\d+)?){_RANGE_UNIT}\s*(?:{_DASH}|\b(?:to|through|thru|until|till|up\s+to)(?=\s*[-−]?\d))"
    rf"\s*([-−]?\d+(?:\.\d+)?){_RANGE_UNIT}\s*",
    re.IGNORECASE,
)
# A label before the value ("Possible answers: 40, 41, 42"): words, no digits, then a colon.
# Words of two letters or more, so "x: 3, y: 4" keeps its names.
_LABEL = re.compile(r"^[^\W\d_]{2}[^\W\d_'’-]*(?:[ \t]+[^\W\d_][^\W\d_'’-]*){0,4}[ \t]*[:：][ \t]+(?=\S)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_PLUS_MINUS = re.compile(r"±|∓|\\pm(?![A-Za-z])|\\mp(?![A-Za-z])|\+/-|\+-")


_CLOSING = {"{": "}", "(": ")", "[": "]"}


@functools.cache
def _bracket_pattern(brackets: str) -> re.Pattern[str]:
    return re.compile("[" + re.escape(brackets + "".join(_CLOSING[b] for b in brackets)) + "]")


def _brace_depth(text: str, brackets: str = "{") -> list[int]:
    """The bracket depth at every offset, counting the opening brackets in ``brackets``.

    An opening bracket sits at the depth it opens, a closing one at the depth it closes; a
    closing bracket with none open stays at 0. Runs between brackets are filled at C speed:
    a response of a megabyte is read in milliseconds, not seconds.
    """
    depth, out, last = 0, [], 0
    for match in _bracket_pattern(brackets).finditer(text):
        at = match.start()
        out.extend([depth] * (at - last))
        if text[at] in brackets:
            depth += 1
            out.append(depth)
        else:
            out.append(depth)
            depth = max(0, depth - 1)
        last = at + 1
    out.extend([depth] * (len(text) - last))
    return out


def _cut(text: str, pattern: re.Pattern[str], depth: list[int]) -> list[str]:
    """``text`` cut at the matches of ``pattern`` that sit at depth 0."""
    pieces, start = [], 0
    for match in pattern.finditer(text):
        if depth[match.start()] == 0 and match.start() >= start:
            pieces.append(text[start : match.start()])
            start = match.end()
    pieces.append(text[start:])
    return [p.strip() for p in pieces if p.strip()]


# The two answers of a yes/no question, in the languages of the verdict vocabulary's first few:
# "yes or no", "yes/no", "yes and no" offer both (a lone "no" is an answer, not a negation).
POLAR = re.compile(
    r"\W*(?:yes|no|true|false|oui|non|s[ií]|ja|nein|да|нет|sim|n[ãa]o|tak|nie|evet|hay[ıi]r|是|否|对|不对|"
    r"はい|いいえ|예|아니요)\W*",
    re.IGNORECASE,
)
_ABOUT = re.compile(r"\s*[(\[]?\s*\bor\s+(?:so|thereabouts)\s*[)\]]?\s*$", re.IGNORECASE)


def _offers(text: str) -> list[str]:
    """``text`` cut at ``or`` and its kin, then at ``maybe`` and its kin where values follow."""
    out = []
    text = _ABOUT.sub("", text)  # "42 or so" is about 42, no second offer
    pieces = _cut(text, _OR, _brace_depth(text))
    if len(pieces) == 1 and not text.isascii():  # "42 оr 41" in look-alike letters reads "42 or 41"
        folded = fold(text).text
        pieces = _cut(folded, _OR, _brace_depth(folded)) if _OR.search(folded) else pieces
    if "\\begin" not in text:
        pieces = [p for piece in pieces for p in _cut(piece, _NUMBER_AMPERSAND, _brace_depth(piece))]
    for piece in pieces:
        maybes = _cut(piece, _MAYBE, _brace_depth(piece))
        values_follow = len(maybes) > 1 and not any(is_prose(p.strip("()[] ")) for p in maybes[1:])
        out += maybes if values_follow else [piece]
    return out


def _wordy(item: str) -> bool:
    """Whether a list item is prose: words that are no yes/no answer (``yes, no``) nor a value
    in number words (``42, i.e. forty-one``)."""
    rest = _RESTATING.sub("", item.strip())
    return is_prose(rest) and not POLAR.fullmatch(rest) and not is_number_phrase(rest)


def _split(text: str) -> list[str]:
    """``text`` cut where it offers alternatives (see the module docstring, step 2).

    ``or`` and its kin cut anywhere outside braces (``42 (or 41)`` offers two); a comma or an
    ``and`` cuts only outside brackets and only a list of values: ``x = 3, y = 4`` is two,
    ``42, as 6 x 7 = 42`` one piece of prose (:func:`_piece_keys` reads its one value).
    """
    out = []
    for piece in _offers(text):
        masked = _THOUSANDS.sub("\x00", piece)
        items = _cut(masked, _LIST, _brace_depth(masked, "{(["))
        if len(items) > 1 and not any(_wordy(item) for item in items):
            out += [item.replace("\x00", ",") for item in items]
        else:
            out.append(piece)
    return out


# ------------------------------------------------------------------------------------- numbers
_NUMBER = re.compile(r"(?<![\w.])[-−]?\d+(?:,\d{3})*(?:\.\d+)?(?!\w)|(?<![\w.])[-−]?\.\d+(?!\w)")
_FRAC = re.compile(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}|\\frac\s*(\d)\s*(\d)")
_ARITHMETIC = re.compile(r"[\d\s+\-*/().^]+")
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_NEGATION = re.compile(
    r"^(?:(?:but|and|so)\s+)?(?:not|never|no(?!\.\s*\d)|isn'?t|is\s+not|rather\s+than|instead\s+of|nicht|kein|pas|non|"
    r"не|нет|不是|不|ではない)\b|^(?:≠|\\neq?\b|!=)",
    re.IGNORECASE,
)
# Words of a math expression that are not prose: functions, constants, units of angle.
_MATH_WORDS = frozenset(
    "sin cos tan cot sec csc log ln exp sqrt lim max min gcd lcm mod pi inf infty deg arcsin arccos arctan "
    "sinh cosh tanh frac cdot times div pm mp le ge leq geq neq approx to in cup cap emptyset varnothing".split()
)
_WORD = re.compile(r"[^\W\d_]{2,}")
# Words a value may be written in: English number, scale, sign and percent words ("forty-two",
# "42 thousand", "minus 42", "42 percent"). A line of them states a value, not prose.
_NUMBER_PHRASE_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred "
    "thousand million billion trillion minus negative plus percent point and or".split()
)


_FACTORIAL = re.compile(r"(?<![\d.])(\d{1,2})!(?!=)")


def _fraction(text: str) -> Fraction | None:
    """``text`` as an exact number: an integer, a decimal, ``a/b``, ``\\frac{a}{b}`` or arithmetic."""
    text = text.replace("−", "-").replace("\\times", "*").replace("×", "*").replace("\\cdot", "*").replace("·", "*")
    text = _FRAC.sub(lambda m: f"(({m[1] or m[3]})/({m[2] or m[4]}))", text)
    text = _FACTORIAL.sub(lambda m: str(math.factorial(int(m[1]))), text)  # "5!" is 120
    text = _THOUSANDS.sub("", text).replace("{", "(").replace("}", ")").strip()
    if not text or not _ARITHMETIC.fullmatch(text) or not re.search(r"\d", text):
        return None
    try:
        return _evaluate(ast.parse(text.replace("^", "**"), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None


def _evaluate(node: ast.AST) -> Fraction:
    """Exact value of a parsed arithmetic expression (numbers, + - * /, small whole powers)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        base, power = _evaluate(node.left), _evaluate(node.right)
        if power.denominator != 1 or abs(power) > 64:
            raise ValueError("not a small whole power")
        return base ** int(power)
    raise ValueError("not arithmetic")


def is_prose(text: str) -> bool:
    """Whether ``text`` holds a word (two letters or more) that is neither a command nor math."""
    for match in _WORD.finditer(text):
        before = text[match.start() - 1] if match.start() else ""
        if before != "\\" and match[0].casefold() not in _MATH_WORDS:
            return True
    return False


def is_number_phrase(text: str) -> bool:
    """Whether ``text`` is a value written with English number words, alone or beside digits:
    every word in it is a number, scale, sign or percent word (``forty-two``, ``42 thousand``,
    ``minus 42``), so it states a value that a value verifier reads, where :func:`is_prose` sees words.
    """
    words = [match[0].casefold() for match in _WORD.finditer(text)]
    return bool(words) and all(word in _NUMBER_PHRASE_WORDS for word in words)


def _spelled_number(text: str) -> Fraction | None:
    """A whole number written in English words (``forty-two``, ``minus three``), or ``None``."""
    from text_to_num import text2num

    sign = re.match(r"\s*(?:minus|negative)\s+", text, re.IGNORECASE)
    words = text[sign.end() if sign else 0 :].strip().rstrip(".").strip()
    try:
        value = text2num(words, "en")
    except ValueError:
        return None
    return Fraction(-value if sign else value)


def states_a_value(line: str) -> bool:
    """Whether a bare line states a value: no prose, or a value in number words."""
    return not is_prose(line) or is_number_phrase(line)


# Equations, arrows and approximations at depth 0. "=" says the sides are equal; an arrow or
# "rounded up/down to" that they agree to within one unit of the later side's last digit
# (41.67 -> 42, 41.2 rounded up to 42); "\approx" and "rounds to" to within half of it
# (41.6 \approx 42, 12,345 \approx 12,000).
# Each of the three in its common notations: LaTeX, Unicode and ASCII ("41 == 42", "x := 41",
# "41 \\implies 42", "41 ==> 42", "41 \\sim 42" set their sides in relation as "=", "→", "≈" do).
# Congruence (≡) is not among them: "100 \\equiv 2" (mod 7) is one answer.
_RELATION = re.compile(
    r"(?P<exact>:=|=:|≔|≕|(?<![<>!=:])={1,2}(?![=>:])|＝|\\(?:coloneqq|eqqcolon)\b)"
    r"|(?P<implies>[⟹⇔⟺⟾]|\\(?:implies|iff|Longrightarrow|Leftrightarrow|Longleftrightarrow|leadsto)\b)"
    r"|(?P<unit>[→⟶⇒⇨➔➙➜↦⟼]|=+>|-+>|\\xrightarrow\s*\{[^{}]*\}"
    r"|\\(?:to|Rightarrow|rightarrow|longrightarrow|mapsto|longmapsto)\b"
    r"|\b(?:rounded|rounding|rounds?)\s+(?:up|down)\s+to\b)"
    r"|(?P<half>[≈∼≃≅≒]|\\(?:approx|sim|simeq|cong|doteq|thickapprox)\b|\b(?:rounds?|rounded|rounding)\s+to\b)",
    re.IGNORECASE,
)
# "41 (= 42)", "42 (= 6 \times 7)": a number, then a bracket that sets it equal to something.
_BRACKETED_RELATION = re.compile(r"([-−]?\d+(?:\.\d+)?)\s*\(\s*(=|≈|\\approx\b|→|\\to\b)([^()]*)\)")
_LEADING_WORDS = re.compile(r"^(?:[^\W\d_]{2,}[ \t]+)+(?=[-−]?\d)")  # "final 42" after an arrow
_RELATIVE = re.compile(r"[,\s]*\b(?:which|that|it)\s*$", re.IGNORECASE)  # "41, which" rounds to 42


def _last_side(text: str) -> str:
    """The last side of an equation or an arrow at depth 0 (``x = 3`` -> ``3``); an implication
    joins statements, not values (``x = 41 \\implies 42`` ends in ``41 \\implies 42``)."""
    depth = _brace_depth(text, "{([")
    cut = 0
    for match in _RELATION.finditer(text):
        if depth[match.start()] == 0 and not match["implies"]:
            cut = match.end()
    return text[cut:].strip() if cut else text


def _last_digit_unit(number: str) -> Fraction:
    """The value of the last significant digit of a number as written (``3.14`` -> 1/100,
    ``42`` -> 1, ``12,000`` -> 1000)."""
    digits = number.replace(",", "").lstrip("-−")
    if "." in digits:
        return Fraction(1, 10 ** len(digits.split(".", 1)[1]))
    zeros = len(digits) - len(digits.rstrip("0"))
    return Fraction(10 ** min(zeros, len(digits) - 1))


# A unit after a plain number: a word, "%" or a degree sign; one letter only after a space, since
# "2x" is a term ("41 m = 42 m" sets 41 = 42, "2x = 4x" is an equation in x).
_UNIT_AFTER = re.compile(
    r"(?P<number>[-−]?\d[\d,]*(?:\.\d+)?)(?P<unit>\s+[^\W\d_]{1,12}\.?|\s*[^\W\d_]{2,12}\.?|\s*%|\s*°[CF]?)"
)


_NUMBER_OR_MEASURE = re.compile(rf"(?:{_UNIT_AFTER.pattern})|[-−]?\d[\d,]*(?:\.\d+)?")


def _without_shared_unit(sides: list[str]) -> list[str]:
    """The sides without their unit when every side ends in the same one, letter case included
    (``41 cm``, ``42 cm`` -> ``41``, ``42``); else as they are: sides in different units may be
    a conversion (``4.2 cm = 42 mm``, ``1 GB = 8 Gb``)."""
    units = [_UNIT_AFTER.fullmatch(side) for side in sides]
    if not all(units) or len({u["unit"].strip() for u in units}) != 1:  # type: ignore[index]
        return sides
    return [u["number"] for u in units]  # type: ignore[index]


def _decimals(number: str) -> int:
    """How many digits a number has after its decimal point."""
    return len(number.split(".", 1)[1]) if "." in number else 0


def _as_digits(side: str) -> str:
    """A side written in English number words as digits (``forty-one`` -> ``41``); else as it is."""
    if not re.search(r"\d", side) and is_number_phrase(side) and (spelled := _spelled_number(side)) is not None:
        return str(spelled)
    return side


def _disagreeing_sides(text: str) -> list[Fraction]:
    """The numbers on the sides of a relation that say different values (``41 = 42``,
    ``41 \\to 42``, ``41 \\approx 42``, ``41 which rounds to 42``), each once; empty when the
    sides agree (``42 = 42.0``, ``41.6 \\approx 42``, ``41.67 \\to 42``) or are not all plain
    numbers (``x = 42``, ``6 \\times 7 = 41``: working that ends in a value; ``41 cm = 42``).
    Numbers set equal that differ offer both: a hedge."""
    depth = _brace_depth(text, "{([")
    cuts = [m for m in _RELATION.finditer(text) if depth[m.start()] == 0]
    if not cuts:
        return []
    bounds = [0, *(b for m in cuts for b in (m.start(), m.end())), len(text)]
    sides = [_RELATIVE.sub("", text[bounds[i] : bounds[i + 1]]).strip(" ()[],.") for i in range(0, len(bounds), 2)]
    sides[-1] = _LEADING_WORDS.sub("", sides[-1])  # "41 → final 42"; "Month 12 = 4,200" keeps its label
    sides = [_as_digits(side) for side in sides]  # "42 = forty-one" sets two numbers equal
    if all(match["exact"] for match in cuts):  # an arrow may be a change: "3 apples → 5 apples"
        # An equation's plain numbers are its values whatever stands between them: "x = 41 =
        # 42", "f(x) = 41 = 42", "41 = 6 \\times 7 = 42" set 41 = 42 ("n = 6 ⇒ 42" derives).
        sides = _without_shared_unit([side for side in sides if _NUMBER_OR_MEASURE.fullmatch(side)])
        cuts = cuts[: len(sides) - 1]  # all exact: which one sits between two kept sides is moot
        if len(sides) < 2:
            return []
    if not all(_NUMBER.fullmatch(side) for side in sides):
        return []  # "6 + 1 = 8" is working that ends in 8, not a second offer
    values = [_fraction(side.replace(",", "")) for side in sides]
    if any(v is None for v in values):
        return []
    for i, match in enumerate(cuts):
        before, after = values[i], values[i + 1]
        unit = _last_digit_unit(sides[i + 1])
        close = abs(before - after) < unit if match["unit"] or match["implies"] else abs(before - after) <= unit / 2  # type: ignore[operator]
        # "=" rounds only to fewer decimals ("x = 1.4142 = 1.41"); "41 = 40" sets two values equal.
        rounded = not match["exact"] or _decimals(sides[i]) > _decimals(sides[i + 1])
        if rounded and close:
            values[i] = after  # an approximation to the later side's precision: one value
    distinct = list(dict.fromkeys(values))
    return distinct if len(distinct) > 1 else []  # type: ignore[return-value]


# Numbers side by side with nothing between them but spaces are a list ("41 42"), unless they
# group thousands ("1 000 000", "42 \, 000").
_SPACED_NUMBERS = re.compile(r"[-−]?\d+(?:\.\d+)?(?:[ \t]+\d+(?:\.\d+)?)+")
_SPACED_THOUSANDS = re.compile(r"[-−]?\d{1,3}(?:[ \t]+\d{3})+(?:\.\d+)?")


def _each_number(numbers: list[str]) -> list[Key]:
    """The keys of plain numbers as written, each distinct one once."""
    found = [_fraction(n.replace(",", "")) for n in numbers]
    return [("n", n) for n in dict.fromkeys(found) if n is not None]


def _normalised(text: str) -> str:
    return re.sub(r"\s+", "", text).casefold()


# A value, a space, and a bracket that ends the piece: "1/2 (0.5)" restates the value, "42 (41)"
# offers another (no space: a product, "2(21)").
_TRAILING_BRACKET = re.compile(r"^(?P<head>.*?\S)\s+(?:\((?P<inner>[^()]*)\)|\[(?P<square>[^\[\]]*)\])$")
_ELLIPSIS = re.compile(r"\s*(?:\.{3}|…|\\[lc]?dots)\s*$")


def _restated_keys(piece: str, slash_alternatives: bool) -> list[Key]:
    """The numbers a value and the bracketed value after it state, each once; empty unless both
    are numbers (a remark in words is no value: ``42 (rounded)``)."""
    match = _TRAILING_BRACKET.match(piece)
    inner_text = match and (match["inner"] if match["inner"] is not None else match["square"])
    if not inner_text or "!" in inner_text or (is_prose(inner_text) and not is_number_phrase(inner_text)):
        return []  # words, or a factorial ("120 (5!)")
    head = _piece_keys(match["head"], slash_alternatives)  # type: ignore[index]
    inner = _piece_keys(_ELLIPSIS.sub("", inner_text), slash_alternatives)
    if not head or not inner or any(kind == "t" for kind, _ in head + inner):
        return []
    if len(head) == len(inner) == 1 and _restates(head[0], inner[0], match["head"], inner_text):  # type: ignore[index]
        return head
    return list(dict.fromkeys(head + inner))


def _restates(head: Key, inner: Key, head_text: str, inner_text: str) -> bool:
    """Whether a value and the bracketed one after it are one value (:func:`same_value`)."""
    return same_value(head, inner, head_text + " " + inner_text, loose=bool(_ELLIPSIS.search(inner_text)))


def same_value(a: Key, b: Key, written: str = "", *, loose: bool = False) -> bool:
    """Whether two keys state one value: equal, a percent and its fraction (``50%`` and ``0.5``)
    or its number (``25`` and ``25%``), or one rounded or cut to the last digit of a decimal in
    ``written`` (``0.333`` and ``1/3``); with ``loose`` (a trailing ellipsis, ``0.333...``) to
    within two units of it."""
    if {a[0], b[0]} & {"t"}:
        return a == b
    x, y = (v / 100 if kind == "%" else v for kind, v in (a, b))
    if x == y or a[1] == b[1]:  # 0.25 and 25%, or 25 and 25% written side by side
        return True
    units = [_last_digit_unit(n) for n in _NUMBER.findall(written) if "." in n]
    # To within the last written digit: rounded (0.667 for 2/3) or cut (0.666).
    return bool(units) and abs(x - y) < max(units) + (max(units) if loose else 0)  # type: ignore[operator]


# Words that restate what came before in another form ("1/2, i.e. 0.5", "2/3, that is about 0.667"):
# what follows them is a value of its own, the same one or another.
_RESTATING = re.compile(
    r"^(?:i\.\s?e\.?|that\s+is(?:\s+to\s+say)?|(?:or\s+)?equivalently|namely|in\s+other\s+words|"
    r"(?:or\s+)?(?:approximately|about|roughly))\s*[,:]?\s*(?=\S)",
    re.IGNORECASE,
)


def distinct_values(keys: set[Key] | frozenset[Key], limit: int | None = None) -> list[Key]:
    """``keys`` less those that restate another, each value once: equal values (``1/2`` and
    ``0.5``, ``1/4`` and ``25%``; ``25`` and ``25%`` are two), and an exact value
    with a decimal cut or rounded to its own last digit (``2/3`` and ``0.667`` or ``0.6``). Two
    decimals are two values (``0.1`` or ``0.19``, ``3.1`` or ``3.14``), and so is a decimal
    past its last digit (``1/2`` and ``0.6``). With ``limit``, stops once it has found more.
    """
    out: list[Key] = []
    for key in sorted(keys, key=lambda k: (k[0], str(k[1]))):
        if not any(_restated(key, kept) for kept in out):
            out.append(key)
            if limit is not None and len(out) > limit:
                break
    return out


def _restated(a: Key, b: Key) -> bool:
    """Whether two keys are one value (see :func:`distinct_values`)."""
    if "t" in (a[0], b[0]):
        return a == b
    x, y = (v / 100 if kind == "%" else v for kind, v in (a, b))
    if x == y:
        return True
    digits = [_decimal_places(v) for v in (x, y)]
    if (digits[0] is None) == (digits[1] is None) or not any(digits):
        return False  # two decimals, or two exact values: two values
    cut = Fraction(1, 10 ** next(d for d in digits if d))
    return abs(x - y) < cut


def _decimal_places(value: Fraction) -> int | None:
    """How many decimal places a value written as a decimal has (``0.667`` -> 3, ``42`` -> 0);
    ``None`` for a value no decimal writes exactly (``2/3``)."""
    denominator, places = value.denominator, 0
    while denominator != 1 and (denominator % 2 == 0 or denominator % 5 == 0):
        places += 1
        denominator = (value * 10**places).denominator
    return places if denominator == 1 else None


_SCALE_POWERS = {"hundred": 2, "thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_SCALED = re.compile(rf"(\d+(?:\.\d+)?)\s*({'|'.join(_SCALE_POWERS)})", re.IGNORECASE)


def _piece_keys(piece: str, slash_alternatives: bool, whole: bool = True) -> list[Key]:
    """The keys one piece offers (see the module docstring, step 3); ``whole``: the piece is the
    whole value (a short phrase of prose is then its value, else only a very short one)."""
    if _NEGATION.search(piece) and not POLAR.fullmatch(piece):  # "not 41" offers nothing; "no" is an answer
        return []
    piece = _RESTATING.sub("", piece.strip())  # "i.e. 0.5" restates, or offers, 0.5
    if polar := re.fullmatch(r"(.+?)(?:\s*/\s*|\s+\S{1,4}\s+)(.+)", piece):  # "yes/no", "sí o no"
        if POLAR.fullmatch(polar[1]) and POLAR.fullmatch(polar[2]):
            return [("t", _normalised(polar[1])), ("t", _normalised(polar[2]))]
    piece = _BRACKETED_RELATION.sub(r"\1 \2 \3", piece)  # "41 (= 42)" says 41 = 42
    if restated := _restated_keys(piece, slash_alternatives):  # "42 (41)" offers both; "1/2 (0.5)" one
        return restated
    if disagreeing := _disagreeing_sides(piece.rstrip(_TRAILING)):
        return [("n", value) for value in disagreeing]
    piece = _last_side(piece.strip("()[] ")).strip().rstrip(_TRAILING).strip()
    if not piece:
        return []
    if _PLUS_MINUS.search(piece):  # ±42 offers 42 and -42
        left, right = _PLUS_MINUS.split(piece, maxsplit=1)
        base = _fraction(left) if left.strip() else Fraction(0)
        offset = _fraction(right)
        if base is not None and offset is not None:
            return [("n", base + offset), ("n", base - offset)]
        # "1 \\pm \\sqrt{2}" holds two values too, whatever the offset.
        return [("t", _normalised(f"{left}+{right}")), ("t", _normalised(f"{left}-{right}"))]
    percent = re.fullmatch(r"(.*?)\s*(?:%|\bper\s?cent)", piece, re.IGNORECASE)  # "42%", "42 percent"
    if percent:
        number = _fraction(percent[1])
        if number is not None:
            return [("%", number)]
    if slash_alternatives:
        whole = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)(?:\s*/\s*\d+)*\s*", piece)
        numbers = [int(n) for n in re.findall(r"\d+", piece)] if whole else []
        if numbers and (len(numbers) > 2 or numbers[1] == 0 or numbers[0] % numbers[1]):
            return [("n", Fraction(n)) for n in numbers]  # 41/42 against a whole number: two offers
    if bare_range := _BARE_RANGE.fullmatch(piece):  # "41 to 42", "41–42", "41--42" (not 83): both ends
        return _each_number(list(bare_range.groups()))
    number = _fraction(piece)
    if number is not None:
        return [("n", number)]
    if scaled := _SCALED.fullmatch(piece):  # "1 thousand" is 1000, as "1000" is
        return [("n", Fraction(scaled[1]) * 10 ** _SCALE_POWERS[scaled[2].lower()])]
    signed = re.fullmatch(r"(?:minus|negative)\s+(\d+(?:\.\d+)?)", piece, re.IGNORECASE)  # "minus 5" is -5
    if signed:
        return [("n", -Fraction(signed[1]))]
    if is_number_phrase(piece) and not re.search(r"\d", piece):  # "forty-two" is 42, as "42" is
        spelled = _spelled_number(piece)
        if spelled is not None:
            return [("n", spelled)]
    if _SPACED_NUMBERS.fullmatch(piece) and not _SPACED_THOUSANDS.fullmatch(piece):  # "41 42": a list
        return _each_number(piece.split())
    if _INEQUALITY.search(piece) and not is_prose(piece) and (bounds := _NUMBER.findall(piece)):
        return _each_number(bounds)  # "41 < x \le 42" offers its bounds, as "between 41 and 42" does
    if not is_prose(piece):
        return [("t", _normalised(piece))]
    outside = re.sub(r"\([^()]*\)", " ", piece)  # a remark in brackets is not an offer
    numbers = _NUMBER.findall(outside)
    ends = [end for match in _RANGE.finditer(outside) for end in match.groups() if end]
    if len(numbers) == 2 and len(ends) == 2 and all(_NUMBER.fullmatch(end.rstrip(_TRAILING)) for end in ends):
        return _each_number(numbers)  # a range: both ends are offered
    if len(numbers) == 1:
        return _each_number(numbers)
    if not numbers and len(piece.split()) <= (4 if whole else 3):  # "Paris", "forty-two", "New York"
        return [("t", _normalised(piece))]
    return []  # working, not an offer


# A value the statement rules out after its own: "41, not 42", "41 (not 42)", "41 rather than 42",
# "41 instead of 42", "41 — not 42", "41, \text{not } 42", "41, and certainly not 42".
_RULED_OUT = re.compile(
    r"(?:\s*[,;(—–]\s*|\s+-{1,2}\s+|\s+)(?:\\text\s*\{\s*)?(?:(?:but|and|so|yet)\s+)?(?:[^\W\d_]+ly\s+)?"
    r"(?:not|never|rather\s+than|instead\s+of)\s*(?:\}\s*)?(?=[-−+$\\\d])",
    re.IGNORECASE,
)
_FURTHER_NUMBER = re.compile(r"^[^\d]*[-−+]?\$?\d+(?:[.,/]\d+)*\$?\s*\}?[)\]]?(?P<rest>.*)$", re.S)


def without_ruled_out(value: str) -> str:
    """``value`` without the values it rules out after its own (``41, not 42`` -> ``41``).

    What stands before the first negation of a number is the value when it is one, no prose,
    and nothing with a number follows the ruled-out one: ``42 is not prime``, ``42 if not 41``
    and ``42, not 41, maybe 40`` stay whole (a statement, a condition, a further offer), and so
    does a value that opens with its negation (``not 42``: withdrawn, not cut).
    """
    depth = _brace_depth(value, "{([")
    for match in _RULED_OUT.finditer(value):
        if depth[match.start()] != 0:
            continue
        head = value[: match.start()].rstrip(" \t,;(—–-")
        after = _FURTHER_NUMBER.match(value[match.end() :])
        if after is None or re.search(r"\d", after["rest"]):
            return value  # "42, not 41, maybe 40": more follows, and the whole is read
        if head and not is_prose(_clean(head)) and value_keys(head):
            return head
        return value
    return value


# A decimal comma: one comma inside a number with other than three digits after it, or after a
# lone 0 ("3,5", "12,5 %", "0,125"); "12,345" groups thousands, "1,2,3" is a list.
_DECIMAL_COMMA = re.compile(r"(?<![\d.,])(\d+),(\d+)(?![\d,]|\.(?!\.)|\s*,\s*\d)")  # an ellipsis may follow


def with_decimal_points(text: str) -> str:
    """``text`` with its decimal commas written as points (``3,5`` -> ``3.5``): how a value reads
    against a reference of one value, where the list the comma would make is a hedge anyway."""
    return _DECIMAL_COMMA.sub(
        lambda m: f"{m[1]}.{m[2]}" if len(m[2]) != 3 or m[1] == "0" else m[0],
        text,
    )


@functools.lru_cache(maxsize=4096)
def value_keys(value: str, *, slash_alternatives: bool = False, decimal_comma: bool = False) -> frozenset[Key]:
    """The distinct values one stated value offers (several: it hedges).

    Args:
        value: What a final-answer statement states (a box's content, the text after a marker).
        slash_alternatives: Read ``a/b`` of whole numbers that does not make a whole number as
            two offers (the reference is a whole number, so ``41/42`` is no fraction it asks for).
        decimal_comma: Read a comma inside a number as a decimal point (:func:`with_decimal_points`;
            the reference holds one value).

    Returns:
        The keys (see :data:`Key`); empty when the value states nothing comparable.
    """
    keys: list[Key] = []
    # A value is short; past this it is working, and only its opening is read as an offer.
    cleaned = _clean(value[:_VALUE_CHARS])
    cleaned = with_decimal_points(cleaned) if decimal_comma else cleaned
    label = _LABEL.match(cleaned)
    after_label = _split(cleaned[label.end() :]) if label else []
    if label and not any(is_prose(piece) for piece in after_label):
        pieces = after_label  # "Possible answers: 40, 41, 42" offers three
    else:
        pieces = _split(cleaned)
    for piece in pieces:
        keys.extend(_piece_keys(piece, slash_alternatives, whole=len(pieces) == 1))
    return frozenset(keys)


def values_text(keys: frozenset[Key]) -> list[str]:
    """The keys as short text, sorted (for logs and error messages)."""
    out = []
    for kind, value in keys:
        out.append(f"{value}%" if kind == "%" else str(value))
    return sorted(out)


def is_whole_number(reference: str | None) -> bool:
    """Whether the reference states one whole number."""
    if reference is None:
        return False
    keys = value_keys(reference)
    return len(keys) == 1 and all(k == "n" and isinstance(v, Fraction) and v.denominator == 1 for k, v in keys)


_INEQUALITY = re.compile(r"[<>≤≥]|\\(?:le|ge|leq|geq|lt|gt)\b")


# Two numbers a reference holds apart: a ratio, a score, a range, an interval ("3:5", "3-2",
# "1914–1918", "1939 to 1945", "[2, 5]"): an answer may name both ("3 to 5", "1914 to 1918").
# Not inside an expression ("x^2-4", "2/3" hold one value each).
_NUMBER_PAIR = re.compile(
    rf"(?<![\w^.)}}\]/])\d+(?:\.\d+)?\s*(?::|∶|-|{_DASH}|\b(?:to|through)\b)\s*[-−]?\d+(?:\.\d+)?(?![\w^.({{\[/])"
    r"|[\[(]\s*[-−]?\d[^,\])]*,\s*[-−]?\d[^\])]*[\])]",
    re.IGNORECASE,
)


_RATIO = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(?:\bto\b|:|∶)\s*(\d+(?:\.\d+)?)\s*", re.IGNORECASE)


def ratio_key(value: str) -> Key | None:
    """The value of a stated ratio, ``a to b`` or ``a:b`` (``2 to 3`` -> 2/3); ``None`` for
    anything else. Read as a range, such a statement offers both numbers; against a reference
    whose value is its ratio it is that one value."""
    match = _RATIO.fullmatch(_clean(value))
    if match is None or Fraction(match[2]) == 0:
        return None
    return ("n", Fraction(match[1]) / Fraction(match[2]))


_UNBOUNDED = re.compile(r"\\cup|∪|\\infty|∞")


def is_value_list(reference: str | None) -> bool:
    """Whether the reference lists several values (``3, -3``, ``\\pm 3``, ``(1, 2)``), as opposed
    to the bounds of an inequality, a ratio or a union of intervals (``3 < x < 7``, ``3:5``)."""
    if (
        reference is None
        or _INEQUALITY.search(reference)
        or _UNBOUNDED.search(reference)
        or _RATIO.fullmatch(reference)
    ):
        return False
    return len(value_keys(reference)) > 1


def reference_count(reference: str | None) -> int:
    """How many values the reference holds (at least 1): the most an answer may offer. An
    inequality holds its bounds (``3 < x < 7``: an answer ``between 3 and 7`` offers both), and
    a ratio, score, range or interval its two numbers (``3:5``, ``1914-1918``: an answer ``3 to
    5`` or ``1914–1918`` offers both)."""
    if reference is None or not reference.strip():
        return 1
    # "3 < x < 7", "3:5", "1914–1918", "(-\\infty, -1) \\cup (1, \\infty)"
    bounded = _INEQUALITY.search(reference) or _NUMBER_PAIR.search(reference) or _UNBOUNDED.search(reference)
    bounds = len(set(_NUMBER.findall(reference))) if bounded else 0
    return max(1, len(value_keys(reference)), bounds)


def numbers_in(text: str) -> Iterator[str]:
    """The numbers written in ``text``, in order (for readers that look at digits)."""
    for match in _NUMBER.finditer(text):
        yield match[0]
