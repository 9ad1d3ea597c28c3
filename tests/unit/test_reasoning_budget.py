"""Reasoning judges: a budget for the thought, a reserve for the verdict, never a verdict read from
inside a thought; and the counters of each call and step.

The two passes run here on a scripted engine (``generate`` returns ids the test chose, and
records what it was asked); the real engines run them in tests/functional/test_reasoning_judges.py.
"""

from __future__ import annotations

import pytest

from nemo_genrm.config import ConfigError, JudgeConfig, validate
from nemo_genrm.judges.base import Generation, JudgeStats
from nemo_genrm.judges.reasoning import (
    CLOSED,
    TRUNCATED,
    ReasoningBudget,
    ThoughtTokens,
    answer,
    opens_thought,
    settle,
    settle_text,
)
from nemo_genrm.judges.results import reasoning_summary
from nemo_genrm.samples.metrics import StepTally
from nemo_genrm.testing import make_tiny_tokenizer
from nemo_genrm.verdicts import VerdictParser

TOK = make_tiny_tokenizer()
EOS = TOK.eos_token_id
STRICT = VerdictParser("strict")


def ids(text: str) -> list[int]:
    return TOK.encode(text, add_special_tokens=False)


def raw(token_ids) -> str:
    return TOK.decode(token_ids, skip_special_tokens=False)


# (reply, prompt opened the thought, budget) -> (kept text, reasoning tokens, still open).
# In tiny tokens: "<think>" is 5, "</think>" 6, "abc" 2 ("ab", "c").
SETTLE_CASES = [
    # Closed within the budget: kept whole; the thought counts up to and including </think>.
    pytest.param("<think>abc</think>1", False, 20, ("<think>abc</think>1", 13, False), id="closed-in-budget"),
    # The template opened the thought: the reply holds only its end.
    pytest.param("abc</think>1", True, 20, ("abc</think>1", 8, False), id="opened-by-template"),
    # Closed, but past the budget: cut at the budget, still open.
    pytest.param("<think>abc</think>1", False, 7, ("<think>abc", 7, True), id="closed-too-late"),
    # Never closed, ended by EOS inside the thought: the EOS is dropped, the thought is open.
    pytest.param("<think>abc", False, 20, ("<think>abc", 7, True), id="stopped-inside"),
    # No thought at all: a plain reply, whatever its length.
    pytest.param("1", False, 20, ("1", 0, False), id="no-thought"),
    # The template opened it and the budget ran out: everything is thought.
    pytest.param("abc abc abc", True, 2, (raw(ids("abc abc abc")[:2]), 2, True), id="opened-and-out"),
]


@pytest.mark.parametrize(("reply", "opened", "budget", "expected"), SETTLE_CASES)
def test_settle(reply, opened, budget, expected):
    reply_ids = ids(reply) + ([EOS] if "</think>" not in reply or reply.endswith("1") else [])
    got = settle(reply_ids, [EOS], budget, opened, raw)
    text = raw([t for t in got.ids if t != EOS])
    assert (text, got.reasoning_tokens, got.open) == expected


def test_a_single_token_closing_tag_is_found_without_decoding_prefixes():
    calls = []

    def counting_decode(token_ids):
        calls.append(len(token_ids))
        return raw(token_ids)

    reply = ids("<think>abc</think>1")
    close_at = reply.index(ids("</think>")[-1])  # stands in for a one-token </think>
    got = settle(reply, [EOS], 20, False, counting_decode, close_id=reply[close_at])
    assert got.reasoning_tokens == close_at + 1 and len(calls) == 1


def _budget(on_budget: str, budget: int = 8, verdict_tokens: int = 10) -> ReasoningBudget:
    return ReasoningBudget(budget, verdict_tokens, on_budget, "\n</think>")


class ScriptedEngine:
    """``generate`` of the reasoning protocol: first-pass replies by prompt, verdicts for the rest."""

    def __init__(self, first: dict[tuple, list[int]], verdict: list[int]):
        self.first, self.verdict, self.calls = first, verdict, []

    def __call__(self, prompts, votes, max_new, thinking):
        self.calls.append((prompts, votes, max_new, thinking))
        if thinking is not None:
            return [self.first[tuple(p)] for p in prompts]
        return [list(self.verdict) for _ in prompts]


def test_answer_closes_what_ran_over_and_asks_for_the_verdict():
    over, within, plain = ids("Q1"), ids("Q2"), ids("Q3")
    engine = ScriptedEngine(
        {
            tuple(over): ids("<think>abc abc abc abc") + [EOS],  # 16 tokens of thought: over the budget of 14
            tuple(within): ids("<think>a</think>0") + [EOS],  # closed after 12
            tuple(plain): ids("1") + [EOS],
        },
        verdict=ids("1") + [EOS],
    )
    budget = _budget("close", budget=14)
    tokens = ThoughtTokens.of(TOK, budget)
    out = answer([over, within, plain], [0, 3, 0], budget, tokens, TOK, [EOS], engine)
    # First pass: every prompt, the whole budget (14 + 10), whether the template opened a thought.
    assert engine.calls[0][2:] == (24, [False, False, False])
    # Verdict pass: only the one over budget, its thought cut at 14 tokens, then the closing text;
    # it may write the verdict budget minus the closing text's 7 tokens.
    thought = ids("<think>abc abc abc abc")[:14]
    assert engine.calls[1] == ([over + thought + list(tokens.close_ids)], [0], 10 - 7, None)
    texts = [o[0] for o in out]
    assert texts[0] == TOK.decode(thought + list(tokens.close_ids) + ids("1"), skip_special_tokens=True)
    assert [STRICT.parse(t).value for t in texts] == [1, 0, 1]
    assert [(o[2], o[3]) for o in out] == [(14, CLOSED), (12, None), (0, None)]
    # Counted per call: one thought length per reply that had one, one closed.
    counts = JudgeStats.of_call(
        "generate", [Generation(t, output_tokens=n, reasoning_tokens=r, reasoning_cut=c) for t, n, r, c in out]
    )
    assert counts.reasoning_lengths == {14: 1, 12: 1}
    assert (counts.reasoning_closed, counts.reasoning_truncated) == (1, 0)


def test_truncate_leaves_a_thought_open_so_no_parser_reads_a_verdict_from_it():
    # The template opened the thought; the judge wrote "... Verdict: 1" inside it and ran out.
    prompt = ids("Q") + ids("<think>\n")
    engine = ScriptedEngine({tuple(prompt): ids("so the answer looks right. Verdict: 1 and more words here")}, [])
    budget = _budget("truncate", budget=20)  # "Verdict: 1" ends at the 17th token
    out = answer([prompt], [0], budget, ThoughtTokens.of(TOK, budget), TOK, [EOS], engine)
    text, _, thought, cut = out[0]
    assert len(engine.calls) == 1 and engine.calls[0][3] == [True] and (thought, cut) == (20, TRUNCATED)
    assert text.startswith("<think>") and "Verdict: 1" in text
    for parser in ("strict", "lenient"):
        assert VerdictParser(parser).parse(text).reason == "truncated"


@pytest.mark.parametrize(
    ("text", "ran_out", "expected"),
    [
        ("<think>a</think>1", False, ("<think>a</think>1", None)),  # closed: kept
        ("a</think>1", False, ("a</think>1", None)),  # the template opened it, the reply closed it
        ("<think>a and on", True, ("<think>a and on", TRUNCATED)),  # open at max_tokens
        ("looks right, 1", True, ("<think>looks right, 1", TRUNCATED)),  # out of tokens, no </think>
        ("1", False, ("1", None)),  # a plain reply
    ],
)
def test_settle_text_reads_a_reply_known_by_its_text(text, ran_out, expected):
    got, _, cut = settle_text(text, ran_out, None)
    assert (got, cut) == expected
    assert cut is None or STRICT.parse(got).reason == "truncated"


def test_opens_thought():
    assert opens_thought("<|im_start|>assistant\n<think>\n") and not opens_thought("<|im_start|>assistant\n")


def test_the_closing_text_must_leave_room_for_a_verdict():
    with pytest.raises(ValueError, match="verdict_tokens"):
        ThoughtTokens.of(TOK, _budget("close", verdict_tokens=7))  # "\n</think>" is 7 tokens


def _judge(**sampling) -> dict:
    return {"model_name": "m", "max_model_len": 64, "sampling": sampling}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            _judge(max_new_tokens=40, reasoning={"enabled": True, "verdict_tokens": 24}),
            "sampling.max_new_tokens + sampling.reasoning.verdict_tokens (64) must be smaller than max_model_len",
        ),
        (_judge(reasoning={"enabled": True, "close_text": "</thought>"}), "close_text '</thought>' must hold </think>"),
        ({**_judge(reasoning={"enabled": True}), "verdict_from": "logprobs"}, "needs verdict_from: text"),
        (
            {**_judge(reasoning={"enabled": True}), "backend": "http", "http": {"base_url": "http://h/v1"}},
            "use on_budget: truncate with backend http",
        ),
    ],
)
def test_config_errors_say_what_to_change(config, message):
    with pytest.raises(ConfigError) as info:
        validate(JudgeConfig, config, prefix="judge")
    assert any(message in problem for problem in info.value.problems)


def test_reply_budget_and_disabled_reasoning():
    enabled = JudgeConfig.model_validate(_judge(max_new_tokens=20, reasoning={"enabled": True, "verdict_tokens": 8}))
    assert enabled.sampling.reply_tokens == 28 and ReasoningBudget.of(enabled.sampling).reply_tokens == 28
    plain = JudgeConfig.model_validate(_judge(max_new_tokens=20))
    assert plain.sampling.reply_tokens == 20 and ReasoningBudget.of(plain.sampling) is None


def test_lengths_merge_and_summarise_into_step_metrics():
    # Nearest-rank p95 of 40 replies: the 38th shortest. 30 replies of 10, 8 of 50, 2 of 400:
    # rank 38 is the last 50; mean (300 + 400 + 800) / 40 = 37.5.
    first = JudgeStats(reasoning_lengths={10: 30, 50: 3}, reasoning_closed=2)
    second = JudgeStats(reasoning_lengths={50: 5, 400: 2}, reasoning_truncated=1)
    merged = first.merge(second)
    assert merged.reasoning_lengths == {10: 30, 50: 8, 400: 2} and first.reasoning_lengths == {10: 30, 50: 3}
    assert reasoning_summary(merged.reasoning_lengths) == {"mean": 37.5, "p95": 50.0, "max": 400.0}
    tally = StepTally(reasoning_lengths=dict(merged.reasoning_lengths), reasoning_closed=2, reasoning_truncated=1)
    metrics = tally.metrics()
    assert {k: metrics[k] for k in metrics if "reasoning" in k} == {
        "genrm/reasoning_tokens/mean": 37.5,
        "genrm/reasoning_tokens/p95": 50.0,
        "genrm/reasoning_tokens/max": 400.0,
        "genrm/reasoning_closed": 2.0,
        "genrm/reasoning_truncated": 1.0,
    }
    assert not any("reasoning" in k for k in StepTally().metrics())  # a judge that does not reason
