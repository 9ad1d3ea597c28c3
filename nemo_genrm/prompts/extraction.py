"""The answer a judge is shown: every final-answer statement found, ambiguity refused, context kept.

:func:`extract_answer` reads a policy response as a reader would (:mod:`nemo_genrm.prompts.reading`)
and finds every statement of a final answer in it:

1. **explicit statements**: each complete ``\\boxed{}`` (and ``\\fbox``, ``\\framebox``), and each
   line that opens with the configured marker as its label (``Answer: 42``, ``**Final answer:**
   42``; ``Candidate answer:`` or ``Reference answer:`` are other labels, and a marker inside a line
   is prose). A box on a marker's line is that statement's value;
2. else **answer phrases** (``the answer is 42``, ``the final result = 42``);
3. else **bare lines**: lines that are a number alone, and the last line when it is short (an
   injected label line never counts).

Statements in hidden or inert text (comments, ``\\phantom``, white text, code, quotations, URLs)
do not count, nor do the drafts of a reasoning model's thinking (before its last ``</think>``)
when it states an answer after it. A statement that is negated (``not \\boxed{42}``) or withdrawn right after
(``\\boxed{41}, which is wrong``, ``Scratch that``, ``No, ...``) is *withdrawn*: it is shown but
states nothing. The others are compared as values (:mod:`nemo_genrm.prompts.values`): when they
offer more distinct values than the reference holds, the response hedges (reason ``hedged``,
never judged, never reduced to "the last one"); ``41 or 42`` inside one statement hedges too,
and so does a later correction that states another value (``P.S. Actually 41.``).

The judge is shown the final statement *with its context*: from the paragraph of the first
statement that led to it (a withdrawn attempt and its correction stay together) to the end of
the response, hidden text left out, so a negation, a withdrawal or a correction after it is
visible. A window over ``max_chars`` is cut, not refused: its opening up to the end of the final
statement's sentence and the response's end are kept around an elision mark.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from nemo_genrm.errors import Reason
from nemo_genrm.guard.injection import is_content_free, is_judge_format_line
from nemo_genrm.prompts.reading import Reading, read
from nemo_genrm.prompts.values import (
    POLAR,
    Key,
    distinct_values,
    is_number_phrase,
    is_prose,
    is_value_list,
    is_whole_number,
    ratio_key,
    reference_count,
    same_value,
    states_a_value,
    value_keys,
    with_decimal_points,
    without_ruled_out,
)

__all__ = ["ELISION", "ExtractedAnswer", "Statement", "extract_answer", "find_statements", "last_boxed"]

ELISION = " [...] "
"""What stands where a long window was cut."""

_BOX = re.compile(r"\\(?:boxed|fbox|framebox)\s*(?:\[[^\]\n]*\])?\s*\{")
_QUALIFIERS = (
    r"(?:(?:the|my|our|final|overall|short|revised|updated|corrected|correct|true|new|actual|real|right)[ \t]+){0,3}"
)
# A bullet, heading or number before a marker, glued to it or not ("- Answer:", "-Answer:", "#Answer:").
_DECORATION = r"[ \t]*(?:(?:#{1,6}|[-*+•]{1,3}|\d{1,2}[.)])[ \t]*)?[*_]{0,3}"
_PHRASE = re.compile(
    r"\b(?:(?:the|my|our)\s+)?(?:final\s+)?(?:answer|result)\s+(?:is|=(?!>)|would\s+be|will\s+be|should\s+be|must\s+be)"
    r"\s*:?\s*",
    re.IGNORECASE,
)
_BARE_NUMBER = re.compile(r"[ \t]*[-−+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:[ \t]*/[ \t]*\d+)?[ \t]*%?[ \t]*\.?[ \t]*")
_FINAL_LINE_CHARS = 120
_NEAR = 600  # how far around a statement its negation, withdrawal or afterthought is looked for
# Where a value's sentence ends: not inside "i.e." or "e.g."; after a digit, "!" and "?" end it only
# before another sentence ("5!" is a factorial, "42?" a doubt the verifier must not read as 42).
_SENTENCE_CUT = re.compile(r"(?<=[^\d\s])(?<!\.[a-zA-Z])[.!?](?=\s|$)|(?<=\d)\.(?=\s+[A-Z]|$)|(?<=\d)[!?](?=\s+[A-Z])")
# ... nor after an abbreviation or an ellipsis that a number follows: "approx. 41 or 42", "No. 41
# or 42", "42 vs. 41", "It's... 41 or 42" are read whole ("Answer: No. The reason ..." ends at "No").
_ABBREVIATION = re.compile(r"(?:\b(?:approx|appr|ca|circa|no|nr|vs|resp|bzw|alt|cf|prob|est)\.|\.\.|…)$", re.IGNORECASE)
_NUMBER_AFTER = re.compile(r"[.…]*\s*[-−+$\\]?\d")


def _sentence_cut(rest: str) -> int | None:
    """Where the first sentence of a value ends in ``rest`` (see :data:`_SENTENCE_CUT`)."""
    for match in _SENTENCE_CUT.finditer(rest):
        if _ABBREVIATION.search(rest, 0, match.end()) and _NUMBER_AFTER.match(rest, match.end()):
            continue
        return match.start()
    return None


# A statement is negated by a negation right before it (at most two words between, no clause break).
_NEGATED_BEFORE = re.compile(
    r"(?:\b(?:not|never|no\s+longer|isn'?t|aren'?t|wasn'?t|rather\s+than|instead\s+of|nicht|kein|pas|не)\b|n't\b|≠|"
    r"\\neq?\b)\s*(?:[^\s,;.:!?]+\s+){0,2}$",
    re.IGNORECASE,
)
_WRONG = r"(?:wrong|incorrect|false|not\s+(?:right|correct)|a\s+mistake|an\s+error|a\s+typo|mistaken)"
# ... or withdrawn in what follows it, up to the end of the next sentence.
_WITHDRAWN_AFTER = re.compile(
    rf"^[\s).,;:*$]*(?:is|was|would\s+be)\s+{_WRONG}\b|^[\s,]*\((?:wrong|incorrect|no|not\s+right|mistake)\)"
    rf"|\b(?:which|that|this|it)(?:\s+(?:answer|result|one|value))?(?:'s|\s+is|\s+was|\s+would\s+be)\s+{_WRONG}\b"
    r"|\b(?:scratch|strike|cross)\s+that\b|\b(?:i|we)\s+(?:withdraw|retract|take\s+(?:it|that|this)\s+back)\b"
    r"|\b(?:disregard|ignore)\s+(?:that|this|it|the\s+above|my\s+(?:previous|last|first)\s+answer)\b"
    r"|\bnever\s?mind\b|\bmy\s+(?:mistake|bad)\b"
    r"|(?:^|[.!?]\s+|\n\s*|^[\s,;]*)(?:no[,.!]|nope\b|wait[,.!]|oops\b|actually,|correction\b|corrected\b|"
    r"hmm,?\s+no\b|on\s+second\s+thought\b|let\s+me\s+(?:redo|recheck|correct|fix)\b)",
    re.IGNORECASE,
)
# ... or reconsidered, and answered again: words that open a correction as often as a check
# ("But wait, let me double-check: 6 x 7 = 42. Yes."), so they withdraw a statement only when
# another statement follows them; alone they leave it standing (and the verifier reading it).
_RECONSIDERED_AFTER = re.compile(
    r"(?:^|[.!?]\s+|\n\s*|^[\s,;]*)(?:(?:but|hmm|oh|and)[,.]?\s+wait\b|wait\s+(?:a\s+(?:second|minute|moment|sec)|no)\b"
    r"|hold\s+on\b|let\s+me\s+(?:re-?examine|reconsider)\b)|\b(?:i\s+(?:need|have)\s+to|let\s+me)\s+reconsider\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Statement:
    """One statement of a final answer in a response.

    Attributes:
        start: Where the statement starts (its label, or the box command).
        end: Where it ends (the end of its value, or the box's closing brace).
        value: The bare value it states.
        source: ``marker``, ``boxed``, ``phrase`` or ``line``.
        withdrawn: Negated or withdrawn: shown, but stating nothing.
    """

    start: int
    end: int
    value: str
    source: str
    withdrawn: bool = False


@dataclass(frozen=True)
class ExtractedAnswer:
    """What of a policy response the judge is shown, and the value it states.

    Attributes:
        text: The final answer with its context (see the module docstring), stripped; ``None``
            when there is nothing to judge.
        reason: ``ok``, ``no_answer`` (empty, content-free, a marker followed by nothing, or
            not text) or ``hedged`` (more distinct final values than the reference holds).
        source: Where the final answer came from: ``marker``, ``boxed``, ``phrase``, ``line``
            or ``tail`` (no statement: the response's end); ``None`` for non-text input.
        value: The bare final value as stated (``42`` for ``Answer: 42``); ``None`` when none
            stands (no statement, or every statement withdrawn).
        statement: The final statement as written (``Answer: 42``, ``\\boxed{42}``), which the
            defence never marks as a verdict line; ``None`` when there is none.
        offered: The distinct values the statements offer, as text (several when hedged).
        words_after: Whether the response goes on after its final statement with more than
            punctuation: words only a reader of the window weighs (a remark, a correction, a
            condition), which a value verifier reading ``value`` alone does not see.
    """

    text: str | None
    reason: str
    source: str | None
    value: str | None = None
    statement: str | None = None
    offered: tuple[str, ...] = ()
    words_after: bool = False

    @property
    def ok(self) -> bool:
        """Whether there is an answer to judge."""
        return self.text is not None and self.reason == "ok"


# ------------------------------------------------------------------------------------ finding
def last_boxed(text: str) -> str | None:
    """The content of the last complete ``\\boxed{...}`` (nested braces balanced), else ``None``."""
    found = [s for s in _boxes(read(text)) if s.source == "boxed"]
    return found[-1].value if found else None


def _boxes(reading: Reading) -> list[Statement]:
    out: list[Statement] = []
    for match in _BOX.finditer(reading.text):
        if out and match.start() < out[-1].end or not reading.counts(match.start()):
            continue  # a box inside another box, or in hidden or inert text
        close = reading.braces.get(match.end())
        if close is not None:
            out.append(Statement(match.start(), close + 1, _shown_value(reading, match.end(), close), "boxed"))
    return out


def _marker_pattern(marker: str) -> re.Pattern[str]:
    core = re.escape(marker.strip())
    if marker.strip().endswith(":") and len(marker.strip()) > 1:  # "**Answer**:", "Answer :", "Answer："
        word = re.escape(marker.strip()[:-1])
        # "Answer (after checking): 41", "Final answer — 41" (a dash after a space).
        # A remark in brackets holds no value nor alternative ("Answer (41 or 42): 42" is no marker).
        core = word + r"(?:[ \t]*\((?![^()\n]*\bor\b)[^()\n\d]{1,40}\))?[*_]{0,3}[ \t]*(?:[:：]|[—–](?=[ \t]))"
    qualifiers = _QUALIFIERS if marker.strip()[:1].isalpha() else ""
    return re.compile(rf"^{_DECORATION}{qualifiers}{core}[*_]{{0,3}}[ \t]*", re.IGNORECASE | re.MULTILINE)


def _line_value(text: str, start: int) -> tuple[str, int, int]:
    """(value, start, end) of what follows a label at ``start``: the rest of the line, cut at the
    end of its first sentence, else the next non-empty line."""
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    if not text[start:line_end].strip():
        following = re.search(r"\S[^\n]*", text[line_end:])
        if following is None:
            return "", start, start
        start, line_end = line_end + following.start(), line_end + following.end()
    # A dash glued to the label is punctuation ("Answer:—42", "The answer is—42"); after a space it
    # is a sign ("Answer: —42").
    punctuation = re.match(r"[—―][ \t]*", text[start:line_end]) if start and not text[start - 1].isspace() else None
    start += punctuation.end() if punctuation and punctuation.end() < line_end - start else 0
    rest = text[start:line_end]
    cut = _sentence_cut(rest)
    end = start + (cut if cut is not None else len(rest.rstrip()))
    return text[start:end].strip(), start, end


def _shown_value(reading: Reading, start: int, end: int) -> str:
    return reading.shown(start, end).strip()


def _markers(reading: Reading, marker: str) -> list[Statement]:
    out = []
    for match in _marker_pattern(marker).finditer(reading.text):
        if reading.counts(match.start()) and reading.counts(match.end() - 1):
            _, start, end = _line_value(reading.text, match.end())
            phrase = _PHRASE.match(reading.text, start, end)  # "Final Answer: The final answer is $42$"
            start = phrase.end() if phrase and phrase.end() < end else start
            if "\n" in reading.text[match.end() : start]:  # the value is on the next line
                items = _listed_values(reading, match.end())
                if len(items) > 1:  # "Answer:\n- Option 1: 41\n- Option 2: 42": one statement per item
                    out.extend(Statement(a, b, _shown_value(reading, a, b), "marker") for a, b in items)
                    continue
                bullet = _BULLET.match(reading.text, start, end)
                start = bullet.end() if bullet and bullet.end() < end else start  # "Answer:\n- 42" is 42
            out.append(Statement(match.start(), max(end, match.end()), _shown_value(reading, start, end), "marker"))
    return out


_BULLET = re.compile(r"[ \t]*[-*+•][ \t]+")
_LIST_LINES = 64
_MARKER_WORD = re.compile(r"[*_]*(?:final\s+)?answer\b", re.IGNORECASE)
_LIST_ITEM = re.compile(
    r"[ \t]*(?:[-*+•]|\d{1,2}[.)]|\(?[a-zA-Z0-9][.)])[ \t]+(?:[^\W\d_][^:\n]{0,30}:[ \t]*|[A-Za-z][ \t]*=[ \t]*)?"
)


def _listed_values(reading: Reading, start: int) -> list[tuple[int, int]]:
    """The items of the list that opens under a marker with nothing after it on its own line
    (blank lines between allowed), each after its bullet and a short label (``- Option 1: 41``)
    when it holds a number; their spans, or none when fewer than two items hold one. Read up to
    :data:`_LIST_LINES` lines (linear however many markers a response repeats)."""
    text, out = reading.text, []
    line_start = text.find("\n", start) + 1
    for _ in range(_LIST_LINES):
        if not 0 < line_start < len(text):
            break
        line_end = text.find("\n", line_start)
        line_end = len(text) if line_end < 0 else line_end
        if text[line_start:line_end].strip():
            item = _LIST_ITEM.match(text, line_start, line_end)
            if item is None or _MARKER_WORD.match(text, item.end(), line_end):
                break
            if re.search(r"\d", text[item.end() : line_end]) and reading.counts(item.end()):
                out.append((item.end(), line_end))
        line_start = line_end + 1
    return out


# The answer tag of the reasoning format ("<think>...</think> <answer>42</answer>").
# Its content runs to the closing tag and never over another opening one (a mention of the tag
# in the reasoning before it is none; linear on a run of unclosed tags).
_THINK = re.compile(r"<\s*think\s*>(?:(?!<\s*/?\s*think\s*>).)*<\s*/\s*think\s*>", re.IGNORECASE | re.DOTALL)
_ANSWER_TAG = re.compile(r"<\s*answer\s*>((?:(?!<\s*/?\s*answer\s*>).)*)<\s*/\s*answer\s*>", re.IGNORECASE | re.DOTALL)


def _answer_tags(reading: Reading) -> list[Statement]:
    """Each ``<answer>...</answer>`` outside hidden or inert text and outside ``<think>``: a
    marker in tag form. On one line, or over lines of a matrix, the tag is one statement; else
    each line that is a value alone or names an answer (``My answer is 41.``, ``(correct: 42)``)
    is one (two values hedge), and with none, its last line that holds a number (working above
    it is not)."""
    thinking = [m.span() for m in _THINK.finditer(reading.text)]
    out = []
    for match in _ANSWER_TAG.finditer(reading.text):
        if not (reading.counts(match.start()) and reading.counts(match.end() - 1)):
            continue
        if any(a <= match.start() < b for a, b in thinking):
            continue  # the format named in the reasoning
        if "\n" not in match[1].strip():  # one line: the tag is the statement, its content the value
            out.append(
                Statement(match.start(), match.end(), _shown_value(reading, match.start(1), match.end(1)), "marker")
            )
            continue
        if "\\begin" in match[1] or "\\\\" in match[1]:  # a matrix or aligned rows over lines: one value
            content = " ".join(_shown_value(reading, match.start(1), match.end(1)).split())
            out.append(Statement(match.start(), match.end(), content, "marker"))
            continue
        lines = []
        for line in re.finditer(r"[^\n]*\S[^\n]*", match[1]):
            start, end = match.start(1) + line.start(), match.start(1) + line.end()
            lines.append(Statement(start, end, _shown_value(reading, start, end), "marker"))
        stating = [s for s in lines if _is_value_line(s.value) or _ANSWER_WORD.search(s.value)]
        numbered = [s for s in lines if re.search(r"\d", s.value)]
        out += stating or numbered[-1:] or lines[-1:] or [Statement(match.start(), match.end(), "", "marker")]
    return out


_LINE = re.compile(r"[^\n]+")
_REVISING = re.compile(r"[\W_]*(?:revised|updated|corrected)\s+answer\b", re.IGNORECASE)
# The thinking of reasoning models: <think> (DeepSeek-R1, Qwen3), <thinking>, <reasoning>,
# [THINK] (Magistral), ◁think▷ (Kimi).
_THINK_TAG = re.compile(r"<\s*/?\s*(?:think|thinking|reasoning)\s*>|\[/?THINK\]|◁/?think▷", re.IGNORECASE)


def _revises(reading: Reading, statement: Statement) -> bool:
    """Whether a statement is a revised answer that states a value alone (``Revised answer: 42``)."""
    if not _REVISING.match(reading.text, statement.start, statement.end):
        return False
    return not is_prose(statement.value) or is_number_phrase(statement.value)


def _reasoning(reading: Reading) -> list[tuple[int, int]]:
    """The spans of a reasoning model's thinking when it answers after it: each opening tag to
    its close (a close without an opening tag thinks from the start, or from the close before
    it, as chat templates of reasoning models put the opening tag in the prompt); none when no
    visible text follows the last close or the thinking is left open at the end."""
    spans: list[tuple[int, int]] = []
    opened: int | None = None
    for match in _THINK_TAG.finditer(reading.text):
        if not reading.counts(match.start()):
            continue
        if "/" not in match[0]:
            opened = match.start() if opened is None else opened
        else:
            spans.append((opened if opened is not None else (spans[-1][1] if spans else 0), match.end()))
            opened = None
    if opened is not None or not spans or not reading.shown(spans[-1][1], len(reading.text)).strip():
        return []
    return spans


def _inside(spans: list[tuple[int, int]], pos: int) -> bool:
    """Whether ``pos`` falls in one of ``spans`` (sorted, apart)."""
    index = bisect.bisect_right(spans, (pos, float("inf"))) - 1
    return index >= 0 and spans[index][0] <= pos < spans[index][1]


def _drafts_in(reading: Reading, thinking: list[tuple[int, int]], marker: str | None) -> bool:
    """Whether the thinking holds a box or a marker: a draft answer."""
    pattern = _marker_pattern(marker) if marker else None
    text = reading.text
    return any(_BOX.search(text, a, b) or (pattern and pattern.search(text, a, b)) for a, b in thinking)


_ANSWER_WORD = re.compile(r"\b(?:answer|correct|result|final|expected|solution)\b.*\d", re.IGNORECASE)


def _is_value_line(line: str) -> bool:
    """A line that is a value alone: a number, a box, number words, or a short label and one."""
    label = re.match(r"[^\W\d_][^:\n]{0,30}:\s*", line)
    rest = line[label.end() :] if label else line
    return bool(
        _BARE_VALUE.fullmatch(rest) or re.fullmatch(r"\s*\\boxed\s*\{.*\}\s*\.?\s*", rest) or is_number_phrase(rest)
    )


def _phrases(reading: Reading, since: int = 0) -> list[Statement]:
    """The answer phrases from ``since`` on (``the answer is 42``)."""
    out = []
    for match in _PHRASE.finditer(reading.text, since):
        if reading.counts(match.start()):
            _, start, end = _line_value(reading.text, match.end())
            value = _shown_value(reading, start, end)
            if value:
                out.append(Statement(match.start(), end, value, "phrase"))
    return out


def _bare_lines(reading: Reading, since: int = 0) -> list[Statement]:
    """Lines that are a number alone (in digits or number words), and the last line when it is
    short, no injected label and, beside bare numbers, no prose (``42\n\nI used 6 rows.``
    answers 42; ``41\n42`` and ``42\nforty-one`` hedge); from ``since`` on."""
    lines = []
    for match in _LINE.finditer(reading.text, since):
        start = match.start() + len(match[0]) - len(match[0].lstrip())
        if match[0].strip() and reading.counts(start):
            lines.append((start, match.end()))
    out = []
    working = _written_working(reading.text, lines)
    for index, (start, end) in enumerate(lines):
        text = reading.text[start:end]
        if index in working:
            continue
        if _BARE_NUMBER.fullmatch(text) or (len(text) <= _FINAL_LINE_CHARS and is_number_phrase(text)):
            out.append(Statement(start, end, _shown_value(reading, start, end), "line"))
    for start, end in reversed(lines):  # the last line that is no injected label nor empty words
        line = _shown_value(reading, start, end)
        if not line or len(line) > _FINAL_LINE_CHARS or is_judge_format_line(line) or is_content_free(line):
            if line and len(line) > _FINAL_LINE_CHARS:
                break  # the response ends in prose: no short last line
            continue
        if all(s.start != start for s in out) and (not out or states_a_value(line)):
            out.append(Statement(start, end, line, "line"))  # after every bare number line
        break
    return out


_RULE_LINE = re.compile(r"[ \t]*(?:-{3,}|={3,}|_{3,}|[—–]{2,}|\\hline)[ \t]*")
_OPERAND_LINE = re.compile(r"[ \t]*(?:[+×*·÷x]|[-−](?=[ \t]))[ \t]*\d")
_ENUMERATOR = re.compile(r"[ \t]*(\d{1,3})[.)][ \t]*")


def _written_working(text: str, lines: list[tuple[int, int]]) -> set[int]:
    """The indices of ``lines`` that are working written out, not answers: the numbers of a
    column computation above its last rule (``12`` / ``+ 30`` / ``---`` / ``42``: the operands,
    not the result; it needs an operand line and a result) and enumerators counting up from 1
    (``1.`` / ``2.`` / ``3.``)."""
    working: set[int] = set()
    block: list[int] = []  # consecutive non-empty lines
    for index, (start, _end) in enumerate([*lines, (len(text), len(text))]):
        if block and (index == len(lines) or text.count("\n", lines[block[-1]][1], start) > 1):
            rules = [i for i in block if _RULE_LINE.fullmatch(text[lines[i][0] : lines[i][1]])]
            operands = [i for i in block if _OPERAND_LINE.match(text[lines[i][0] : lines[i][1]])]
            # An operand line above the last rule and a result below it: a computation written
            # out ("41" / "---" / "42" alone is two answers with a line between).
            if rules and operands and operands[0] < rules[-1] < block[-1]:
                working.update(i for i in block if i < rules[-1])
            block = []
        block.append(index)
    counts = {i: int(m[1]) for i, (s, e) in enumerate(lines) if (m := _ENUMERATOR.fullmatch(text[s:e]))}
    for i, n in counts.items():  # a run that counts up from 1 ("41." / "42." are two answers)
        if n == 1 and counts.get(i + 1) == 2:
            run = i
            while counts.get(run) == counts[i] + run - i:
                working.add(run)
                run += 1
    return working


def _withdrawn(reading: Reading, statement: Statement, until: int, answered_again: bool = False) -> bool:
    """Whether the statement is negated before it or withdrawn in what follows it (reconsidered,
    when ``answered_again``: another statement follows)."""
    text = reading.text
    before = re.sub(r"[$*`(\\\[]+$", "", text[max(0, statement.start - 80) : statement.start].rstrip()) + " "
    if _NEGATED_BEFORE.search(before) or re.match(r"(?:not|never)\b\s*\S", statement.value, re.IGNORECASE):
        return True
    after = text[statement.end : min(until, statement.end + _NEAR, reading.sentence_end(statement.end, 2))]
    return _WITHDRAWN_AFTER.search(after) is not None or (
        answered_again and _RECONSIDERED_AFTER.search(after) is not None
    )


_ALTERNATIVE_WORDS = r"or|maybe|perhaps|possibly|alternatively|oder|ou|или|或者?|または"
_ALTERNATIVE = rf"(?:{_ALTERNATIVE_WORDS})\b"
_UNTIL_SENTENCE_END = r"(?:[^.!?\n]|[.!?](?![\s)]|$))*"
_AFTERTHOUGHT = re.compile(rf"^[\s,;.:()\[\]*$]*{_ALTERNATIVE}({_UNTIL_SENTENCE_END})", re.IGNORECASE)
_NEXT_SENTENCE = re.compile(rf"[.!?]\s+{_ALTERNATIVE}({_UNTIL_SENTENCE_END})", re.IGNORECASE)


# A correction or an alternative that states a value, anywhere after the statement: "P.S.
# Actually 41.", "Make that 41.", a paragraph "Alternatively: 41." Its value must be a bare
# value: "Actually, this took 3 steps" and "Actually, $w = 3$" (working) offer nothing. A match
# starts at a sentence's or a line's first character only (linear in a run of blank lines).
_CORRECTION = re.compile(
    r"(?:^|[.!?]\s+|(?<!\s)\n\s*)(?:p\.?\s?s\.?[:,]?\s*)?(?:actually|correction|corrected|i\s+mean|"
    rf"or\s+rather|rather|make\s+(?:that|it)|{_ALTERNATIVE_WORDS})\b[\s,:;.—–-]*"
    r"(?:(?:it'?s|it\s+is|that'?s|the\s+(?:final\s+)?(?:answer|result)\s+is|should\s+be|is)\s+)?"
    rf"({_UNTIL_SENTENCE_END})",
    re.IGNORECASE,
)


# Another value offered beside the statement in other words: "(b) could also be 5", "I'd also
# accept 41", "It could equally be 41", "But wait, it might be 41", "41 is also fine", "if the
# corners are shared; otherwise 41".
_ALSO = re.compile(
    r"\b(?:could|might|may|can|would)\s+(?:also|equally|just\s+as\s+well)\s+be\s+"
    rf"({_UNTIL_SENTENCE_END})|\b(?:also|equally)\s+accept\s+({_UNTIL_SENTENCE_END})"
    r"|\b(?:it|that|this|the\s+answer)\s+(?:might|may|could)\s+(?:instead\s+|actually\s+|well\s+)?be\s+"
    rf"({_UNTIL_SENTENCE_END})"
    # ... or after it: "41 is also fine", "(41 would be equally valid)"
    r"|(?<![\w.,/=])(?<![\w=] )([-−+]?\d[\d.,/]*%?)\s+(?:(?:is|are|(?:would|will)\s+be)\s+(?:also|equally|just\s+as)"
    r"|(?:would|will|could|might|may)\s+(?:also|equally)\s+be)\s+"
    r"(?:\w+\s+)?(?:correct|fine|acceptable|valid|right|possible|ok|okay|true|good)\b"
    # ... or in another case: "\\boxed{42} if the corners are shared, otherwise 41", "in which case 41"
    r"|\b(?:otherwise|else|in\s+which\s+case|if\s+not)\b[\s,:]*(?:it'?s\s+|it\s+is\s+|the\s+answer\s+is\s+)?"
    rf"({_UNTIL_SENTENCE_END})",
    re.IGNORECASE,
)
_RELATION_SIGN = re.compile(r"=|\\(?:approx|to)\b|[≈→⇒<>≤≥]")


def offered_also(text: str) -> list[str]:
    """The values ``text`` offers in other words (:data:`_ALSO`: ``41 is also fine``)."""
    found = (m[m.lastindex or 0] for m in _ALSO.finditer(text))
    return [c for c in found if c.strip() and not is_prose(c) and not _RELATION_SIGN.search(c)]


def afterthoughts(reading: Reading, statement: Statement, until: int) -> list[str]:
    """What a statement offers besides its value after it: ``\\boxed{42} or 41``, a sentence of
    its paragraph that opens with an alternative (``The answer is 41. Or 42.``), and a later
    correction that states a value (``P.S. Actually 41.``)."""
    until = min(until, statement.end + _NEAR)
    paragraph_end = reading.text.find("\n\n", statement.end, until)
    end = until if paragraph_end < 0 else paragraph_end
    after = reading.shown(statement.end, end)
    # "(or equivalently $x - 2 = 0$)" relates, it offers nothing.
    found = [
        m[1]
        for pattern in (_AFTERTHOUGHT, _NEXT_SENTENCE)
        for m in pattern.finditer(after)
        if not _RELATION_SIGN.search(m[1])
    ]
    rest = reading.shown(statement.end, until)
    corrections = [m[m.lastindex or 0] for pattern in (_CORRECTION, _ALSO) for m in pattern.finditer(rest)]
    return found + [c for c in corrections if c.strip() and not is_prose(c) and not _RELATION_SIGN.search(c)]


def find_statements(
    reading: Reading, marker: str | None = "Answer:", boxed: bool = True, implicit: bool = True
) -> list[Statement]:
    """Every final-answer statement of a response, in order, withdrawn ones marked.

    Args:
        reading: The response as read (:func:`nemo_genrm.prompts.reading.read`).
        marker: The answer marker (a line-leading label); ``None`` or ``""`` disables it.
        boxed: Whether boxes count.
        implicit: Whether, without a box or marker, answer phrases and bare lines count.

    Returns:
        The statements of the first kind found (explicit, else phrases, else bare lines); when a
        reasoning model answers after its thinking (``</think>``), those after it only.
    """
    boxes = _boxes(reading) if boxed else []
    markers = sorted(_markers(reading, marker) + _answer_tags(reading), key=lambda s: s.start) if marker else []
    explicit = []
    for statement in markers:  # a box on a marker's line (or in an answer tag) is that statement's value
        line_end = reading.text.find("\n", statement.end)
        line_end = len(reading.text) if line_end < 0 else line_end
        if reading.text.startswith("<", statement.start):
            line_end = statement.end  # a one-line answer tag: its own box only
        inside = [b for b in boxes if statement.start <= b.start < line_end]
        if inside:
            boxes = [b for b in boxes if b not in inside]
            statement = Statement(statement.start, max(statement.end, inside[-1].end), inside[-1].value, "marker")
        explicit.append(statement)
    found = sorted(explicit + boxes, key=lambda s: s.start)
    thinking = _reasoning(reading)
    if thinking:  # drafts in the reasoning state nothing once the response answers after it
        outside = [s for s in found if not _inside(thinking, s.start)]
        # Thinking after an answer is no draft of it: what it states counts (and may hedge).
        answered = [s for s in found if not _inside(thinking, s.start) or s.start > outside[0].start] if outside else []
        if not answered and implicit:
            after = thinking[-1][1]
            next_line = reading.text.find("\n", after) + 1 or len(reading.text)  # a line glued to the tag is none
            answered = _phrases(reading, after) or [
                s for s in _bare_lines(reading, next_line) if _BARE_NUMBER.fullmatch(s.value) or states_a_value(s.value)
            ]
        found = answered or found
    if not found and implicit:
        found = _phrases(reading) or _bare_lines(reading)
    out = []
    for i, statement in enumerate(found):
        until = found[i + 1].start if i + 1 < len(found) else len(reading.text)
        # "Revised answer: 42" after a statement withdraws it, as "Scratch that" would, when it
        # states a value ("Revised answer: it could also be 42" offers one beside it).
        revised = i + 1 < len(found) and _revises(reading, found[i + 1])
        withdrawn = bool(revised) or _withdrawn(reading, statement, until, answered_again=i + 1 < len(found))
        # "41, not 42" states 41: the value it rules out is neither offered nor verified.
        value = without_ruled_out(statement.value)
        out.append(Statement(statement.start, statement.end, value, statement.source, withdrawn))
    return out


# A later answer phrase counts when its first clause is a bare value: a number (a sign, a
# fraction, a percent, math or bold around it) or number words without a scale word; a unit
# may convert ("5.5 hours" after 330 minutes) and is left to the judge.
_BARE_VALUE = re.compile(
    r"\s*(?:\$|\\\(|\*\*)?\s*[-−+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+)?\s*(?:\\?%)?"
    r"\s*(?:\$|\\\)|\*\*)?\s*\.?\s*",
)
_LATER_ANSWER = re.compile(
    r"\b(?:(?:the|my|our)\s+)?(?:(?:final|correct|right|true|actual|real)\s+)?(?:answer|final\s+result)\s+"
    r"(?:is|=(?!>))\s*:?\s*",
    re.IGNORECASE,
)
# Words that stress a value without changing it: "the answer is really 41", "is therefore 41".
_STRESS_BEFORE = re.compile(
    r"(?:really|actually|therefore|thus|hence|then|indeed|definitely|clearly|certainly|obviously|surely|in\s+fact|"
    r"still|just|simply|now|truly|undoubtedly)\s+(?=[-−+$\\*]?\d)",
    re.IGNORECASE,
)
_LATER_LOOKS = 32
_WORD_RUN = re.compile(r"[^\W_]+(?:-[^\W_]+)*")
_SCALE_WORD = re.compile(r"\b(?:hundred|thousand|million|billion|trillion)\b", re.IGNORECASE)
# What may follow a later answer's value for it to state that value: stressing words ("41 exactly",
# "41 for sure"), at most one word naming it ("41 apples"), a bracketed remark without numbers
# ("41 (after the fix)"). Anything longer or with a number is prose the judge reads ("12 for n =
# 3", "3 degrees below zero", "1 hour and 30 minutes", "5! = 120"), and so are words that make it
# another quantity ("4 cubed", "1 half", "1 thousand", "4 times 10").
_STRESS_AFTER = (
    r"(?:exactly|precisely|indeed|definitely|certainly|surely|really|truly|clearly|obviously|then|"
    r"again|too|instead|overall|in\s+total|in\s+fact|after\s+all|for\s+(?:sure|certain|real)|final(?:ly)?)"
)
_SHORT_REST = re.compile(
    rf"\s*(?:(?!{_STRESS_AFTER}\b)[^\W\d_]+(?:-[^\W\d_]+)?)?(?:\s*,?\s*\b{_STRESS_AFTER}\b)*"
    r"(?:\s*\([^()\d]*\))?\s*[.!]?\s*",
    re.IGNORECASE,
)
_OTHER_QUANTITY_WORD = re.compile(
    r"^\s*(?:squared|cubed|factorial|halves|half|thirds?|quarters?|fourths?|fifths?|sixths?|sevenths?|eighths?|"
    r"ninths?|tenths?|hundredths?|thousandths?|percent|per\s?cent|hundred|thousand|million|billion|trillion|"
    r"dozens?|times|plus|minus|more|less|fewer)\b",
    re.IGNORECASE,
)
# A sentence that checks, rounds or answers another part or question is no second final answer.
_OTHER_PART = re.compile(
    r"\bpart\b|\([a-z]\)|\b[a-z]\)|\bquestion\b|^\s*\d{1,2}[.)]\s|\b(?:check|verif|round|nearest|approx|estimat)",
    re.IGNORECASE | re.MULTILINE,
)


def _later_phrases(reading: Reading, final: Statement, stated: set[Key]) -> list[Statement]:
    """The answer phrases after an explicit final statement that state another number alone
    (``\\boxed{42}`` then ``The answer is 41.``): each is a further final answer, compared with
    it. A phrase whose first clause is more than a number (``the answer is 12 for n = 3``,
    ``roughly 1.414``, ``5.5 hours``, ``1 thousand``), one in a sentence that checks, rounds or
    answers another part, one after a final that is no number, and one that restates a value
    already stated (``25%`` after ``0.25``, ``0.667`` after ``2/3``) state none."""
    if not stated or any(kind == "t" for kind, _ in stated):
        return []  # a symbolic or lettered final (\\sqrt{2}, C): a decimal after it is the judge's to read
    out: list[Statement] = []
    for looked, match in enumerate(_LATER_ANSWER.finditer(reading.text, final.end)):
        if out or looked >= _LATER_LOOKS:
            break  # one new value hedges; past a few dozen phrases the rest is noise
        _, start, end = _line_value(reading.text, match.end())
        phrase = Statement(match.start(), end, _shown_value(reading, start, end), "phrase")
        if not reading.counts(match.start()) or _withdrawn(reading, phrase, len(reading.text)):
            continue
        opening = min(reading.sentence_start(phrase.start), reading.text.rfind("\n", 0, phrase.start) + 1)
        if _OTHER_PART.search(reading.text[opening : phrase.end]):
            continue  # "For part (b), the answer is 6", "Rounded, the answer is 3"
        said = without_ruled_out(phrase.value[:400])  # a phrase is short; past this is prose
        clause = _leading_value(re.split(r"[;,]\s", said, maxsplit=1)[0])
        if clause is None or _restates(said, stated, final.value):
            continue  # "7 pairs, i.e. 14 socks" after \\boxed{14}: the value again, in other units
        keys = {k for k in value_keys(clause) if k[0] != "t"}
        if keys and not all(any(same_value(k, s, f"{clause} {final.value}") for s in stated) for k in keys):
            out.append(Statement(phrase.start, phrase.end, clause, phrase.source))
    return out


def _restates(said: str, stated: set[Key], final: str) -> bool:
    """Whether a later answer phrase names the final value anywhere (``7 pairs, i.e. 14 socks``,
    ``1.5 hours, or 90 minutes`` after ``\\boxed{14}``, ``\\boxed{90}``): a conversion, no second answer."""
    for number in re.findall(r"\d+(?:\.\d+)?", said[:200]):  # a phrase is short; past this is prose
        if any(same_value(k, s, f"{number} {final}") for k in value_keys(number) if k[0] != "t" for s in stated):
            return True
    return False


def _leading_value(clause: str) -> str | None:
    """The value a later answer phrase's first clause states: the clause when it is a value alone
    (``41``, ``forty-one``), the value it opens with when what follows only stresses or names it
    (:data:`_SHORT_REST`: ``41 exactly``, ``41 apples``, ``41 (after the fix)``), ``None`` when
    more follows (``12 for n = 3``, ``4 cubed``, ``1 thousand``) or the clause opens with words
    (``roughly 1.414``)."""
    clause = clause[stress.end() :] if (stress := _STRESS_BEFORE.match(clause)) else clause
    if _BARE_VALUE.fullmatch(clause) or is_number_phrase(clause):
        return None if _SCALE_WORD.search(clause) else clause
    lead = _BARE_VALUE.match(clause)
    words = list(_WORD_RUN.finditer(clause))
    if lead is None or not lead.group().strip():
        # number words then other words: "forty-one exactly"
        count = next((i for i, m in enumerate(words) if not is_number_phrase(m[0])), len(words))
        if not count or words[0].start() > 0:
            return None
        value, rest = clause[: words[count - 1].end()], clause[words[count - 1].end() :]
    else:
        if lead.group().rstrip().endswith("."):
            return None  # "41. Then ..." ends the value's sentence: cut before here, not stated alone
        value, rest = clause[: lead.end()], clause[lead.end() :]
    if not rest.strip() or _SCALE_WORD.search(value) or _OTHER_QUANTITY_WORD.match(rest):
        return None
    if not value[-1:].isspace() and not rest[:1].isspace() and not re.fullmatch(r"[.!]\s*", rest):
        return None  # glued to what follows: "5! = 120", "2³", "6(7)" (a sentence's "!" ends it)
    return value.strip() if _SHORT_REST.fullmatch(rest) else None


# ------------------------------------------------------------------------------------ windows
def _window_start(reading: Reading, statements: list[Statement], final: Statement) -> int:
    """The paragraph of the first statement that led to the final one (the withdrawn attempts
    right before it); a sentence start when that paragraph is long."""
    first = final
    for statement in reversed(statements[: statements.index(final)]):
        if not statement.withdrawn:
            break
        first = statement
    start = reading.paragraph_start(first.start)
    return start if first.start - start <= 400 else reading.sentence_start(first.start)


def _cut_window(reading: Reading, start: int, anchor: int, max_chars: int) -> str:
    """``reading``'s text from ``start`` on, cut around an elision mark to ``max_chars``: the
    part up to ``anchor`` (the end of the final statement's sentence) first, then the end."""
    whole = reading.shown(start, len(reading.text)).strip()
    if len(whole) <= max_chars:
        return whole
    head = reading.shown(start, anchor).lstrip()
    budget = max_chars - len(ELISION)
    if budget < 2 * len(ELISION):  # no room for context: the end of the final statement's sentence
        return head.rstrip()[-max_chars:].strip()
    if len(head) > budget * 2 // 3:  # keep the statement's own sentence, cut in front of it
        head = head[len(head) - budget * 2 // 3 :]
        head = head[head.find(" ") + 1 :] if " " in head[:40] else head
    room = budget - len(head)
    after = reading.shown(anchor, len(reading.text)).rstrip()
    follow, end = after[: room // 2], after[len(after) - (room - room // 2) :]
    return (head + follow).rstrip() + ELISION + end.lstrip()


# ----------------------------------------------------------------------------------- extracting
def extract_answer(
    text: object,
    *,
    marker: str | None = "Answer:",
    boxed: bool = True,
    tail_chars: int = 300,
    max_chars: int = 1000,
    reference: str | None = None,
) -> ExtractedAnswer:
    """Find the final answer of a policy response and what of it the judge is shown.

    See the module docstring for the rules. Bad input never raises.

    Args:
        text: The policy's response.
        marker: Answer marker, counted as a line-leading label; ``None`` or ``""`` disables it.
        boxed: Whether ``\\boxed{...}`` (and ``\\fbox``, ``\\framebox``) count.
        tail_chars: With no statement at all, the judge is shown the whole response when it
            fits ``max_chars``, else its last this many characters from a sentence start. 0:
            only a marker or a box states an answer, and a response with neither is ``no_answer``.
        max_chars: The most characters the judge is shown; a longer window is cut around the
            final answer (never refused).
        reference: The reference answer: an answer may offer as many values as it holds
            (1 when ``None``), and a slash between whole numbers is a fraction only when it is
            no whole number itself.

    Returns:
        The extracted answer; ``text=None`` with the reason when nothing is judged.

    Raises:
        ValueError: ``tail_chars`` is negative or ``max_chars`` is below 1.
    """
    if tail_chars < 0 or max_chars < 1:
        raise ValueError(f"need tail_chars >= 0 and max_chars >= 1, got {tail_chars}, {max_chars}")
    if not isinstance(text, str):
        return ExtractedAnswer(None, Reason.NO_ANSWER, None)
    reading = read(text)
    statements = find_statements(reading, marker, boxed, implicit=tail_chars > 0)
    if not statements:
        return _tail(reading, tail_chars, max_chars)
    counted = [s for s in statements if not s.withdrawn]
    final = counted[-1] if counted else statements[-1]
    if counted and final.source in ("marker", "boxed") and (not final.value or is_content_free(final.value)):
        return ExtractedAnswer(None, Reason.NO_ANSWER, final.source)  # it promised an answer and gave none
    thinking = _reasoning(reading)
    slash = is_whole_number(reference)
    decimal = reference_count(reference) == 1  # "3,5" is 3.5: two values would be a hedge anyway
    offered: set[Key] = set()
    starts = [s.start for s in statements]
    for statement in counted:
        keys = value_keys(statement.value, slash_alternatives=slash, decimal_comma=decimal)
        offered |= keys
        index = bisect.bisect_right(starts, statement.start)
        until = starts[index] if index < len(starts) else len(reading.text)
        # "or 41", "or no", never "or maybe not"; and one in the statement's own remark ("Answer:
        # 42 (41 is also fine)"), which the value's reading leaves out as no offer.
        also = offered_also(statement.value)
        if also and not keys:
            # the value before the remark, which a remark with a number in words hides ("42 (41 is ...")
            head = statement.value[: _ALSO.search(statement.value).start()].rstrip(" \t([{,;:")
            offered |= value_keys(head, slash_alternatives=slash, decimal_comma=decimal)
        for extra in afterthoughts(reading, statement, until) + also:
            prose = is_prose(extra) and not POLAR.fullmatch(extra)
            offered |= {k for k in value_keys(extra, slash_alternatives=slash) if k[0] != "t" or not prose}
    if counted and final.source in ("marker", "boxed"):  # "\\boxed{42}. The answer is 41.": a second final
        for phrase in _later_phrases(reading, final, set(offered)):
            offered |= {k for k in value_keys(phrase.value, slash_alternatives=slash) if k[0] != "t"}
    left = _left_after_withdrawal(reading, statements[-1], slash) if not counted else set()
    if len(left) > reference_count(reference):  # every statement withdrawn, then "41 or 42"
        offered |= left
    shown_values = tuple(sorted(str(v) + ("%" if k == "%" else "") for k, v in offered))
    # A value restated in another notation is one ("1/2, i.e. 0.5", "\\boxed{1/4} (25%)").
    distinct = distinct_values(offered, limit=reference_count(reference))
    if len(distinct) > reference_count(reference) and not _states_the_reference_ratio(counted, offered, reference):
        return ExtractedAnswer(None, Reason.HEDGED, final.source, offered=shown_values)
    # A reference of several values answered one statement each ("(a) \\boxed{3} (b) \\boxed{4}",
    # "x = \\boxed{3} and x = \\boxed{-3}"): the judge is shown them all, the verifier reads them together.
    several = (
        len(distinct) > 1
        and len({s.value for s in counted}) > 1
        and is_value_list(reference)  # a list of values, not the bounds of an inequality or a union
        and not _offered_as_alternatives(reading, counted)
    )
    lead = counted[0] if several else final
    start = _window_start(reading, statements, lead)
    if thinking and lead.start >= thinking[-1][1] and _drafts_in(reading, thinking, marker):
        start = max(start, thinking[-1][1])  # the drafts are not shown beside the answer after them
    window = _cut_window(reading, start, reading.sentence_end(final.end), max_chars)
    if not window or is_content_free(window):
        return ExtractedAnswer(None, Reason.NO_ANSWER, final.source)
    # A last line of prose ("It is 41.") frames the answer for the judge but states no bare value;
    # one in number words ("42 thousand", "forty-two") states one, for a value verifier to read.
    stated = final.source != "line" or states_a_value(final.value)
    # A draft in the reasoning, with prose after the reasoning and no statement: the judge reads
    # the two. The verifier reads the draft when that prose holds no number ("I hope this helps!"),
    # and nothing when it does ("I'll answer 41."): the draft may not be the final value.
    drafted = bool(thinking) and all(_inside(thinking, s.start) for s in statements)
    after_thinking = reading.shown(thinking[-1][1], len(reading.text)) if thinking else ""
    value = final.value if counted and stated and not (drafted and re.search(r"\d", after_thinking)) else None
    if several and value is not None:
        value = ", ".join(dict.fromkeys(_ASSIGNED.sub("", s.value) for s in counted))  # "x=3, x=-3" is "3, -3"
    elif value is not None and len(distinct) == 1 < len(offered):
        # One value stated twice, exactly and rounded ("\\boxed{\\frac{2}{3}} \\approx \\boxed{0.667}"):
        # the verifier reads the exact one, which a rounding would make "different".
        exact = [s.value for s in counted if not re.search(r"\d\.\d", s.value)]
        value = exact[-1] if exact else value
    if value is not None and decimal:
        value = with_decimal_points(value)  # the verifier reads "3,5" as the extraction did
    # The statement the defence leaves unquoted: an explicit one, or a bare value line ("1").
    statement = reading.text[final.start : final.end].strip() if counted and value is not None else None
    # After the value, not the statement: a marker's line may go on after its box ("Answer:
    # \\boxed{42} I mistyped; I meant 41").
    found = reading.text.find(final.value, final.start, final.end) if final.value else -1
    value_end = found + len(final.value) if found >= 0 else final.end
    words_after = bool(_PUNCTUATION.sub("", reading.shown(value_end, len(reading.text))))
    return ExtractedAnswer(window, "ok", final.source, value, statement, shown_values, words_after)


# What may close a final statement without saying anything more: punctuation, closing brackets,
# emphasis and math delimiters ("\\boxed{42}.$$", "**Answer: 42**").
_PUNCTUATION = re.compile(r"(?:\\end\{[a-z*]+\}|[\s.,;:!)\]}*_$`'\"”’»>|\\])+")


_ASSIGNED = re.compile(r"^\s*[A-Za-z]\s*=\s*(?=\S)")
# Words that offer a statement in place of another ("x = 3 or x = -3" lists roots: "or" is not one).
_OFFERED_INSTEAD = re.compile(r"\b(?:alternatively|otherwise|instead|else|maybe|perhaps|possibly)\b", re.IGNORECASE)


def _offered_as_alternatives(reading: Reading, counted: list[Statement]) -> bool:
    """Whether a later statement opens as an alternative to an earlier one (``\\boxed{1}``, then
    ``Alternatively \\boxed{2}``): the two are then one answer offered twice, not two parts."""
    for statement in counted[1:]:
        opening = reading.text[reading.sentence_start(statement.start) : statement.start]
        if _OFFERED_INSTEAD.search(opening):
            return True
    return False


def _left_after_withdrawal(reading: Reading, last: Statement, slash: bool) -> set[Key]:
    """The numbers what follows the last statement offers when every statement is withdrawn
    (``\\boxed{41}`` then ``Scratch that: 41 or 42.``): more than the reference holds are a
    hedge. One is not taken for the answer: a withdrawal read where there is none (``Actually,
    this took 3 steps.``) would make a remark's number the value the verifier reads."""
    rest = reading.shown(last.end, len(reading.text))
    return {key for key in value_keys(rest, slash_alternatives=slash) if key[0] != "t"}


def _states_the_reference_ratio(counted: list[Statement], offered: set[Key], reference: str | None) -> bool:
    """Whether the response's one statement is a ratio whose value is the reference's (``2 to
    3`` against ``2/3``): its two numbers are then one value, not a range."""
    if len(counted) != 1 or reference is None or offered != set(value_keys(counted[0].value)):
        return False
    ratio = ratio_key(counted[0].value)
    return ratio is not None and value_keys(reference) == {ratio}


def _tail(reading: Reading, tail_chars: int, max_chars: int) -> ExtractedAnswer:
    """No statement at all: the whole response when it fits ``max_chars``, else its end from a
    sentence start."""
    if not tail_chars:
        return ExtractedAnswer(None, Reason.NO_ANSWER, "tail")
    start = max(0, len(reading.text) - tail_chars) if len(reading.shown(0, len(reading.text))) > max_chars else 0
    if start:
        start = reading.sentence_start(start) if reading.sentence_start(start) >= start - 80 else start
    window = _cut_window(reading, start, len(reading.text), max_chars)
    if not window or is_content_free(window):
        return ExtractedAnswer(None, Reason.NO_ANSWER, "tail")
    return ExtractedAnswer(window, "ok", "tail")
