"""What a reader of a response sees, and where its statements can count.

A response is read as it renders and as a person reads it (:func:`read`):

- **hidden** text renders as nothing: LaTeX comments (``%`` to the end of the line, unless it is
  a percent sign right after a number outside math, ``42%``, or ``42 %`` with no LaTeX after it), ``\\iffalse ... \\fi``, the ``comment``
  environment, ``\\phantom`` and its kin, text coloured white or transparent (``\\color``,
  ``\\textcolor``, ``\\mathcolor``), HTML comments and elements styled invisible. A statement in
  hidden text does not count, and hidden text is left out of what the judge is shown;
- **inert** text is visible but states nothing on the writer's behalf: code (fenced blocks and
  inline spans), quotations (Markdown ``>`` lines, double-quoted strings in any script's
  quotation marks) and URLs. A box or marker there does not count; the judge still sees it.

:class:`Reading` also knows the response's sentences and paragraphs, which the window shown to
the judge is cut along.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

__all__ = ["Reading", "brace_pairs", "matching_brace", "read"]

# A fence opens with its whole run of backticks or tildes (possessive, as CommonMark reads it, and
# so a long run with no line break after it is not tried again at every shorter length).
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}+|~{3,}+)[^\n]*\n.*?(?:^[ \t]{0,3}\1[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"(?<!`)(`+)(?!`)(?:(?!\n[ \t]*\n).)+?(?<!`)\1(?!`)", re.DOTALL)
_BLOCKQUOTE = re.compile(r"^[ \t]{0,3}>[^\n]*", re.MULTILINE)
_QUOTED = re.compile(
    r'"[^"\n]{1,400}"|“[^”\n]{0,400}”|„[^“”\n]{0,400}[“”]|«[^»\n]{0,400}»|「[^」]{0,400}」|『[^』]{0,400}』'
    r"|``[^\n]{0,400}?''"
)
_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>\"]+|\bwww\.[^\s<>\"]+", re.IGNORECASE)
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_HIDDEN_STYLE = (
    r"display\s*:\s*none|visibility\s*:\s*hidden|opacity\s*:\s*0(?:\.0*)?\b|font-size\s*:\s*0|"
    r"color\s*:\s*(?:white|transparent|#fff(?:fff)?\b)"
)
_HIDDEN_ELEMENT = re.compile(
    rf"<(\w+)\b[^<>]*?(?:\bhidden\b|style\s*=\s*[\"'][^\"']*?(?:{_HIDDEN_STYLE})[^\"']*[\"'])[^<>]*>.*?(?:</\1\s*>|\Z)",
    re.IGNORECASE | re.DOTALL,
)
_IFFALSE = re.compile(r"\\iffalse\b.*?(?:\\fi\b|\Z)", re.DOTALL)
_COMMENT_ENV = re.compile(r"\\begin\s*\{comment\}.*?(?:\\end\s*\{comment\}|\Z)", re.DOTALL)
_PHANTOM = re.compile(r"\\(?:[hv]?phantom)\s*\{")
_COLOURED = re.compile(r"\\(?:textcolor|mathcolor|color)\s*(?:\[[^\]]*\])?\s*\{([^{}]*)\}")
_INVISIBLE_COLOURS = frozenset(("white", "transparent", "#fff", "#ffffff", "fff", "ffffff", "1,1,1", "255,255,255"))
# Where math opens; :func:`_math_spans` finds where each closes.
_MATH_OPEN = re.compile(r"\$\$|\\\[|\\begin\s*\{(equation|align|gather|multline|math)\*?\}|(?<![\\$])\$(?!\$)")
_INLINE_MATH_REST = re.compile(r"[^$\n]+?(?<!\\)\$")
_PERCENT = re.compile(r"(?<!\\)%")
_LINE_BREAKS = re.compile(r"\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])(?![.!?。！？])(?=\s|$)|\n")


# A backslash escapes the character after it (that character is consumed with it).
_BRACE_OR_ESCAPE = re.compile(r"\\[\s\S]|[{}]")


def brace_pairs(text: str) -> dict[int, int]:
    """Every balanced group: offset just after an unescaped ``{`` -> offset of its ``}`` (one pass)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for match in _BRACE_OR_ESCAPE.finditer(text):  # only braces and escapes are visited
        char, i = match[0], match.start()
        if char == "{":
            stack.append(i + 1)
        elif char == "}" and stack:
            pairs[stack.pop()] = i
    return pairs


def matching_brace(text: str, start: int, pairs: dict[int, int] | None = None) -> int | None:
    """Offset of the ``}`` that closes the group opened just before ``start``, else ``None``."""
    return (brace_pairs(text) if pairs is None else pairs).get(start)


def _merge(spans: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return tuple((s, e) for s, e in out)


@dataclass(frozen=True)
class Reading:
    """A response as read: its text, what of it is hidden or inert, its sentences and paragraphs.

    Attributes:
        text: The response with every line break written ``\n``, without trailing whitespace.
        hidden: Spans that render as nothing (left out of what the judge is shown).
        inert: Spans that are visible but state nothing: code, quotations, URLs.
        braces: Every balanced ``{...}`` group (:func:`brace_pairs`).
    """

    text: str
    hidden: tuple[tuple[int, int], ...]
    inert: tuple[tuple[int, int], ...]
    braces: dict[int, int]

    def _inside(self, spans: tuple[tuple[int, int], ...], pos: int) -> bool:
        index = bisect.bisect_right(spans, (pos, len(self.text) + 1)) - 1
        return index >= 0 and spans[index][0] <= pos < spans[index][1]

    def counts(self, pos: int) -> bool:
        """Whether a statement starting at ``pos`` counts (it is neither hidden nor inert)."""
        return not self._inside(self.hidden, pos) and not self._inside(self.inert, pos)

    def is_hidden(self, pos: int) -> bool:
        """Whether the character at ``pos`` renders as nothing."""
        return self._inside(self.hidden, pos)

    def shown(self, start: int, end: int) -> str:
        """``text[start:end]`` without its hidden spans."""
        pieces, cursor = [], start
        first = max(0, bisect.bisect_right(self.hidden, (start, len(self.text) + 1)) - 1)
        for h_start, h_end in self.hidden[first:]:
            if h_start >= end:
                break
            if h_end <= cursor:
                continue
            pieces.append(self.text[cursor : max(cursor, h_start)])
            cursor = max(cursor, h_end)
        pieces.append(self.text[cursor:end] if cursor < end else "")
        return "".join(pieces)

    def paragraph_start(self, pos: int, within: int = 4000) -> int:
        """Where the paragraph holding ``pos`` starts (after the blank line before it; looked
        for ``within`` characters back)."""
        lower = max(0, pos - within)
        starts = [m.end() for m in _PARAGRAPH_BREAK.finditer(self.text, lower, pos)]
        return starts[-1] if starts else lower

    def sentence_start(self, pos: int, within: int = 2000) -> int:
        """Where the sentence holding ``pos`` starts (looked for ``within`` characters back)."""
        lower = max(0, pos - within)
        starts = [m.end() for m in _SENTENCE_END.finditer(self.text, lower, pos)]
        start = starts[-1] if starts else lower
        while start < pos and self.text[start].isspace():
            start += 1
        return start

    def sentence_end(self, pos: int, sentences: int = 1, within: int = 2000) -> int:
        """Where the ``sentences``-th sentence ending at or after ``pos`` ends (looked for
        ``within`` characters on; the text's end at most)."""
        end, limit = pos, min(len(self.text), pos + within)
        for index in range(sentences):
            if index:  # past the last end and the spaces after it
                while end < limit and self.text[end].isspace():
                    end += 1
            match = _SENTENCE_END.search(self.text, end, limit)
            if match is None:
                return limit
            end = match.start()
        return end


def _math_spans(text: str) -> list[tuple[int, int]]:
    """Spans of math: ``$$...$$``, ``\\[...\\]``, display environments and inline ``$...$``.

    Read left to right, each opener with its first closer (a regex's lazy ``.*?`` would look for
    the closer again from every unclosed opener: quadratic on a long run of ``\\[``). A kind
    of math with no closer after one opener has none after any later one either.
    """
    spans: list[tuple[int, int]] = []
    unclosed: set[str] = set()
    pos = 0
    while (match := _MATH_OPEN.search(text, pos)) is not None:
        kind = match[1] or match[0]
        end = None
        if kind == "$":
            rest = _INLINE_MATH_REST.match(text, match.end())
            end = rest.end() if rest else None
        elif kind not in unclosed:
            if kind in ("$$", "\\["):
                close = text.find("$$" if kind == "$$" else "\\]", match.end())
                end = None if close < 0 else close + 2
            else:
                close_env = re.compile(rf"\\end\s*\{{{kind}\*?\}}").search(text, match.end())
                end = close_env.end() if close_env else None
            if end is None:
                unclosed.add(kind)
        if end is None:
            pos = match.start() + 1
        else:
            spans.append((match.start(), end))
            pos = end
    return spans


def _latex_hidden(text: str, pairs: dict[int, int]) -> list[tuple[int, int]]:
    """Spans of LaTeX that renders as nothing (see the module docstring)."""
    spans = [m.span() for pattern in (_IFFALSE, _COMMENT_ENV) for m in pattern.finditer(text)]
    for match in _PHANTOM.finditer(text):
        close = pairs.get(match.end())
        spans.append((match.start(), len(text) if close is None else close + 1))
    for match in _COLOURED.finditer(text):
        colour = re.sub(r"\s+", "", match[1]).casefold()
        if colour not in _INVISIBLE_COLOURS:
            continue
        if match[0].lstrip("\\").startswith("color"):  # a switch: to the end of its group
            opening = text.rfind("{", 0, match.start()) + 1
            close = pairs.get(opening) if opening and pairs.get(opening, -1) > match.start() else None
            line_end = text.find("\n\n", match.end())
            end = min(c for c in (close, line_end if line_end >= 0 else None, len(text)) if c is not None)
            spans.append((match.start(), end))
            continue
        after = re.match(r"\s*\{", text[match.end() :])
        if after is not None:
            close = pairs.get(match.end() + after.end())
            spans.append((match.start(), len(text) if close is None else close + 1))
    math = _merge(_math_spans(text))
    skip_to = -1
    for match in _PERCENT.finditer(text):
        if match.start() < skip_to:
            continue  # already inside a comment
        index = bisect.bisect_right(math, (match.start(), len(text) + 1)) - 1
        in_math = index >= 0 and math[index][0] <= match.start() < math[index][1]
        # A percent sign follows a number: "42%", or "42 %" when no LaTeX follows on its line.
        line_end = text.find("\n", match.start())
        rest = text[match.start() + 1 : len(text) if line_end < 0 else line_end]
        before = text[max(0, match.start() - 2) : match.start()]
        after_number = re.search(r"\d$", before) or (re.search(r"\d[ \u00a0]$", before) and "\\" not in rest)
        if in_math or not after_number:
            end = text.find("\n", match.start())
            skip_to = len(text) if end < 0 else end
            spans.append((match.start(), skip_to))
    return spans


def read(text: str) -> Reading:
    """Read a response: its trailing whitespace stripped, its hidden and inert spans found.

    Args:
        text: The policy's response.

    Returns:
        The :class:`Reading`.
    """
    text = _LINE_BREAKS.sub("\n", text).rstrip()  # every line break is one, as the defence reads them
    code = list(_merge([m.span() for pattern in (_FENCE, _INLINE_CODE) for m in pattern.finditer(text)]))

    def outside_code(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        def inside(pos: int) -> bool:
            index = bisect.bisect_right(code, (pos, len(text) + 1)) - 1
            return index >= 0 and code[index][0] <= pos < code[index][1]

        return [s for s in spans if not inside(s[0])]

    pairs = brace_pairs(text)
    hidden = outside_code([m.span() for p in (_HTML_COMMENT, _HIDDEN_ELEMENT) for m in p.finditer(text)])
    hidden += outside_code(_latex_hidden(text, pairs))
    inert = code + [m.span() for pattern in (_BLOCKQUOTE, _QUOTED, _URL) for m in pattern.finditer(text)]
    return Reading(text, _merge(hidden), _merge(inert), pairs)
