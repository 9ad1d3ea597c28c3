"""Whether an answer's value equals the reference's: equal, different, or not decided.

math-verify's ``verify`` returns ``False`` both for two values that differ and for a side it could
not parse, so it cannot say "I do not know". :class:`ValueVerifier` keeps the three apart: each
side is first written as one LaTeX value (:func:`~nemo_genrm.verifier.notation.as_latex`) and
parsed by math-verify; a side that is not a value alone, or that math-verify cannot parse to a
sympy expression, leaves the pair :attr:`Decision.UNDECIDED` (the reference first: ``Paris`` is
never a value, so nothing is rejected for it), and only two parsed values are compared
(``verify`` with its errors raised, an error again undecided).

Three shapes are decided before that. A value with a bracketed remark after it (``1/2 (0.5)``,
``42 (rounded)``) is decided by the value; a remark that is another value makes it different
(``42 (41)``), one that rounds it (``2/3 (0.667)``, ``1/3 (0.333...)``) changes nothing, and
math-verify, which would multiply the two, never sees the pair. An inequality of symbols (``n
\\ge 42``) against a reference that is one number is different: it states a set (an interval
reference is left as before). A numeral whose digits do not exist in the base written under it
(``4₂``, which a reader folding the subscript takes for ``42``) is different.
"""

from __future__ import annotations

import enum
import functools
import logging
import re
from dataclasses import dataclass
from typing import Any

from nemo_genrm.verifier.notation import (
    MAX_CHARS,
    as_latex,
    is_invalid_numeral,
    percent_number,
    repeating_digits,
    split_remark,
)

logger = logging.getLogger(__name__)

__all__ = ["Check", "Decision", "ValueVerifier"]

_INTEGER = re.compile(r"^\$([+-]?\d+)\$$")
_LONGEST = 4 * MAX_CHARS
_DECIMAL = re.compile(r"\s*[-−]?\d*\.\d+\s*")
_APPROXIMATE = re.compile(r"(?:\.{3}|…|\\[lc]?dots|≈|\\approx)")


def _drop_timeout_warning(record: logging.LogRecord) -> bool:
    """math-verify warns once per process that its timeouts are off. They are off on purpose:
    its timeouts use signals, which work on the main thread only (the environment judges in
    actor threads), and :func:`~nemo_genrm.verifier.notation.as_latex` refuses what could run
    long before math-verify sees it. The warning would tell a user to do what is done."""
    return not record.getMessage().startswith("Timeout is disabled")


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_drop_timeout_warning)


class Decision(enum.StrEnum):
    """What the verifier decided about one (reference, value) pair."""

    EQUAL = "equal"
    DIFFERENT = "different"
    UNDECIDED = "undecided"


UNDECIDED_WHYS = ("reference", "answer")
"""Why a pair was not decided: the reference is not a value (``Paris``), or the answer is not
(words, a relation, a hedge spelled out, an expression math-verify cannot parse)."""


@dataclass(frozen=True)
class Check:
    """The verifier's decision and, when undecided, which side it could not read.

    Attributes:
        decision: Equal, different or undecided.
        why: For an undecided pair, ``reference`` or ``answer`` (:data:`UNDECIDED_WHYS`).
    """

    decision: Decision
    why: str | None = None

    @property
    def decided(self) -> bool:
        """Whether the verifier decided (equal or different)."""
        return self.decision is not Decision.UNDECIDED


class ValueVerifier:
    """Compares values with math-verify (see the module docstring). Results are cached per
    distinct text and pair, so a step's repeated references cost one parse."""

    def check(self, reference: str, value: str | None, question: str | None = None) -> Check:
        """The decision for one answer value against its reference.

        Args:
            reference: The reference answer (``ground_truth``).
            value: The bare final value the response states (``PreparedSample.value``).
            question: The question, when known. One that asks for a percent (``What percent
                ...``) makes the percent sign its unit: a percent on one side and its number
                alone on the other (``20%`` and ``20``, the percent at least 1) are equal, as well as a hundredth
                (``20%`` and ``0.2``), which is how they compare without it.

        Returns:
            The :class:`Check`.
        """
        check = _check(reference, value)
        if check.decision is Decision.DIFFERENT and value and (digits := repeating_digits(value)) is not None:
            # "0.333..." is 1/3, and also the 0.333 it shows: equal to a reference rounded there.
            return _check(reference, digits)
        if check.decision is Decision.DIFFERENT and question and _ASKS_FOR_PERCENT.search(question):
            percents = percent_number(reference), percent_number(value)
            number = percents[0] or percents[1]
            # A percent on one side only, of at least 1 (is "0.2%" of a reference 0.2 a fraction or a percent?).
            if (percents[0] is None) != (percents[1] is None) and abs(float(number)) >= 1:
                as_numbers = _check(percents[0] or reference, percents[1] or value)
                return as_numbers if as_numbers.decision is Decision.EQUAL else check
        return check


# A question that asks for a percent ("What percent of ...", "Express it as a percentage", "Quel
# pourcentage ...", "Wie viel Prozent ..."), not one that mentions one ("a 40 percent chance ...").
_ASKS_FOR_PERCENT = re.compile(
    r"\b(?:what|which|how\s+many)\s+(?:per\s?cent|percentage)|\b(?:as|in)\s+(?:a\s+)?(?:per\s?cent|percentage)\b"
    r"|\bpercentage\s+(?:of|is|was|will|does|did|has|had|change|increase|decrease|point)"
    r"|\bper\s?cent(?:age)?\s+(?:increase|decrease|change|error|difference|growth|gain|loss|discount|markup|"
    r"decline|drop|rise|return|yield)|\(\s*(?:in\s+)?%\s*\)|\bin\s+%"
    r"|\b(?:interest|growth|tax|discount|inflation|unemployment|success|failure|error|pass(?:ing)?|completion|"
    r"mortality|survival|vacancy|occupancy|conversion|retention|churn|default|response|participation)\s+rate\b"
    r"|\b(?:annual|percentage)\s+yield\b"
    r"|\b(?:quel|quelle)\s+pourcentage|\ben\s+pourcentage|\bwie\s+viele?\s+prozent|\bwelche[rn]?\s+prozentsatz"
    r"|\bin\s+prozent|\bqu[ée]\s+porcentaje|\bcu[aá]l\s+es\s+el\s+porcentaje|\ben\s+porcentaje"
    r"|\bqual\s+(?:é\s+)?a?\s*porcentagem|\bquale\s+percentuale|сколько\s+процент|какой\s+процент|в\s+процентах"
    r"|百分之几|百分比是多少|百分比为多少|何パーセント|몇\s*퍼센트|कितने\s+प्रतिशत",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=65_536)
def _check(reference: str, value: str | None) -> Check:
    if value is not None and len(value) > _LONGEST:  # nothing that long is a value alone (as_latex)
        return Check(Decision.UNDECIDED, "reference" if as_latex(reference) is None else "answer")
    parts = split_remark(value)
    if parts is not None:
        return _check_remarked(reference, *parts)
    if is_invalid_numeral(value) and not is_invalid_numeral(reference):
        return Check(Decision.DIFFERENT)
    if _is_inequality(value) and _PLAIN_NUMBER.match(as_latex(reference) or ""):
        return Check(Decision.DIFFERENT)  # "n \ge 42" is a set of values, never the value 42
    reference_latex, value_latex = as_latex(reference), as_latex(value, foreign_words=True)
    if reference_latex is not None and value_latex is not None:
        integers = _INTEGER.match(reference_latex), _INTEGER.match(value_latex)
        if integers[0] and integers[1]:  # the common case, without ANTLR's parse (milliseconds each)
            same = int(integers[0].group(1)) == int(integers[1].group(1))
            return Check(Decision.EQUAL if same else Decision.DIFFERENT)
    gold = _parsed(reference_latex)
    if gold is None:
        return Check(Decision.UNDECIDED, "reference")
    target = _parsed(value_latex)
    if target is None:
        return Check(Decision.UNDECIDED, "answer")
    from math_verify import verify

    try:
        # Signal-based timeouts work on the main thread only; as_latex refused what could run long.
        same = verify(gold, target, timeout_seconds=None, raise_on_error=True)
    except Exception:  # noqa: BLE001 - sympy's errors are many; an error decides nothing
        logger.debug("math-verify could not compare %r with %r", value, reference, exc_info=True)
        return Check(Decision.UNDECIDED, "answer")
    return Check(Decision.EQUAL if same else Decision.DIFFERENT)


# A reference that is one plain number ("$42$", "$-0.5$", "$\\frac{1}{2}$"), not an interval or a set.
_PLAIN_NUMBER = re.compile(r"^\$[-+]?(?:\d+(?:\.\d+)?|\.\d+|\d+/\d+|\\frac\{\d+\}\{\d+\})\$$")
# An ASCII arrow ("=>", "->", "<-") is no inequality.
_ORDER_RELATION = re.compile(r"(?<![=\-])>(?!>)|<(?![-<])|[≤≥≠]|\\(?:le|ge|leq|geq|lt|gt|neq|ne)(?![A-Za-z])")


def _is_inequality(text: str | None) -> bool:
    """Whether ``text`` is an inequality of symbols alone (``41 < x \\le 42``, ``n \\ge 42``); one
    with words (``42, as 42 > 41``) is left to the judge, and a set (``x \\in \\{42\\}``) to
    extraction, which counts its values."""
    text = re.sub(r"</?[A-Za-z]\w*\s*>", " ", text or "")  # a markup tag ("<s>41</s>") is none
    if not _ORDER_RELATION.search(text):
        return False
    return re.search(r"[A-Za-z]{2,}", re.sub(r"\\[A-Za-z]+", " ", text)) is None


def _check_remarked(reference: str, value: str, remark: str) -> Check:
    """A value with a bracketed remark after it (``1/2 (0.5)``, ``42 (rounded)``): the value
    decides, and a remark that is another value than the reference makes it different (``42
    (41)``); a remark never decides for a value the verifier cannot read (``London (42)``)."""
    first = _check(reference, value)
    if not first.decided:
        return first  # the value is not read: its remark decides nothing ("London (42)")
    rounded = _DECIMAL.fullmatch(remark) and not _DECIMAL.fullmatch(value)  # "2/3 (0.667)"
    if as_latex(remark, foreign_words=True) is None or _APPROXIMATE.search(remark) or rounded:
        return first  # words, or a rounded restatement ("1/3 (0.333...)", "2/3 (0.667)")
    second = _check(reference, remark)
    return Check(Decision.DIFFERENT) if second.decision is Decision.DIFFERENT else first


@functools.lru_cache(maxsize=65_536)
def _parsed(latex: str | None) -> list[Any] | None:
    """math-verify's parse of one LaTeX value; ``None`` unless it is a sympy expression."""
    if latex is None:
        return None
    from math_verify import LatexExtractionConfig, parse
    from sympy import Basic, MatrixBase

    parsed = parse(latex, [LatexExtractionConfig()], parsing_timeout=None)
    if not parsed or not isinstance(parsed[0], (Basic, MatrixBase)):
        return None  # nothing, or only the text it matched: not a value it read
    return parsed
