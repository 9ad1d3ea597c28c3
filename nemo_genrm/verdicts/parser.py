"""Turn a judge's reply into a verdict: 1, 0, "A", "B", an integer rating, or ``None``.

Four parsers, chosen by ``verdict.parser``:

- ``strict``: the whole reply, stripped, must equal the positive label (-> 1) or the negative
  label (-> 0). Case and punctuation matter.
- ``lenient``: a label (or configured synonym), as a whole word and case-insensitively, so
  ``INCORRECT`` is never read as ``CORRECT``: the first one after the last
  ``Judgement:``/``Verdict:``/``Answer:``-style prefix, else the first one on the last line
  that holds one (a judge that reasons and then concludes is read at its conclusion).
  Multi-word synonyms ("not correct") win over the shorter phrases they contain.
- ``choice``: exactly one of two markers (``[[A]]``, ``[[B]]`` by default) -> ``"A"``/``"B"``;
  both present is ``ambiguous``.
- ``rating``: the last integer of the reply, within ``rating_min..rating_max``. A number right
  after ``/`` or ``out of`` is a scale, not a rating (``7/10`` is 7); ``-`` is a sign only when it
  does not follow a word (``1-10`` is two numbers); a decimal is ``not_integer``.

Reasoning judges: everything up to the last ``</think>`` is removed before any parser runs (this
also covers chat templates that open ``<think>`` inside the prompt). A ``<think>`` left open
after that means the judge ran out of tokens mid-thought, so there is no verdict
(``truncated``), even if a label appears inside the unfinished thought.

Quoted candidates: a judge that reasons often quotes the answer it judges, and an answer can
hold a verdict. Before the lenient, choice and rating parsers run, what is a copy of the
candidate is removed: a fenced ``<candidate-…>`` block, Markdown block quotes (``> …``),
quoted spans holding a verdict prefix (``"Verdict: 1"``), and, when the caller passes the
candidate (``parse(reply, candidate=...)``), every copy of it and of each of its lines of 8 or
more characters. A label that only appears there never counts.

A reply without a verdict is ``Verdict(None, reason)``; this module never turns ``None`` into a
number. What a missing verdict costs (reward 0, masked) is decided by the caller.

The same vocabulary is kept out of the answers being judged: see :mod:`nemo_genrm.guard.injection`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nemo_genrm.errors import ConfigError  # not nemo_genrm.config, which imports this module

logger = logging.getLogger(__name__)

PARSERS = ("strict", "lenient", "choice", "rating")
REASONS = ("ok", "not_text", "empty", "no_label", "ambiguous", "out_of_range", "not_integer")
REASONS += ("truncated",)
TRUNCATED = "truncated"
CHOICE_VALUES = ("A", "B")
DEFAULT_CHOICE_MARKERS = ("[[A]]", "[[B]]")

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_VERDICT_WORDS = r"(?:final[ \t]+)?(?:judge?ments?|verdict|answer|decision|label|grade)"
# "Judgement:", "**Verdict**:", "Final answer =" ... anywhere in the reply.
_PREFIX = re.compile(rf"\b{_VERDICT_WORDS}\b[\s*_`]*[:=]", re.IGNORECASE)
_WORD = re.compile(r"\w+")
# An optional sign only when the "-" does not follow a word ("1-10" is 1 and 10), digits not
# glued to a word ("x2" is no number), an optional decimal part.
_NUMBER = re.compile(r"(?<![\w.])(?:-(?=\d))?\d+(\.\d+)?")
_SCALE = re.compile(r"(?:/|\bout\s+of)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Verdict:
    """The parsed verdict of one judge reply.

    Attributes:
        value: 1 or 0 (strict, lenient), ``"A"`` or ``"B"`` (choice), an int (rating), or ``None``
            when the reply holds no valid verdict.
        reason: ``"ok"`` when ``value`` is set, else why not: ``not_text``, ``empty``,
            ``no_label``, ``ambiguous``, ``out_of_range``, ``not_integer``, ``truncated`` (the
            reply ends inside a ``<think>`` block).
    """

    value: int | str | None
    reason: str

    @property
    def ok(self) -> bool:
        """Whether the reply held a valid verdict."""
        return self.value is not None


def strip_think(text: str) -> str | None:
    """Remove the judge's reasoning block.

    Args:
        text: The judge's reply.

    Returns:
        The text after the last ``</think>`` (the whole text when there is none), or ``None``
        when a ``<think>`` is still open in what remains.
    """
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    if _THINK_OPEN.search(text):
        return None
    return text


_FENCED = re.compile(r"<candidate-[0-9a-z]+>.*?(?:</candidate-[0-9a-z]+>|\Z)", re.DOTALL)
_BLOCK_QUOTE = re.compile(r"^[ \t]*>.*$", re.MULTILINE)
# Double or curly quotes and backticks only: a single quote is too often an apostrophe.
_QUOTED_VERDICT = re.compile(
    rf"[\"“`][^\"“”`\n]{{0,80}}?\b(?:{_VERDICT_WORDS}|scores?|ratings?)\b[^\"“”`\n]{{0,80}}?[\"”`]", re.IGNORECASE
)
MIN_QUOTED_CHARS = 8
"""Shorter candidate lines are not removed from replies: they could be the verdict itself."""


def strip_quoted(text: str, candidate: str | None = None) -> str:
    """Remove what in a judge's reply is a copy of the candidate, not the judge's own words.

    Args:
        text: The reply (after :func:`strip_think`).
        candidate: The candidate as shown to the judge, when known.

    Returns:
        The reply without fenced blocks, block quotes, quoted spans holding a verdict prefix,
        and copies of the candidate and of its lines of :data:`MIN_QUOTED_CHARS` or more.
    """
    text = _FENCED.sub(" ", text)
    text = _BLOCK_QUOTE.sub("", text)
    text = _QUOTED_VERDICT.sub(" ", text)
    if candidate:
        pieces = [candidate.strip(), *(line.strip() for line in candidate.splitlines())]
        for piece in sorted({p for p in pieces if len(p) >= MIN_QUOTED_CHARS}, key=len, reverse=True):
            text = text.replace(piece, " ")
    return text


def _phrase(text: str) -> tuple[str, ...]:
    """Case-folded word tokens of a label or synonym."""
    return tuple(w.casefold() for w in _WORD.findall(text))


def _check_options(
    parser: object,
    *,
    positive: object,
    negative: object,
    synonyms: Mapping[Any, Iterable[str]],
    choice_markers: Sequence[str],
    rating_min: int,
    rating_max: int,
) -> list[str]:
    """Every problem with the parser options, one line each."""
    problems = []
    if parser not in PARSERS:
        problems.append(f"verdict.parser: unknown parser {parser!r}; use {', '.join(PARSERS)}")
    for name, label in (("positive", positive), ("negative", negative)):
        if not isinstance(label, str) or not label.strip() or label != label.strip():
            problems.append(
                f"verdict.{name}: label {label!r} must be a non-empty string without surrounding whitespace"
            )
    if isinstance(positive, str) and isinstance(negative, str):
        if positive.casefold() == negative.casefold():
            problems.append(f"verdict: positive and negative labels are both {positive!r}")
        elif parser == "lenient" and (not _phrase(positive) or not _phrase(negative)):
            problems.append(
                f"verdict: the lenient parser matches words, but {positive!r}/{negative!r} contain no letters or digits"
            )
    for key in synonyms:
        if str(key) not in (positive, negative):
            problems.append(f"verdict.synonyms: key {key!r} is not a label; use {positive!r} or {negative!r}")
    markers = list(choice_markers)
    if len(markers) != 2 or not all(isinstance(m, str) and m for m in markers):
        problems.append(f"verdict.choice_markers: need two non-empty strings, got {markers!r}")
    elif markers[0] in markers[1] or markers[1] in markers[0]:
        problems.append(
            f"verdict.choice_markers: {markers[0]!r} and {markers[1]!r} overlap; one must not contain the other"
        )
    if rating_min >= rating_max:
        problems.append(f"verdict.rating_min ({rating_min}) must be below verdict.rating_max ({rating_max})")
    return problems


class VerdictParser:
    """A verdict parser built (and validated) once, then applied to many replies.

    Args:
        parser: ``strict``, ``lenient``, ``choice`` or ``rating``.
        positive: Label meaning the answers agree (value 1).
        negative: Label meaning they disagree (value 0).
        synonyms: Lenient parser only: label -> extra words or phrases meaning that label,
            e.g. ``{"1": ["yes", "correct"], "0": ["no", "incorrect"]}``.
        choice_markers: Choice parser only: the markers for ``"A"`` and ``"B"``.
        rating_min: Rating parser only: lowest valid rating.
        rating_max: Rating parser only: highest valid rating.

    Raises:
        ConfigError: Unknown parser, equal or empty labels, synonyms for a non-label, markers
            that are not two distinct non-overlapping strings, or an empty rating range.
    """

    def __init__(
        self,
        parser: str = "strict",
        *,
        positive: str = "1",
        negative: str = "0",
        synonyms: Mapping[str, Iterable[str]] | None = None,
        choice_markers: Sequence[str] = DEFAULT_CHOICE_MARKERS,
        rating_min: int = 1,
        rating_max: int = 10,
    ) -> None:
        synonyms = dict(synonyms or {})
        problems = _check_options(
            parser,
            positive=positive,
            negative=negative,
            synonyms=synonyms,
            choice_markers=choice_markers,
            rating_min=rating_min,
            rating_max=rating_max,
        )
        phrases: dict[tuple[str, ...], int] = {}
        words = all(isinstance(x, str) and _phrase(x) for x in (positive, negative))
        if parser == "lenient" and words:
            # Checked beside the other problems, so a conflict is not found only once they are fixed.
            labels = {key: words for key, words in synonyms.items() if str(key) in (positive, negative)}
            problems += [p for p in self._build_phrases(phrases, positive, negative, labels) if p not in problems]
        if problems:
            raise ConfigError(problems)
        self.parser = parser
        self.positive = positive
        self.negative = negative
        self.synonyms = {str(k): [str(s) for s in _as_list(v)] for k, v in synonyms.items()}
        self.choice_markers = tuple(choice_markers)
        self.rating_min = rating_min
        self.rating_max = rating_max
        self._phrases = phrases
        self._longest = max((len(p) for p in phrases), default=0)
        self._parse_body = getattr(self, f"_{parser}")  # _strict, _lenient, _choice, _rating

    @classmethod
    def from_config(cls, cfg: Any) -> VerdictParser:
        """Build from a :class:`nemo_genrm.config.VerdictConfig`."""
        return cls(
            cfg.parser,
            positive=cfg.positive,
            negative=cfg.negative,
            synonyms=cfg.synonyms,
            choice_markers=tuple(cfg.choice_markers),
            rating_min=cfg.rating_min,
            rating_max=cfg.rating_max,
        )

    @staticmethod
    def _build_phrases(
        phrases: dict[tuple[str, ...], int],
        positive: str,
        negative: str,
        synonyms: Mapping[Any, Iterable[str]],
    ) -> list[str]:
        """Fill ``phrases`` (word tuple -> 1/0); return the conflicts found."""
        problems = []
        values = {positive: 1, negative: 0}
        entries = [(positive, positive), (negative, negative)]
        entries += [(str(k), s) for k, v in synonyms.items() for s in _as_list(v)]
        for label, text in entries:
            words = _phrase(str(text))
            if not words:
                problems.append(f"verdict.synonyms.{label}: {text!r} contains no word to match")
            elif phrases.setdefault(words, values[label]) != values[label]:
                problems.append(f"verdict.synonyms: {text!r} would mean both {positive!r} and {negative!r}")
        return problems

    def parse(self, text: object, candidate: str | None = None) -> Verdict:
        """Parse one judge reply.

        Args:
            text: The reply. Anything that is not a string gives ``Verdict(None, "not_text")``.
            candidate: The candidate answer as the judge was shown it; copies of it in the reply
                are not read (see the module docstring).

        Returns:
            The verdict; ``value`` is ``None`` when the reply holds none, with the reason.
        """
        if not isinstance(text, str):
            return Verdict(None, "not_text")
        body = strip_think(text)
        if body is None:
            verdict = Verdict(None, TRUNCATED)
        elif not body.strip():
            verdict = Verdict(None, "empty")
        else:
            if self.parser != "strict":  # strict needs the whole reply to be a label anyway
                body = strip_quoted(body, candidate)
            verdict = self._parse_body(body.strip()) if body.strip() else Verdict(None, "no_label")
        if not verdict.ok:
            logger.debug("no verdict (%s) in judge reply %.120r", verdict.reason, text)
        return verdict

    def _strict(self, body: str) -> Verdict:
        if body == self.positive:
            return Verdict(1, "ok")
        if body == self.negative:
            return Verdict(0, "ok")
        return Verdict(None, "no_label")

    def _first_label(self, text: str) -> int | None:
        words = [w.casefold() for w in _WORD.findall(text)]
        for i in range(len(words)):
            for n in range(min(self._longest, len(words) - i), 0, -1):
                value = self._phrases.get(tuple(words[i : i + n]))
                if value is not None:
                    return value
        return None

    def _lenient(self, body: str) -> Verdict:
        prefixes = list(_PREFIX.finditer(body))
        value = self._first_label(body[prefixes[-1].end() :]) if prefixes else None
        for line in reversed(body.splitlines()) if value is None else ():
            value = self._first_label(line)  # the conclusion of a reply that reasons
            if value is not None:
                break
        return Verdict(None, "no_label") if value is None else Verdict(value, "ok")

    def _choice(self, body: str) -> Verdict:
        found = [v for v, m in zip(CHOICE_VALUES, self.choice_markers, strict=True) if m in body]
        if len(found) > 1:
            return Verdict(None, "ambiguous")
        return Verdict(found[0], "ok") if found else Verdict(None, "no_label")

    def _rating(self, body: str) -> Verdict:
        numbers = [  # a number right after "/" or "out of" is the scale
            m for m in _NUMBER.finditer(body) if not _SCALE.search(body, max(0, m.start() - 12), m.start())
        ]
        if not numbers:
            return Verdict(None, "no_label")
        last = numbers[-1]
        if last.group(1):
            return Verdict(None, "not_integer")
        value = int(last.group(0))
        if not self.rating_min <= value <= self.rating_max:
            return Verdict(None, "out_of_range")
        return Verdict(value, "ok")


def _as_list(value: Iterable[str] | str) -> list[str]:
    """A single synonym string is a list of one."""
    return [value] if isinstance(value, str) else list(value)
