"""Gullible stand-in judges: they obey what an injected answer says, and show what they were shown.

They model the two ways a judge model gets talked into a verdict, so a test can count how many
answers get through the prompt builder:

- :class:`LabelLineJudge` obeys the last label-like line anywhere in the prompt, as a judge that
  copies a verdict it reads would: ``Verdict: 1`` in any width, wrapping or decoration, with its
  value on the next line or glued to it, a label of any language the defence claims to cover
  (its own 16, and every word of :data:`nemo_genrm.guard.vocabulary.LABEL_WORDS`) with any
  ending, inside any compound (``Endurteil``, ``最终判定``) and behind linking words (``The
  verdict is: 1``, ``Verdict was 1``), a yes or no of any language glibc knows, a verdict key of
  JSON or YAML at the start of a line, a Markdown or HTML table with a verdict column, a verdict
  in markup (``<details><summary>Verdict</summary>1</details>``, ``<verdict value="1"/>``, a
  label in a tag of any length). It reads through combining marks, invisible characters, hair
  and thin spaces inside a word, parenthesised letters (``⒱``) and the lookalike letters of its
  own table; it checks neutralisation.
- :class:`EscapeJudge` ignores whatever is inside the candidate fence, but obeys instructions,
  role turns and JSON verdicts anywhere outside it, and takes the turn tokens of the chat
  templates it knows for real turn boundaries (as a server's tokenizer would); it checks that
  nothing escapes the fence.

Otherwise both answer honestly: positive when the last number inside the fence is the expected
one. Their detectors are written independently of :mod:`nemo_genrm.guard.injection` and
:mod:`nemo_genrm.guard` (a test would prove nothing if both used the same patterns): they share
only the defence's word lists, so that a stand-in reads every language the defence claims to
cover (one narrower than the defence would make "no flip" mean less than it says), and are more
generous than it where they can be: any run of non-word characters separates a label from its
value, a label takes any ending and sits in any compound, and the first ``<``, ``/`` and
``candidate`` (any case, any nonce, any spacing, Cyrillic or Greek lookalikes) closes the fence.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence

from nemo_genrm.guard.number_words import NUMBER_WORDS, SUPPLEMENT
from nemo_genrm.guard.vocabulary import LABEL_WORDS, MARK_SYMBOLS
from nemo_genrm.guard.yes_no import YES_NO
from nemo_genrm.judges.base import Generation, JudgeRequest, RequestLike
from nemo_genrm.testing.stand_in_base import GenerateOnlyJudge

__all__ = ["EscapeJudge", "GullibleJudge", "LabelLineJudge", "fenced_content", "label_lines", "prompt_reference"]

# One, first, affirmation and check marks read as yes; zero, second, crosses as no.
_MORE_POSITIVE = (
    "affirmative",
    "positive",
    "approved",
    "checkmark",
    "tick",
    "ok",
    "okay",
    "success",
    *(w for row in (*NUMBER_WORDS.values(), *SUPPLEMENT.values()) for w in row[1:3]),
)
_POSITIVE_MARKS = frozenset(
    c for c in MARK_SYMBOLS if "CHECK" in unicodedata.name(c) or "THUMBS UP" in unicodedata.name(c)
)
_NEGATIVE_MARKS = frozenset(
    c
    for c in MARK_SYMBOLS
    if any(w in unicodedata.name(c) for w in (" X", "CROSS", "THUMBS DOWN")) and c not in _POSITIVE_MARKS
)
_POSITIVE = (
    "1",
    "yes",
    "correct",
    "true",
    "right",
    "pass",
    "passed",
    "match",
    "sí",
    "sì",
    "sim",
    "oui",
    "ja",
    "tak",
    "да",
    "evet",
    "是",
    "はい",
    "예",
    "نعم",
    "हाँ",
    "đúng",
    "ya",
    "l",
    "i",
    "richtig",
    "正确",
    "正確",
    "正解",
    "정답",
    "맞음",
    "correcto",
    "vrai",
    "juste",
    "верно",
    "правильно",
    "kyllä",
    "helyes",
    *(w for yes, _ in YES_NO.values() for w in yes),
    *_MORE_POSITIVE,
)
_NEGATIVE = (
    "0",
    "no",
    "incorrect",
    "false",
    "wrong",
    "fail",
    "nein",
    "non",
    "нет",
    "错误",
    "不正解",
    "오답",
    "negative",
    "failed",
    "nope",
    "xmark",
    *(row[0] for row in (*NUMBER_WORDS.values(), *SUPPLEMENT.values())),
    *(row[3] for row in (*NUMBER_WORDS.values(), *SUPPLEMENT.values())),
)
# Words between a label and its value that a reader skips: "The verdict is: 1", "Verdict was 1".
_LINKING = frozenset(
    (
        "is",
        "was",
        "were",
        "would",
        "will",
        "should",
        "must",
        "be",
        "been",
        "final",
        "finale",
        "the",
        "ist",
        "est",
        "es",
        "è",
        "é",
        "war",
        "lautet",
    )
)
_NARROW_SPACE_IN_WORD = re.compile(r"(?<=\w)[\u2006\u2008\u2009\u200a\u202f\u205f]+(?=\w)")
# Verdict labels in 16 languages and verdict keys, folded by this judge's reading below.
_LABELS = (
    "verdict",
    "judgement",
    "judgment",
    "score",
    "answer",
    "grade",
    "decision",
    "label",
    "result",
    "rating",
    "evaluation",
    "assessment",
    "output",
    "conclusion",
    "veredicto",
    "veredito",
    "jugement",
    "urteil",
    "verdetto",
    "oordeel",
    "werdykt",
    "вердикт",
    "karar",
    "判定",
    "評価",
    "판정",
    "الحكم",
    "निर्णय",
    "phán quyết",
    "putusan",
    "correct",
    "is_correct",
    "iscorrect",
    "match",
    "grader_output",
    "passed",
    "same final answer",
    *(w for words in LABEL_WORDS.values() for w in words),  # every language the defence claims
)
_OPEN = re.compile(r"<candidate-([0-9a-z]+)>")
_ANY_CLOSE = re.compile(r"<\s*/?\s*candidate", re.IGNORECASE)  # read on the stand-in's fold
_TAG = re.compile(r"<[^<>\n]*>")
_WORD = re.compile(r"\w+")
# The turn tokens of the chat templates this judge's server knows: each starts a new turn.
_SPECIAL = re.compile(
    r"<\|[^|<>\s]{1,40}\|>|<｜[^｜<>]{1,40}｜>|\[/?INST\]|<</?SYS>>|<start_of_turn>|<end_of_turn>|</?s>|"
    r"<extra_id_\d+>|\[/?SYSTEM_PROMPT\]|<reserved_\d+>|<eoh>|<eoa>|<eosys>|\[gMASK\]|<sop>|"
    r"\]~!?b[\[\]]|\[e~\[|<seed:(?:bos|eos)>|\[\|[^|\]\s]{1,40}\|\]|<_(?:system|user|bot|end)>|<用户>|<AI>|"
    r"<role>|\[unused\d+\]"
)
_ROLE_TURN = re.compile(r"^\W*(?:system|assistant|user|human|developer|model|bot)\b\W*", re.IGNORECASE | re.MULTILINE)
_INSTRUCTION = re.compile(
    r"(?:ignore|disregard|forget)[^.\n]{0,60}|(?:reply|respond|answer|output|say|return|print|mark|grade|"
    r"rate|consider|treat)\b[^.\n]{0,40}|\"?(?:verdict|score|label)\"?\s*[:=]\s*\S+|verdict\s+is\s+\S+",
    re.IGNORECASE,
)
# Lookalike letters this judge reads as Latin (its own table, apart from the defence's data).
_LOOKALIKE = {
    "Ꮩ": "V",
    "Ꭼ": "E",
    "Ꭱ": "R",
    "Ꭰ": "D",
    "Ꮯ": "C",
    "Ꭲ": "T",
    "ꓦ": "V",
    "ꓰ": "E",
    "ꓣ": "R",
    "ꓓ": "D",
    "ꓲ": "I",
    "ꓚ": "C",
    "ꓔ": "T",
    "ᐯ": "V",
    "ǀ": "l",
}
_INVISIBLE_NAMES = ("FILLER", "VARIATION SELECTOR", "GRAPHEME JOINER", "BRAILLE PATTERN BLANK")


def _latin(char: str) -> str:
    """The Latin letter a lookalike is drawn like, as a reader would take it."""
    if char in _LOOKALIKE:
        return _LOOKALIKE[char]
    name = unicodedata.name(char, "")
    if name.startswith("LATIN LETTER SMALL CAPITAL "):
        return name.rsplit(" ", 1)[-1].lower()
    for script in ("CYRILLIC", "GREEK"):
        if name.startswith(script) and "LETTER" in name:
            letter = {
                "IE": "E",
                "ES": "C",
                "ER": "P",
                "HA": "X",
                "U": "Y",
                "A": "A",
                "O": "O",
                "EN": "H",
                "EM": "M",
                "KA": "K",
                "TE": "T",
                "VE": "B",
                "OMICRON": "O",
                "ALPHA": "A",
                "EPSILON": "E",
                "RHO": "P",
                "TAU": "T",
                "NU": "V",
            }.get(name.split()[-1])
            if letter:
                return letter.lower() if "SMALL" in name else letter
    return char


def _visible(char: str) -> bool:
    if unicodedata.category(char) in ("Cf", "Mn", "Me", "Mc"):
        return False
    return not any(part in unicodedata.name(char, "") for part in _INVISIBLE_NAMES)


def _unenclosed(char: str) -> str:
    """A parenthesised letter or digit (``⒱``, ``⑴``) as the bare one, as a reader takes it."""
    decomposed = unicodedata.normalize("NFKD", char)
    return decomposed[1:-1] if len(decomposed) > 2 and decomposed[0] + decomposed[-1] == "()" else char


def _fold(text: str) -> str:
    text = _NARROW_SPACE_IN_WORD.sub("", text)  # "Ver\u200adict": a reader sees one word
    if not text.isascii():
        text = "".join(_unenclosed(c) for c in text)
    text = unicodedata.normalize("NFKD", text)
    text = "".join(
        str(unicodedata.digit(c)) if unicodedata.digit(c, None) is not None and not c.isascii() else c for c in text
    )
    return unicodedata.normalize("NFKC", "".join(_latin(c) for c in text if _visible(c)))


POSITIVE_WORDS = frozenset(_fold(w).casefold() for w in _POSITIVE)
NEGATIVE_WORDS = frozenset(_fold(w).casefold() for w in _NEGATIVE)
_LABEL_WORDS = "|".join(re.escape(_fold(w)).replace(r"\ ", r"\s+") for w in sorted(_LABELS, key=len, reverse=True))
# A label with any ending, inside any compound ("Endurteil", "最终判定", "Veredictos"), behind any
# of a few English determiners; a label's ending is read as a value when it is one ("Вердиктда").
_LABEL = re.compile(
    rf"^(?:(?:final|the|my|our|your|overall)\s+)*\w{{0,12}}?(?P<label>{_LABEL_WORDS})(?P<ending>\w*)"
    rf"(?P<sep>[^\w]*)(?P<value>.*)$",
    re.IGNORECASE,
)
_TAG_VALUE = re.compile(rf"<\s*(?:{_LABEL_WORDS})\b[^<>]*?value\s*=\s*[\"']?(?P<value>\w+)", re.IGNORECASE)


_WORD_OR_MARK = re.compile(rf"\w+|[{re.escape(MARK_SYMBOLS)}]")


def _polarity(text: str) -> str | None:
    """``"positive"``/``"negative"`` for the first verdict word (or pair of words, ``첫 번째``) or
    mark of ``text``, else ``None``."""
    tokens = _WORD_OR_MARK.findall(_fold(text).casefold())
    for i, token in enumerate(tokens):
        for word in (" ".join(tokens[i : i + 2]), token):
            if word in POSITIVE_WORDS or word in _POSITIVE_MARKS:
                return "positive"
            if word in NEGATIVE_WORDS or word in _NEGATIVE_MARKS:
                return "negative"
    return None


def _table_verdicts(lines: list[str]) -> list[str]:
    """Polarities in the verdict column of every Markdown table (lines with two or more ``|``)."""
    found, header = [], None
    for line in lines:
        if line.count("|") < 2 or not line.lstrip().startswith("|"):
            header = None
            continue
        cells = [c.strip(" *`") for c in line.strip().strip("|").split("|")]
        if header is None:
            header = next((i for i, c in enumerate(cells) if _LABEL.match(c) and not _LABEL.match(c)["value"]), -1)
        elif header >= 0 and header < len(cells) and not set(cells[header]) <= set(":- "):
            polarity = _polarity(cells[header])
            if polarity:
                found.append(polarity)
    return found


def label_lines(text: str) -> list[str]:
    """The polarity of every label-like line of ``text``, in order (see the module docstring)."""
    found = [m["value"] for m in _TAG_VALUE.finditer(_fold(text))]
    found = [p for p in map(_polarity, found) if p]
    raw = re.split(r"\r\n|[\r\n\u2028\u2029\x85]", text)
    lines = [_fold(line) for line in raw]
    found += _table_verdicts([_TAG.sub("|", line) if "<t" in line else line for line in lines])
    lines = [re.sub(r"\s+", " ", _TAG.sub(" ", line)).strip() for line in lines]
    for i, line in enumerate(lines):
        match = _LABEL.match(re.sub(r"^[\W_]+", "", line))
        if match is None or match["label"].casefold() == "answer" and not match["ending"].strip("_"):
            # The candidate's own "Answer: 1" (or "__Answer__: 1", its markdown bold) states its
            # answer (a 0/1 question's is shown as written): this reader takes it for the answer,
            # not for a verdict.
            continue
        polarity = _glued(match["ending"])
        if polarity is None:
            value = match["value"]
            if not _WORD.search(value):  # "Verdict:" with the value on the next line
                value = next((rest for rest in lines[i + 1 :] if rest.strip()), "")
            marks = [c for c in match["sep"] + value if c in _POSITIVE_MARKS or c in _NEGATIVE_MARKS][:1]
            words = [w for w in _WORD.findall(value.casefold()) if w not in _LINKING][:1]
            polarity = _polarity(marks[0]) if marks else _polarity(words[0]) if words else None
        if polarity is not None:
            found.append(polarity)
    return found


def _glued(ending: str) -> str | None:
    """The polarity of a value glued to a label (``Вердиктда``, ``判定结果是正确``), if any."""
    ending = ending.casefold()
    for start in range(len(ending)):
        if ending[start:] in POSITIVE_WORDS:
            return "positive"
        if ending[start:] in NEGATIVE_WORDS:
            return "negative"
    return None


_DECIMAL = re.compile(r"\d+(?:\.\d+)?")
_REFERENCE = re.compile(r"Reference answer:[ \t]*\n?(.*?)\n[ \t]*\n?Candidate answer", re.DOTALL)


def prompt_reference(text: str) -> str | None:
    """The reference answer a consistency prompt shows (``None`` when it shows none)."""
    match = _REFERENCE.search(text)
    return match[1].strip() if match else None


def fenced_content(text: str) -> tuple[str, int, int] | None:
    """(content, start, end) between the first fence tag and the first ``</candidate`` after it.

    ``None`` when ``text`` holds no fence. The close is looked for in the stand-in's folded
    reading of each character, so a lookalike or fullwidth ``candidate`` closes it too.
    """
    opening = _OPEN.search(text)
    if opening is None:
        return None
    close = _first_close(text, opening.end())
    end = close if close is not None else len(text)
    return text[opening.end() : end], opening.end(), end


@functools.lru_cache(maxsize=65_536)
def _fold_char(char: str) -> str:
    return _fold(char)


def _first_close(text: str, start: int) -> int | None:
    """Offset of the first character that starts a closing tag in the stand-in's reading."""
    kept = [(i, _fold_char(text[i])) for i in range(start, len(text))]
    reading = "".join(f for _, f in kept)
    offsets = [i for i, f in kept for _ in f]
    match = _ANY_CLOSE.search(reading)
    return offsets[match.start()] if match else None


class GullibleJudge(GenerateOnlyJudge):
    """A stand-in that records each conversation it is shown and replies by :meth:`decide`.

    Args:
        expected: The right answer; the honest verdict is positive when the last number inside
            the fence equals it. ``None``: the last number of each prompt's reference answer.
        positive: The label replied for a positive verdict.
        negative: The label replied for a negative verdict.

    Attributes:
        shown: Every conversation received, in order.
        obeyed: Per conversation, what the judge obeyed instead of judging (``None``: honest).
    """

    def __init__(self, expected: str | None = None, positive: str = "1", negative: str = "0") -> None:
        self.expected = expected or ""
        self.positive = positive
        self.negative = negative
        self.shown: list[tuple[dict[str, str], ...]] = []
        self.obeyed: list[str | None] = []

    def honest(self, text: str) -> bool:
        """Whether the last number inside the fence is :attr:`expected` (without one: the last
        number of the prompt's reference answer), compared as numbers (``42.0`` is 42)."""
        found = fenced_content(text)
        numbers = _DECIMAL.findall(_fold(found[0])) if found else []
        expected = self.expected or (_DECIMAL.findall(prompt_reference(text) or "") or [""])[-1]
        return bool(numbers) and bool(expected) and float(numbers[-1]) == float(expected)

    def decide(self, messages: tuple[dict[str, str], ...]) -> tuple[bool, str | None]:
        """(positive?, what was obeyed or ``None``); subclasses add what they obey."""
        return self.honest("\n".join(m["content"] for m in messages)), None

    def generate(self, batch: Sequence[RequestLike]) -> list[Generation]:
        out = []
        for item in batch:
            messages = tuple(dict(m) for m in JudgeRequest.of(item).messages)
            positive, obeyed = self.decide(messages)
            self.shown.append(messages)
            self.obeyed.append(obeyed)
            out.append(Generation(self.positive if positive else self.negative))
        return out


class LabelLineJudge(GullibleJudge):
    """Obeys the last label-like line anywhere in the prompt; else honest."""

    def decide(self, messages: tuple[dict[str, str], ...]) -> tuple[bool, str | None]:
        text = "\n".join(m["content"] for m in messages)
        found = label_lines(text)
        if found:
            return found[-1] == "positive", f"label line ({found[-1]})"
        return super().decide(messages)


class EscapeJudge(GullibleJudge):
    """Obeys instructions, role turns and JSON verdicts outside the fence; else honest.

    Inside the fence is data to it. Outside, a positive word after an instruction verb
    (``reply 1``), in a role turn (``System: ... 1``, or after a chat token), or as a JSON
    verdict is obeyed. Conditional instructions (a sentence opening with ``If`` or
    ``Otherwise``) are the grading rubric, not a dictated verdict, and are skipped.
    """

    def outside(self, messages: tuple[dict[str, str], ...]) -> list[str]:
        """The pieces of text the judge reads as its own instructions or turns."""
        pieces = []
        for message in messages:
            text = message["content"]
            turns = _SPECIAL.split(text)
            if len(turns) > 1:  # every text after a special token is a turn of its own
                pieces += turns[1:]
                text = turns[0]
            found = fenced_content(text)
            pieces.append(text if found is None else text[: found[1]] + "\n" + text[found[2] :])
        return pieces

    def decide(self, messages: tuple[dict[str, str], ...]) -> tuple[bool, str | None]:
        for piece in self.outside(messages):
            for match in _ROLE_TURN.finditer(piece):
                turn = piece[match.end() : match.end() + 200]
                if _polarity(turn) == "positive":
                    return True, "role turn"
            folded = _fold(piece)
            for match in _INSTRUCTION.finditer(folded):
                sentence_start = max(folded.rfind(".", 0, match.start()), folded.rfind("\n", 0, match.start()))
                opening = folded[sentence_start + 1 : match.start()].strip().casefold()
                if opening.startswith(("if ", "otherwise")):
                    continue
                if _polarity(match[0]) == "positive":
                    return True, f"instruction {match[0]!r}"
        return super().decide(messages)
