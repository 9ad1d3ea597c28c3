"""A stand-in judge that reads literally what it is shown, as a careful grader would.

:class:`LiteralJudge` reads the candidate inside the fence the way a person reads a worked answer:
the final answer is the last one the candidate *states* (a ``\\boxed{}``, a line that opens with
``Answer:``, ``the answer is ...``, ``it is ...``), and a statement does not stand when it is
negated (``not \\boxed{42}``), withdrawn right after (``which is wrong``, ``scratch that``,
``I withdraw``), or sits in code, a quotation or a URL. Several distinct standing values, or an
answer that offers alternatives (``41 or 42``, ``±42``), do not match a reference that holds fewer;
a value ruled out inside a statement is not offered (``41, not 42`` answers 41), and a condition
among values (``42 if not 41``) matches nothing.
A value is compared as a number (``42.0`` and ``84/2`` are 42; ``-42``, ``42%``, ``0.42`` and
``42 thousand`` are not) or, for words, as text. What the defence marked ``(quoted)`` (to the
end of its line) and ``[instruction removed]`` are not the candidate's words. With no statement it takes the last
number it reads.

It is written apart from :mod:`nemo_genrm.prompts.extraction` (its own patterns, its own value
reading), so a test that runs extraction in front of it measures what extraction lets a literal
reader see, not extraction agreeing with itself. Its verdict is therefore a known function of what
it is shown: a flip under it is a flip caused by what the judge was shown.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from nemo_genrm.testing.gullible import GullibleJudge, fenced_content, prompt_reference

__all__ = ["LiteralJudge", "literal_values", "literal_verdict", "reference_values"]

_STATEMENTS = re.compile(
    r"\\boxed\s*\{(?P<box>(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*)\}"
    r"|^[ \t#*>•+-]*(?:\d{1,2}[.)][ \t]*)?[*_]{0,3}(?:final\s+|my\s+|revised\s+|corrected\s+|updated\s+)?answer[*_]{0,3}\s*[:：][*_]{0,3}[ \t]*(?P<marker>(?:[^.\n]|[.](?=\S|\s+\d))*)"
    r"|\b(?:the\s+(?:final\s+)?(?:answer|result)\s+is|it\s+is|it's|i\s+get|corrected:)\s+(?P<prose>[^\n\\]*?)(?=[.]\s|[.]?$|\n)",
    re.IGNORECASE | re.MULTILINE,
)
_INERT = re.compile(
    r"```.*?(?:```|\Z)|`[^`\n]*`|^\s*>[^\n]*|\"[^\"\n]*\"|“[^”\n]*”|https?://\S+", re.DOTALL | re.MULTILINE
)
_NEGATED = re.compile(r"\b(?:not|isn't|is\s+not|never|instead\s+of|rather\s+than)\s*\$?\s*$", re.IGNORECASE)
# A withdrawal refers back to what was just said: "is wrong", "which is incorrect", "(wrong)",
# "scratch that", "I withdraw", "no, wait", "but wait,"; and a revised answer after it.
_WITHDRAWN = re.compile(
    r"^\W*(?:is|was)\s+(?:wrong|incorrect)|^\W*\((?:wrong|incorrect)\)"
    r"|\b(?:which|that|this)(?:'s|\s+is|\s+was)\s+(?:wrong|incorrect|a\s+mistake|not\s+right)"
    r"|\bscratch\s+that\b|\b(?:withdraw|retract)|\bignore\s+that\b|\bno,?\s+wait\b|\bhold\s+on\b"
    r"|^\W*(?:(?:but|hmm|oh)[,.]?\s+)?(?:no|wait|actually)\s*[,.!]",
    re.IGNORECASE,
)
# A withdrawal of a bare answer line opens the sentence after it and refers back to it ("No,
# wait.", "That is wrong.", "I retract that.", "Scratch that."); a word such as "retract" inside a
# remark ("nothing to retract"), an opening "Actually," ("Actually, that one was easy.") or a
# clause that goes on ("It was a mistake to expand first", "a mistake-prone step") is none.
_TAKEN_BACK = re.compile(
    r"^\W*(?:(?:actually|oh|hmm|oops)[,.!]?\s+)?(?:no,?\s+wait\b|scratch\s+that\b|ignore\s+that\b"
    r"|(?:i|we)\s+(?:withdraw|retract|take\s+(?:it|that|this)\s+back)\b"
    r"|(?:that|this|it)(?:'s|\s+is|\s+was)\s+(?:wrong|incorrect|a\s+mistake|not\s+right)(?=\s*(?:[.!,;:]|$)))",
    re.IGNORECASE,
)
# A value the statement rules out ("41, not 42", "41 rather than 4.42"): a whole number, or one word.
_NEGATED_VALUE = re.compile(
    r"\b(?:not|never|instead\s+of|rather\s+than)\s+(?:[-−+]?\$?\d+(?:\.\d+)?(?:\s*/\s*\d+)?\$?|[^\s,;.)]+)",
    re.IGNORECASE,
)
_BOX = re.compile(r"\\boxed\s*\{([^{}]*)\}")
_TEXT = re.compile(r"\\text\s*\{([^{}]*)\}")
_SENTENCES = re.compile(r"(?:[^.!?\n]|[.!?](?=\S))*[.!?\n]?\s*")
_NUMBER = re.compile(
    r"(?P<sign>[-−+±‐‑‒–—―˗➖⁻₋]|\\pm\s*)?\s*(?:\\d?frac\s*\{(?P<fn>\d+)\}\s*\{(?P<fd>\d+)\}|(?P<num>\d+(?:\.\d+)?)(?:\s*/\s*(?P<den>\d+))?)"
    r"(?P<pow>\s*\^\s*\{?\d+\}?)?(?P<after>\s*(?:%|\\%|thousand|million|billion|!|k\b))?",
    re.IGNORECASE,
)
_ALTERNATIVES = re.compile(r"\bor\b|\?|;|\bmaybe\b|\bperhaps\b|±|\\pm", re.IGNORECASE)
# A condition among several values ("42 if not 41", "x = 3 if y = 2") states none of them outright.
_CONDITION = re.compile(r"\bif\b|\bunless\b|\bwhether\b", re.IGNORECASE)
# Working around a value ("3x+1", "x + 1"): dropping a negated value from it leaves no plain value.
_SYMBOLIC = re.compile(r"\d\s*[a-z]|[a-z]\s*[-+*/^=]|[-+*/^=]\s*[a-z]", re.IGNORECASE)
_PROSE = re.compile(r"\b(?!(?:and|or|either|maybe)\b)[a-z]{3,}", re.IGNORECASE)
_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "k": 1e3}


def _numbers(value: str) -> list[float | None]:
    """Every number ``value`` writes, as a float (``None`` for one whose meaning is not a plain
    value: a factorial, ``±``)."""
    out: list[float | None] = []
    for m in _NUMBER.finditer(value):
        if m["fn"]:
            number = int(m["fn"]) / int(m["fd"])
        else:
            number = float(m["num"]) / (int(m["den"]) if m["den"] and int(m["den"]) else 1)
        sign, after = (m["sign"] or "").strip(), (m["after"] or "").strip().lower().lstrip("\\")
        if sign.startswith(("±", "\\pm")) or after == "!":
            out += [number, -number] if sign else [None]
            continue
        dash = sign not in ("", "+", "±", "-", "−")
        before = value[: m.start("sign")] if m["sign"] else ""
        glued = before[-1:] and not before[-1:].isspace() and before[-1:] not in "($[{="
        if dash and (before.rstrip()[-1:].isdigit() or glued or not value[m.start("sign") + 1 :][:1].isdigit()):
            # "41–42" joins a range; "Answer — 42" and "Answer:—42" are punctuation: a dash signs
            # only the number it touches, after a space or an opening
            sign = ""
        number = -number if sign and sign not in ("+", "±") else number  # a minus, or a dash before it
        if m["pow"]:
            number = number ** int(re.sub(r"\D", "", m["pow"]))
        if after == "%":
            number /= 100
        number *= _SCALE.get(after, 1)
        out.append(number)
    return out


def reference_values(reference: str) -> set[float] | str:
    """The values a reference holds: its numbers, or its text when it has none."""
    numbers = {n for n in _numbers(reference) if n is not None}
    return numbers if numbers else reference.strip().casefold()


def _next_sentences(text: str) -> str:
    """The rest of a statement's sentence and the sentence after it."""
    pieces = [m[0] for m in _SENTENCES.finditer(text) if m[0]][:2]
    return "".join(pieces)


def _standing(text: str) -> tuple[list[str], int] | None:
    """The values of the statements that stand, in order, and where the last statement ends;
    ``None`` when there is no statement."""
    inert = [m.span() for m in _INERT.finditer(text)]
    found = [m for m in _STATEMENTS.finditer(text) if not any(a <= m.start() < b for a, b in inert)]
    out = []
    for i, match in enumerate(found):
        value = next(v for v in (match["box"], match["marker"], match["prose"]) if v is not None).strip()
        if match["marker"] is not None and not text[match.start("marker") - 1].isspace():
            value = value.lstrip("—―").strip()  # "Answer:—42": a dash glued to the label is punctuation
        until = found[i + 1].start() if i + 1 < len(found) else len(text)
        after = _next_sentences(text[match.end() : until])
        before = text[max(0, match.start() - 16) : match.start()]
        revised = i + 1 < len(found) and re.match(r"\W*(?:revised|corrected|updated)\s+answer", found[i + 1][0], re.I)
        if _NEGATED.search(before) or value.lower().startswith("not ") or _WITHDRAWN.search(after) or revised:
            continue
        if value:
            out.append(value)
    return (out, found[-1].end()) if found else None


def _taken_back(after: str) -> bool:
    """Whether the first sentence of ``after`` withdraws what came right before it."""
    first = next((m[0] for m in _SENTENCES.finditer(after.lstrip()) if m[0].strip()), "")
    return bool(_TAKEN_BACK.search(first))


def literal_values(shown: str) -> list[set[float] | str]:
    """What a literal reader takes the candidate to answer: one entry per standing statement
    (its numbers, or its text), the last being the final answer; the last number read when no
    statement stands."""
    text = re.sub(r"\(quoted\)[^\n]*", "", shown)  # what the defence marked is not the candidate's claim
    text = text.replace("[instruction removed]", " ").replace("[...]", " ")
    found = _standing(text)
    if found is None:  # no statement: the last line that states a value is the answer, unless withdrawn
        plain = _INERT.sub(" ", text)
        lines = [m for m in re.finditer(r"[^\n]+", plain) if m[0].strip()]
        last = ([m for m in lines if re.search(r"\d", m[0])] or lines)[-1:]
        if last and _taken_back(plain[last[0].end() :]):
            return []
        standing = [m[0] for m in last]
    elif not found[0]:  # none stands: the last number read after them
        numbers = [n for n in _numbers(_INERT.sub(" ", text[found[1] :])) if n is not None]
        return [{numbers[-1]}] if numbers else []
    else:
        standing = found[0]
    out: list[set[float] | str] = []
    for value in standing:
        value = _BOX.sub(r"\1", value)  # "Answer: \boxed{Paris}" answers Paris
        value = _TEXT.sub(r" \1 ", value)  # "41, \text{not } 42" reads as its words
        numbers = _numbers(value)
        kept = _NEGATED_VALUE.sub(" ", value)  # "41, not 42" answers 41
        if len(numbers) > 1 and _CONDITION.search(value):
            out.append({math.nan})  # a conditional answer matches no reference
            continue
        if not _ALTERNATIVES.search(value) and not _SYMBOLIC.search(kept) and len(_numbers(kept)) == 1:
            numbers = _numbers(kept)
        if not numbers:
            out.append(re.sub(r"[\s*$.]+", " ", value).strip().casefold())
        elif None in numbers:
            out.append({math.nan})  # a value that is no plain number matches nothing
        elif len(numbers) > 1 and not _ALTERNATIVES.search(value) and "=" in value:
            out.append({numbers[-1]})  # 6 x 7 = 42: the result of the working
        elif len(numbers) > 1 and _PROSE.search(value) and not _ALTERNATIVES.search(value):
            out.append({numbers[-1]})  # a sentence that ends on its value
        else:
            out.append(set(numbers))
    return out


def _same(answer: set[float] | str, reference: set[float] | str) -> bool:
    if isinstance(answer, str) or isinstance(reference, str):
        return isinstance(answer, str) and isinstance(reference, str) and answer == reference
    return len(answer) == len(reference) and all(any(math.isclose(a, r) for r in reference) for a in answer)


class LiteralJudge(GullibleJudge):
    """Reads the fenced candidate literally (see the module docstring); obeys nothing.

    Args:
        expected: The reference; ``None`` reads it from each prompt (its ``Reference answer:``).
    """

    def __init__(self, expected: str | None = None, positive: str = "1", negative: str = "0") -> None:
        super().__init__(expected or "", positive, negative)
        self.read_reference = expected is None

    def honest(self, text: str) -> bool:
        found = fenced_content(text)
        reference = prompt_reference(text) if self.read_reference else self.expected
        return found is not None and reference is not None and literal_verdict(found[0], reference)


def literal_verdict(shown: str, reference: str) -> bool:
    """Whether a literal reader finds that ``shown`` (a candidate as a judge sees it) answers ``reference``."""
    values = literal_values(shown)
    if not values:
        return False
    wanted = reference_values(reference)
    offered = set().union(*(v for v in values if isinstance(v, set)))
    if isinstance(wanted, set) and len(offered) > len(wanted):
        return False  # more values than the reference holds: a hedge
    if isinstance(wanted, set) and len(wanted) > 1:
        return _same(offered, wanted)  # the reference's values, stated together or one by one
    return _same(values[-1], wanted)


def shown_candidates(judge: GullibleJudge) -> Sequence[str]:
    """The fenced candidate of every prompt ``judge`` was shown."""
    out = []
    for messages in judge.shown:
        found = fenced_content(messages[-1]["content"])
        out.append(found[0] if found else "")
    return out
