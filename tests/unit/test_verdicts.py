"""Table-driven tests of judge-reply parsing (nemo_genrm.verdicts)."""

from __future__ import annotations

import pytest

from nemo_genrm.config import ConfigError, VerdictConfig
from nemo_genrm.verdicts import (
    Verdict,
    VerdictParser,
    strip_think,
)

SYN = {"1": ["yes", "correct"], "0": ["no", "incorrect", "not correct"]}
WORDS = {"positive": "CORRECT", "negative": "INCORRECT"}
ANGLE = {"choice_markers": ("<<A>>", "<<B>>")}
LENIENT = {"parser": "lenient"}
UNTERMINATED = "truncated"

# (judge reply, parser, options, expected value, expected reason)
CASES = [
    # ---------------------------------------------------------------- strict
    # The bare positive label is 1.
    pytest.param("1", "strict", {}, 1, "ok", id="strict-positive"),
    # The bare negative label is 0.
    pytest.param("0", "strict", {}, 0, "ok", id="strict-negative"),
    # Whitespace around the label (a trailing newline from the engine) is stripped.
    pytest.param(" 1\n", "strict", {}, 1, "ok", id="strict-whitespace"),
    # Strict means exact: a full stop after the label is not the label.
    pytest.param("1.", "strict", {}, None, "no_label", id="strict-punct"),
    # Strict ignores synonyms, so "Yes" is rejected even when lenient would accept it.
    pytest.param("Yes", "strict", {"synonyms": SYN}, None, "no_label", id="strict-synonym"),
    # "10" is not the label "1".
    pytest.param("10", "strict", {}, None, "no_label", id="strict-longer-number"),
    # Two labels on two lines are not one label.
    pytest.param("1\n0", "strict", {}, None, "no_label", id="strict-multiline"),
    # An empty reply has no verdict.
    pytest.param("", "strict", {}, None, "empty", id="strict-empty"),
    # A whitespace-only reply is empty too.
    pytest.param(" \n\t ", "strict", {}, None, "empty", id="strict-whitespace-only"),
    # Word labels work in strict mode.
    pytest.param("CORRECT", "strict", WORDS, 1, "ok", id="strict-word-positive"),
    # ... and INCORRECT is the negative label, not a near miss of CORRECT.
    pytest.param("INCORRECT", "strict", WORDS, 0, "ok", id="strict-word-negative"),
    # Strict is case-sensitive.
    pytest.param("correct", "strict", WORDS, None, "no_label", id="strict-case"),
    # ---------------------------------------------------------------- think blocks
    # The reasoning block is removed first; its "0" does not count.
    pytest.param("<think>maybe 0</think>\n1", "strict", {}, 1, "ok", id="think-then-label"),
    # An unterminated block means the judge stopped mid-thought: no verdict.
    pytest.param("<think>it is 1", "strict", {}, None, UNTERMINATED, id="think-open"),
    # Only a closing tag (the chat template opened the block in the prompt).
    pytest.param("compare...</think>0", "strict", {}, 0, "ok", id="think-close-only"),
    # Several blocks, any case, all removed.
    pytest.param("<THINK>a</THINK><think>b</think>1", "strict", {}, 1, "ok", id="think-two"),
    # A block opened again after the label is still unterminated.
    pytest.param("<think>a</think>1<think>", "strict", {}, None, UNTERMINATED, id="think-reopened"),
    # Nothing after the reasoning: empty.
    pytest.param("<think>a</think>", "strict", {}, None, "empty", id="think-only"),
    # Lenient does not look inside an unfinished thought either.
    pytest.param("<think>1", "lenient", {}, None, UNTERMINATED, id="think-lenient"),
    # ---------------------------------------------------------------- lenient
    # Trailing punctuation is ignored.
    pytest.param("1.", "lenient", {}, 1, "ok", id="lenient-punct"),
    # Surrounding whitespace is ignored.
    pytest.param(" 1\n", "lenient", {}, 1, "ok", id="lenient-whitespace"),
    # A "Judgement:" prefix is skipped.
    pytest.param("Judgement: 0", "lenient", {}, 0, "ok", id="lenient-prefix"),
    # Markdown emphasis around the prefix does not hide the label.
    pytest.param("**Verdict:** 1", "lenient", {}, 1, "ok", id="lenient-markdown-prefix"),
    # A configured synonym maps to its label.
    pytest.param("Yes", "lenient", {"synonyms": SYN}, 1, "ok", id="lenient-yes"),
    # Synonyms match in any case, punctuation aside.
    pytest.param("NO!", "lenient", {"synonyms": SYN}, 0, "ok", id="lenient-no-upper"),
    # Without synonyms "Yes" means nothing.
    pytest.param("Yes", "lenient", {}, None, "no_label", id="lenient-no-synonyms"),
    # The multi-word synonym "not correct" wins over the "correct" inside it.
    pytest.param("It is not correct.", "lenient", {"synonyms": SYN}, 0, "ok", id="lenient-phrase"),
    # Reasoning then a conclusion: read after the last prefix, not the "1" of "Step 1".
    pytest.param("Step 1: compare.\nVerdict: 0", "lenient", {}, 0, "ok", id="lenient-conclusion"),
    # Multi-line output with the label on the first line.
    pytest.param("1\nThey give the same value.", "lenient", {}, 1, "ok", id="lenient-multiline"),
    # No label after the prefix: fall back to the first label in the whole reply.
    pytest.param("1, I think.\nVerdict: see above", "lenient", {}, 1, "ok", id="lenient-fallback"),
    # Whole words only: "10" does not contain the label "1".
    pytest.param("The result 10 is fine", "lenient", {}, None, "no_label", id="lenient-whole-word"),
    # INCORRECT is never mis-read as CORRECT.
    pytest.param("INCORRECT", "lenient", WORDS, 0, "ok", id="lenient-incorrect"),
    # ... in lower case inside a sentence either.
    pytest.param("it is incorrect", "lenient", WORDS, 0, "ok", id="lenient-incorrect-lower"),
    # Word labels match in any case.
    pytest.param("Correct.", "lenient", WORDS, 1, "ok", id="lenient-correct"),
    # No label anywhere.
    pytest.param("Answer: unclear", "lenient", {}, None, "no_label", id="lenient-no-label"),
    # An empty reply has no verdict.
    pytest.param("", "lenient", {}, None, "empty", id="lenient-empty"),
    # ---------------------------------------------------------------- choice
    # Marker A.
    pytest.param("[[A]]", "choice", {}, "A", "ok", id="choice-a"),
    # Marker B after some reasoning.
    pytest.param("B is better. [[B]]", "choice", {}, "B", "ok", id="choice-b"),
    # Both markers present: ambiguous, no verdict.
    pytest.param("[[A]] vs [[B]]: [[A]]", "choice", {}, None, "ambiguous", id="choice-both"),
    # A bare letter is not a marker.
    pytest.param("A", "choice", {}, None, "no_label", id="choice-bare-letter"),
    # An empty reply has no verdict.
    pytest.param("", "choice", {}, None, "empty", id="choice-empty"),
    # Markers inside the reasoning block do not count.
    pytest.param("<think>[[A]] or [[B]]?</think>[[B]]", "choice", {}, "B", "ok", id="choice-think"),
    # Configured markers are used ...
    pytest.param("<<B>>", "choice", ANGLE, "B", "ok", id="choice-custom"),
    # ... instead of the default ones.
    pytest.param("[[A]]", "choice", ANGLE, None, "no_label", id="choice-old-marker"),
    # ---------------------------------------------------------------- rating
    # A bare integer.
    pytest.param("7", "rating", {}, 7, "ok", id="rating-bare"),
    # A full stop after the number is not a decimal part.
    pytest.param("Rating: 7.", "rating", {}, 7, "ok", id="rating-sentence"),
    # "/10" is the scale, not the rating.
    pytest.param("Rating: 7/10", "rating", {}, 7, "ok", id="rating-slash-scale"),
    # "out of 10" is the scale too.
    pytest.param("8 out of 10", "rating", {}, 8, "ok", id="rating-out-of"),
    # Several integers: the last one wins.
    pytest.param("3 issues, 2 fixed; score 9", "rating", {}, 9, "ok", id="rating-last-wins"),
    # "1-10" is two numbers, not 1 and -10.
    pytest.param("On a 1-10 scale: 6", "rating", {}, 6, "ok", id="rating-range-dash"),
    # A bracketed rating.
    pytest.param("Score: [[8]]", "rating", {}, 8, "ok", id="rating-brackets"),
    # Above rating_max.
    pytest.param("11", "rating", {}, None, "out_of_range", id="rating-above"),
    # Below rating_min.
    pytest.param("0", "rating", {}, None, "out_of_range", id="rating-below"),
    # A negative number keeps its sign and is out of range.
    pytest.param("-3", "rating", {}, None, "out_of_range", id="rating-negative"),
    # The last integer is out of range even though an earlier one is not.
    pytest.param("9 then 12", "rating", {}, None, "out_of_range", id="rating-last-out"),
    # A decimal is not a whole-number rating.
    pytest.param("7.5", "rating", {}, None, "not_integer", id="rating-decimal"),
    # Digits glued to a word ("model2") are not a number.
    pytest.param("model2 says great", "rating", {}, None, "no_label", id="rating-glued-digit"),
    # A configured range 0..5 accepts 0.
    pytest.param("0", "rating", {"rating_min": 0, "rating_max": 5}, 0, "ok", id="rating-0-to-5"),
    # An empty reply has no verdict.
    pytest.param("", "rating", {}, None, "empty", id="rating-empty"),
]


@pytest.mark.parametrize(("text", "parser", "options", "value", "reason"), CASES)
def test_parse_verdict(text, parser, options, value, reason):
    verdict = VerdictParser(parser, **options).parse(text)
    assert verdict == Verdict(value, reason)
    assert verdict.ok is (value is not None)


@pytest.mark.parametrize(("text", "parser", "options", "value", "reason"), CASES)
def test_failure_is_none_never_a_number(text, parser, options, value, reason):
    # A failed verdict carries None itself; arithmetic on it fails loudly instead of giving 2 or -1.
    verdict = VerdictParser(parser, **options).parse(text)
    if reason != "ok":
        assert verdict.value is None
        with pytest.raises(TypeError):
            _ = 1 - verdict.value  # type: ignore[operator]
    else:
        assert verdict.value is not None


@pytest.mark.parametrize("text", [None, 1, b"1", ["1"]], ids=["none", "int", "bytes", "list"])
def test_non_text_reply(text):
    # Non-string replies (an engine error slipped through) are no verdict, not an exception.
    assert VerdictParser().parse(text) == Verdict(None, "not_text")


def test_parser_reused_on_batch_keeps_order_and_count():
    # One verdict per reply, in input order, from a parser built once.
    parser = VerdictParser("lenient", synonyms=SYN)
    replies = ["yes", None, "no", "", "<think>", "Verdict: 1"]
    assert [parser.parse(r).value for r in replies] == [1, None, 0, None, None, 1]
    assert parser.parse("no") == Verdict(0, "ok")


BAD_OPTIONS = [
    # A typo in the parser name.
    pytest.param({"parser": "fuzzy"}, "fuzzy", id="unknown-parser"),
    # The two labels must differ.
    pytest.param({"positive": "1", "negative": "1"}, "both '1'", id="same-labels"),
    # ... also ignoring case (lenient could not tell them apart).
    pytest.param({"positive": "yes", "negative": "YES"}, "both", id="same-labels-case"),
    # A label with surrounding whitespace would never equal a stripped reply.
    pytest.param({"positive": " 1"}, "verdict.positive", id="label-whitespace"),
    # An empty label.
    pytest.param({"negative": ""}, "verdict.negative", id="empty-label"),
    # Synonyms given for something that is not a label.
    pytest.param({"synonyms": {"2": ["yes"]}}, "key '2'", id="synonym-key"),
    # One synonym for both labels.
    pytest.param(LENIENT | {"synonyms": {"1": ["ok"], "0": ["ok"]}}, "both", id="synonym-conflict"),
    # A synonym with no word in it can never match.
    pytest.param(LENIENT | {"synonyms": {"1": ["!!"]}}, "no word", id="synonym-no-word"),
    # Lenient matches words; labels made of symbols cannot work.
    pytest.param(LENIENT | {"positive": "+", "negative": "-"}, "no letters", id="lenient-symbols"),
    # The choice parser needs two markers.
    pytest.param({"choice_markers": ("[[A]]",)}, "choice_markers", id="one-marker"),
    # Overlapping markers: "A" is inside "[A]".
    pytest.param({"choice_markers": ("A", "[A]")}, "overlap", id="overlapping-markers"),
    # An empty rating range.
    pytest.param({"rating_min": 5, "rating_max": 5}, "rating_min", id="empty-range"),
]


@pytest.mark.parametrize(("options", "needle"), BAD_OPTIONS)
def test_bad_options_raise_config_error(options, needle):
    options = dict(options)
    parser = options.pop("parser", "strict")
    with pytest.raises(ConfigError) as err:
        VerdictParser(parser, **options)
    assert any(needle in p for p in err.value.problems), err.value.problems


def test_all_problems_reported_at_once():
    # Several mistakes -> one ConfigError listing each.
    with pytest.raises(ConfigError) as err:
        VerdictParser("fuzzy", positive="x", negative="x", rating_min=3, rating_max=1)
    assert len(err.value.problems) == 3


def test_from_config_uses_every_option():
    # Word labels and synonyms from a VerdictConfig reach the parser.
    cfg = VerdictConfig(parser="lenient", positive="CORRECT", negative="INCORRECT", synonyms={"CORRECT": ["yes"]})
    assert VerdictParser.from_config(cfg).parse("Yes.") == Verdict(1, "ok")
    assert VerdictParser.from_config(cfg).parse("Verdict: INCORRECT") == Verdict(0, "ok")
    rating = VerdictParser.from_config(VerdictConfig(parser="rating", rating_min=0, rating_max=3))
    assert (rating.parse("3"), rating.parse("4")) == (Verdict(3, "ok"), Verdict(None, "out_of_range"))
    choice_cfg = VerdictConfig(parser="choice", choice_markers=["(A)", "(B)"])
    choice = VerdictParser.from_config(choice_cfg)
    assert choice.parse("(B)") == Verdict("B", "ok")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),  # nothing to remove
        ("<think>x</think> y", " y"),  # block removed, rest kept as is
        ("x</think>y", "y"),  # closing tag only: everything before it is reasoning
        ("<think>x", None),  # open block: no text
    ],
)
def test_strip_think(text, expected):
    assert strip_think(text) == expected
