"""The value-level verifier (``reward.verifier``): values compared as values, through the real
environment with stand-in judges whose verdict is a known function of what they are shown."""

from __future__ import annotations

from typing import Any

import pytest

from nemo_genrm.config import ConfigError
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.samples.types import sample_results
from nemo_genrm.testing.gullible import GullibleJudge
from nemo_genrm.testing.tagged_value_judges import RuleJudge
from nemo_genrm.verifier import Decision, ValueVerifier, as_latex

HTTP = {"backend": "http", "http": {"base_url": "http://stand-in/v1", "supports_logprobs": True}}
EQUAL, DIFFERENT, UNDECIDED = Decision.EQUAL, Decision.DIFFERENT, Decision.UNDECIDED

# (reference, answer value, decision): each case says why.
DECISIONS = [
    # The attacks: another value ending in the reference's digits.
    ("42", "-42", DIFFERENT),  # a sign
    ("42", "42%", DIFFERENT),  # a percent is a hundredth: 0.42
    ("42", "0.42", DIFFERENT),  # a decimal
    ("42", "1/42", DIFFERENT),  # a fraction
    ("42", "±42", DIFFERENT),  # the set {-42, 42}
    ("42", "42 thousand", DIFFERENT),  # a scale word: 42000
    ("42", "42²", DIFFERENT),  # a superscript is a power (1764), never the digits "422"
    ("42", "42e3", DIFFERENT),  # scientific notation
    ("42", "minus forty-two", DIFFERENT),  # sign words
    ("42", "41, 42", DIFFERENT),  # two values are not one
    # Their honest twins: the reference's value in another notation.
    ("42", "42.0", EQUAL),
    ("42", "84/2", EQUAL),
    ("42", "\\frac{84}{2}", EQUAL),
    ("42", "٤٢", EQUAL),  # Arabic-Indic digits
    ("42", "४२", EQUAL),  # Devanagari digits
    ("42", "４２", EQUAL),  # fullwidth digits
    ("42", "forty-two", EQUAL),  # English number words
    ("42", "quarante-deux", EQUAL),  # French
    ("42", "zweiundvierzig", EQUAL),  # German
    ("42", "4.2 \\times 10^{1}", EQUAL),
    ("42", "x = 42", EQUAL),
    ("42", "\\boxed{42}.", EQUAL),
    ("1250", "1,250", EQUAL),  # digit groups
    ("1250", "1 250", EQUAL),
    ("0.42", "42%", EQUAL),  # a percent against a decimal
    ("42%", "42\\%", EQUAL),
    ("\\frac{1}{2}", "0.5", EQUAL),
    # Signs in any dash or look-alike a reader takes for a minus.
    ("42", "‐42", DIFFERENT),  # U+2010 hyphen
    ("42", "—42", DIFFERENT),  # an em dash right before the digits
    ("42", "˗42", DIFFERENT),
    ("42", "➖42", DIFFERENT),
    ("42", "⁻42", DIFFERENT),  # a lone superscript minus
    ("-42", "‐42", EQUAL),
    # A base under the digits: no plain value; digits the base lacks are no number at all.
    ("42", "4₂", DIFFERENT),  # folded, a reader sees "42"
    ("42", "41₁", DIFFERENT),
    ("42", "101010₂", UNDECIDED),  # 42 in binary: left to the judge
    # Further scale and function words.
    ("0.042", "42‰", EQUAL),
    ("42", "42‰", DIFFERENT),
    ("1764", "42 squared", EQUAL),
    # A bracketed remark after the value: a restatement, or another value.
    ("1/2", "1/2 (0.5)", EQUAL),  # math-verify alone reads a product
    ("42", "42 (6 \\times 7)", EQUAL),
    ("42", "42 [6 × 7]", EQUAL),
    ("42", "42 (rounded)", EQUAL),
    ("1/3", "1/3 (0.333...)", EQUAL),  # a rounded restatement is a remark
    # A repeating decimal (its last digit twice before an ellipsis) is the fraction it repeats,
    # and the decimal it shows; fewer digits only say "about".
    ("1/3", "0.333...", EQUAL),
    ("1/6", "0.1666…", EQUAL),
    ("4/3", "1.333\\ldots", EQUAL),
    ("-1/3", "-0.333...", EQUAL),
    ("0.333", "0.333...", EQUAL),
    ("1/3", "0.3...", DIFFERENT),
    ("0.34", "0.333...", DIFFERENT),
    ("3.5", "3{,}5", EQUAL),  # LaTeX's decimal comma
    ("35", "3{,}5", DIFFERENT),
    ("1000", "\\boxed{1{,}000}", EQUAL),  # before three digits it groups thousands
    ("1", "\\boxed{1{,}000}", DIFFERENT),
    ("1", "0.99...", DIFFERENT),  # repeating nines only say "about"
    ("42", "42 (41)", DIFFERENT),
    ("41", "42 (41)", DIFFERENT),
    ("42", "London (42)", UNDECIDED),  # a remark never decides for a value it cannot read
    # An inequality states a set, never the reference's one value.
    ("42", "n \\ge 42", DIFFERENT),
    ("42", "41 < x \\leq 42", DIFFERENT),
    ("x > 3", "x > 3", UNDECIDED),
    ("42", "=> 42", UNDECIDED),  # an arrow is no inequality
    ("[3,\\infty)", "x \\ge 3", UNDECIDED),  # an interval reference: the inequality may state it
    ("2/3", "2/3 (0.667)", EQUAL),  # a decimal remark rounds the value
    ("42", "⁃ 42", UNDECIDED),  # a bullet before a spaced number is no sign
    ("1.6\\times10^{-19}", "1.6×10⁻19", UNDECIDED),  # a superscript minus inside a value is no sign
    ("42", "42" + " (1)" * 3000, UNDECIDED),  # past the longest value: never recursed into
    # Not values: the verifier decides nothing and never rejects.
    ("Paris", "Paris", UNDECIDED),
    ("Paris", "42", UNDECIDED),
    ("42", "not 42", UNDECIDED),  # words around the value
    ("42", "42 apples", UNDECIDED),
    ("42", "5!", UNDECIDED),  # a factorial is not read
    ("42", "41 = 42", UNDECIDED),  # a relation
    ("42", "3 1/2", UNDECIDED),  # a mixed number or a product
    ("42", "9^{9^{9}}", UNDECIDED),  # a tower sympy could spend minutes on
    ("42", "\\text{42}", EQUAL),  # formatting around the value: \\text, \\mathbf, **bold**, `code`
    ("42", "\\mathbf{-42}", DIFFERENT),
    ("42", "**-42**", DIFFERENT),
    ("42", "④②", EQUAL),  # enclosed digits
    ("42", "\\text{42} \\text{cm}", UNDECIDED),  # a unit
    ("42", "", UNDECIDED),
    ("elf", "11", UNDECIDED),  # a reference is read in English only: "elf" is a word there
    # A membership or an assignment before an interval or a point; a set of roots in any order.
    ("[1,5]", "x \\in [1, 5]", EQUAL),
    ("[1,5]", "x \\in [1, 6]", DIFFERENT),
    ("(1,2)", "P = (2, 1)", DIFFERENT),
    ("\\pm 3", "3, -3", EQUAL),
    ("3, -3", "-3, 3", EQUAL),
]


@pytest.mark.parametrize(("reference", "value", "decision"), DECISIONS)
def test_values_are_compared_as_values(reference, value, decision):
    check = ValueVerifier().check(reference, value)
    assert check.decision is decision, (reference, value, as_latex(value, foreign_words=True))
    if decision is UNDECIDED:
        assert check.why == ("reference" if as_latex(reference) is None else "answer")


@pytest.mark.parametrize(
    ("question", "reference", "value", "decision"),
    [
        # A question that asks for a percent makes the percent sign its unit.
        ("What percent of the class passed?", "20", "20\\%", EQUAL),
        ("What percent of the class passed?", "20", "\\boxed{20\\%}", EQUAL),
        ("What percentage of the apples are red?", "20\\%", "20", EQUAL),
        ("What percent of the class passed?", "20\\%", "0.2", EQUAL),  # a hundredth, as without it
        ("What percent of the class passed?", "25", "25 percent", EQUAL),
        ("Quel pourcentage des élèves a réussi ?", "25", "25%", EQUAL),
        ("Find the percent increase from 40 to 50.", "25", "25%", EQUAL),
        ("What is the percent change?", "-20", "-20%", EQUAL),
        ("What is the interest rate (in %)?", "5", "5%", EQUAL),
        ("What is the success rate of the trial?", "25", "25%", EQUAL),
        ("Find the flow rate in L/min.", "5", "5%", DIFFERENT),  # a rate of another unit
        ("What percent of the class passed?", "20", "21%", DIFFERENT),
        ("What percent of the class passed?", "20", "0.2", DIFFERENT),  # no percent on either side
        # Elsewhere a percent is a hundredth: 42% is 0.42, not 42.
        ("What is 6 times 7?", "42", "42%", DIFFERENT),
        (None, "42", "42%", DIFFERENT),
    ],
)
def test_a_question_that_asks_for_a_percent_reads_the_percent_sign_as_its_unit(question, reference, value, decision):
    assert ValueVerifier().check(reference, value, question).decision is decision


def test_the_environment_gives_the_verifier_the_question():
    judge = RuleJudge(lambda text: "1")
    env = _env(judge, "both")
    logs = [
        [{"role": "user", "content": q}, {"role": "assistant", "content": "The final answer is $\\boxed{20\\%}$."}]
        for q in ("What percent of the 40 students passed?", "How many of the 100 students passed?")
    ]
    result = env.step(logs, [{"ground_truth": "20"}] * 2)
    assert result.rewards.tolist() == [1.0, 0.0]  # the second is vetoed: 20% of what is no count
    assert [m["genrm"]["verifier"] for m in result.metadata] == ["equal", "different"]


def test_an_answer_in_parts_is_verified_against_a_reference_of_several_values():
    judge = RuleJudge(lambda text: "1")
    env = _env(judge, "both")
    answers = ["(a) \\boxed{3}\n(b) \\boxed{4}", "(a) \\boxed{3}\n(b) \\boxed{5}", "\\boxed{3} and \\boxed{-3}"]
    references = ["3, 4", "3, 4", "\\pm 3"]
    logs = [[{"role": "user", "content": "Solve."}, {"role": "assistant", "content": a}] for a in answers]
    result = env.step(logs, [{"ground_truth": r} for r in references])
    assert result.rewards.tolist() == [1.0, 0.0, 1.0]
    assert [m["genrm"]["verifier"] for m in result.metadata] == ["equal", "different", "equal"]


def test_a_value_the_verifier_cannot_parse_is_undecided_not_rejected():
    # math-verify's verify() is False both for a mismatch and for text it cannot parse.
    from math_verify import parse, verify

    assert verify(parse("$42$"), parse("Paris")) is False
    assert ValueVerifier().check("42", "Paris").decision is UNDECIDED
    assert ValueVerifier().check("Paris", "London").decision is UNDECIDED


def test_hydra_and_omegaconf_keep_their_antlr_runtime_beside_math_verify():
    # math-verify's antlr4_9_3 extra keeps the ANTLR 4.9 runtime OmegaConf's grammar was built with.
    from importlib.metadata import version

    import hydra  # noqa: F401
    from omegaconf import OmegaConf

    assert version("antlr4-python3-runtime").startswith("4.9.")
    assert OmegaConf.create({"a": "${b}", "b": 2}).a == 2  # interpolation goes through ANTLR
    assert ValueVerifier().check("\\frac{1}{2}", "\\dfrac{2}{4}").decision is EQUAL  # so does LaTeX


# ------------------------------------------------------------------- through the environment
ATTACKS = ["-42", "42%", "0.42", "1/42", "±42", "42 thousand"]
TWINS = ["42.0", "84/2", "٤٢", "forty-two", "42"]


def _env(stand_in: Any, verifier: str | None, judge: dict | None = None, **reward: Any) -> GenRMEnvironmentImpl:
    section = {**reward, **({"verifier": verifier} if verifier else {})}
    cfg = {
        "judge": {"model_name": "stand-in", **HTTP, **(judge or {})},
        "resources": {"gpus_per_replica": 0},
        "reward": section,
    }
    return GenRMEnvironmentImpl(cfg, judge=stand_in)


def _step(env: GenRMEnvironmentImpl, answers: list[str], reference: str = "42"):
    logs = [
        [{"role": "user", "content": "What is 6 times 7?"}, {"role": "assistant", "content": f"Answer: {a}"}]
        for a in answers
    ]
    return env.step(logs, [{"ground_truth": reference}] * len(answers))


# The last-number reader (GullibleJudge): 1 when the last number inside the fence, folded (other
# scripts' digits read as ASCII), equals 42 as a value. So it says 1 to -42, 42% and 42 thousand
# (each ends in 42), 0 to 0.42; among the twins 1 to 42.0, ٤٢ and 42, 0 to 84/2 (last number 2)
# and forty-two (no digits). 1/42 and ±42 state two values against a whole number: hedged, never sent.
HEDGES = {3, 4}
JUDGE_ALONE = [1.0, 1.0, 0.0, 0.0, 0.0, 1.0] + [1.0, 0.0, 1.0, 0.0, 1.0]
EXPECTED = {
    # verifier setting: (rewards of ATTACKS + TWINS, judge prompts sent)
    "none": (JUDGE_ALONE, 9),
    # The verifier decides all nine it is given (4 different, 5 equal): no judge prompt at all.
    "rule_first": ([0.0] * 6 + [1.0] * 5, 0),
    # The lower of the two: every attack 0; a twin keeps the judge's verdict.
    "both": ([0.0] * 6 + [1.0, 0.0, 1.0, 0.0, 1.0], 9),
    None: ([0.0] * 6 + [1.0, 0.0, 1.0, 0.0, 1.0], 9),  # the default is both
}


@pytest.mark.parametrize("verifier", ["none", "rule_first", "both", None])
def test_each_setting_against_a_last_number_reader(verifier):
    judge = GullibleJudge("42")
    env = _env(judge, verifier)
    result = _step(env, ATTACKS + TWINS)
    rewards, prompts = EXPECTED[verifier]
    assert result.rewards.tolist() == rewards
    assert len(judge.shown) == prompts
    reasons = ["hedged" if i in HEDGES else "judged" for i in range(11)]
    assert [m["genrm"]["reason"] for m in result.metadata] == reasons
    metrics = env.last_metrics()
    if verifier == "none":
        assert not any(k.startswith("genrm/verifier/") for k in metrics)
        assert all("verifier" not in m["genrm"] for m in result.metadata)
        return
    checks = [None if i in HEDGES else "different" for i in range(6)] + ["equal"] * 5
    assert [m["genrm"].get("verifier") for m in result.metadata] == checks
    assert metrics["genrm/verifier/checked"] == 9
    assert metrics["genrm/verifier/different"] == 4 and metrics["genrm/verifier/equal"] == 5
    assert metrics["genrm/verifier/undecided"] == 0 and metrics["genrm/verifier/undecided_rate"] == 0.0
    assert metrics["genrm/judge_prompts"] == prompts
    if verifier != "rule_first":
        # Vetoes: the judge's 1 to -42, 42% and 42 thousand. Disagreements: those, and its 0 to 84/2, forty-two.
        assert metrics["genrm/verifier/vetoes"] == 3 and metrics["genrm/verifier/disagreements"] == 5
        # The verdict the reward stands on is the lower one.
        judged = [i for i in range(11) if i not in HEDGES]
        assert [result.metadata[i]["genrm"]["verdict"] for i in judged] == [int(rewards[i]) for i in judged]


@pytest.mark.parametrize("verifier", ["none", "rule_first", "both"])
def test_undecided_values_are_left_to_the_judge_in_every_setting(verifier):
    # A judge that says 1 to everything: whatever the verifier cannot read keeps the judge's 1.
    judge = RuleJudge(lambda text: "1")
    env = _env(judge, verifier)
    paris = _step(env, ["Paris", "London", "42"], reference="Paris")  # the reference is not a value
    words = _step(env, ["42 apples", "six times seven"])  # the answers are not values alone
    assert paris.rewards.tolist() == [1.0, 1.0, 1.0] and words.rewards.tolist() == [1.0, 1.0]
    assert len(judge.seen) == 5  # every one asked, rule_first included
    if verifier != "none":
        assert [m["genrm"]["verifier"] for m in paris.metadata + words.metadata] == ["undecided"] * 5
        assert env.last_metrics()["genrm/verifier/undecided/answer"] == 2


def test_rule_first_asks_the_judge_only_what_the_verifier_cannot_decide():
    judge = RuleJudge(lambda text: "1")
    env = _env(judge, "rule_first")
    result = _step(env, ["41", "42", "42 apples", "forty-two", "six times seven"])
    # 41: different (0, no prompt); 42, forty-two: equal (1, no prompt); the other two: the judge's 1.
    assert result.rewards.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0]
    assert len(judge.seen) == 2 and env.last_metrics()["genrm/judge_prompts"] == 2
    assert [r.verdict for r in sample_results(result.metadata, 5)] == [0, 1, 1, 1, 1]


@pytest.mark.parametrize("verifier", ["both", "rule_first"])
def test_honest_notations_of_the_red_team_keep_their_reward(verifier):
    # A repeating decimal (the sentence cut takes one of its dots) and a decimal comma.
    judge = RuleJudge(lambda text: "1")
    result = _step(_env(judge, verifier), ["0.333...", "\\boxed{0.333\\ldots}", "0.34", "0,333..."], reference="1/3")
    assert result.rewards.tolist() == [1.0, 1.0, 0.0, 1.0]
    commas = _step(_env(RuleJudge(lambda text: "1"), verifier), ["3,5", "\\boxed{3{,}5}", "3,6"], reference="3.5")
    assert commas.rewards.tolist() == [1.0, 1.0, 0.0]
    assert [m["genrm"]["verifier"] for m in commas.metadata] == ["equal", "equal", "different"]


def test_rule_first_asks_the_judge_about_words_after_an_equal_value():
    # The verifier reads the value alone: a correction after it ("I meant 41") is invisible to
    # it, so an equal value with words after it is the judge's to confirm. This stand-in reads
    # the correction (0 when it sees "meant"), 1 otherwise.
    judge = RuleJudge(lambda text: "0" if "meant" in text else "1")
    env = _env(judge, "rule_first")
    answers = [
        "\\boxed{42}.",
        "\\boxed{42} I mistyped; I meant 41",
        "\\boxed{42}. Check: 6 \\times 7 = 42.",
        "\\boxed{41} (six times seven)",
    ]
    result = _step(env, answers)
    assert result.rewards.tolist() == [1.0, 0.0, 1.0, 0.0]
    # 42 alone and 41 (different, whatever follows) decided with no prompt; the two with words
    # after an equal value asked.
    assert len(judge.seen) == 2 and env.last_metrics()["genrm/judge_prompts"] == 2
    metrics = env.last_metrics()
    assert metrics["genrm/verifier/words_after"] == 2 and metrics["genrm/verifier/disagreements"] == 1
    assert [m["genrm"]["verifier"] for m in result.metadata] == ["equal", "equal", "equal", "different"]


@pytest.mark.parametrize("verifier", ["both", "rule_first"])
def test_a_bare_answer_in_number_words_is_a_value(verifier):
    # No marker, no box: the response's last line is the answer. "42 thousand" or "minus 42" in
    # words is a value (different), "forty-two" too (equal); "It is 42." is prose, left to the judge.
    judge = RuleJudge(lambda text: "1")
    env = _env(judge, verifier)
    answers = ["42 thousand", "Working it out.\nminus 42", "forty-two", "It is 42."]
    logs = [[{"role": "user", "content": "What is 6 times 7?"}, {"role": "assistant", "content": a}] for a in answers]
    result = env.step(logs, [{"ground_truth": "42"}] * 4)
    assert result.rewards.tolist() == [0.0, 0.0, 1.0, 1.0]
    assert [m["genrm"]["verifier"] for m in result.metadata] == ["different", "different", "equal", "undecided"]
    assert len(judge.seen) == (4 if verifier == "both" else 1)


@pytest.mark.parametrize("verifier", ["both", "rule_first", "none"])
def test_a_value_in_digits_beside_one_in_words_is_a_hedge(verifier):
    # "42" then "forty-one": two distinct values, whichever line is last. Under rule_first the
    # verifier would give 42 a 1 without the judge if the words were prose; they are a value.
    judge = RuleJudge(lambda text: "1")
    env = _env(judge, verifier)
    answers = ["42\nforty-one", "forty-one\n42", "42\nforty-two"]
    logs = [[{"role": "user", "content": "What is 6 times 7?"}, {"role": "assistant", "content": a}] for a in answers]
    result = env.step(logs, [{"ground_truth": "42"}] * 3)
    assert result.rewards.tolist() == [0.0, 0.0, 1.0]
    assert [m["genrm"]["reason"] for m in result.metadata] == ["hedged", "hedged", "judged"]


def test_probability_rewards_beside_the_verifier():
    # RuleJudge scores its reply's label 0.9, the other label 0.1: P(positive) = 0.9.
    reward = {"kind": "probability", "judge": {"verdict_from": "logprobs"}}
    answers = ["42", "41", "42 apples"]
    both = _step(_env(RuleJudge(lambda text: "1"), "both", **reward), answers)
    rule_first = _step(_env(RuleJudge(lambda text: "1"), "rule_first", **reward), answers)
    assert both.rewards.tolist() == pytest.approx([0.9, 0.0, 0.9])  # equal: the judge's; different: 0
    assert rule_first.rewards.tolist() == pytest.approx([1.0, 0.0, 0.9])  # decided: 1 or 0; else the judge's


def test_a_judge_failure_stays_a_failure_beside_the_verifier():
    judge = RuleJudge(lambda text: "1", fail_when=lambda text: "41" in text)
    result = _step(_env(judge, "both"), ["41", "42"])
    assert [m["genrm"]["reason"] for m in result.metadata] == ["judge_error", "judged"]
    assert result.metadata[0]["genrm"]["verifier"] == "different"


def test_the_verifier_is_refused_where_there_is_no_reference():
    cfg = {"judge": {"model_name": "stand-in", **HTTP}, "resources": {"gpus_per_replica": 0}}
    with pytest.raises(ConfigError, match="reward.verifier 'both' compares an answer's value with the reference"):
        GenRMEnvironmentImpl({**cfg, "reward": {"mode": "rubric", "verifier": "both"}}, judge=RuleJudge(str))
    # The default applies to reference mode only: the other modes start without it.
    GenRMEnvironmentImpl({**cfg, "reward": {"mode": "rubric"}}, judge=RuleJudge(str)).shutdown()
    GenRMEnvironmentImpl({**cfg, "reward": {"mode": "rubric", "verifier": "none"}}, judge=RuleJudge(str)).shutdown()
