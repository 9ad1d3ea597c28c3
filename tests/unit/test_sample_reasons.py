"""Every sample carries its reason: OpenAI-style content parts are read as their text in every
mode, a ``bad_input`` says what was wrong, and every returned metadata entry holds its result.

Through ``GenRMEnvironmentImpl`` with stand-in judges whose verdict is a known function of what
they are shown (:mod:`nemo_genrm.testing.rule_judges`), so every reward below is computed by hand.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.samples.inputs import content_text
from nemo_genrm.samples.types import BAD_INPUT_WHYS, SampleResult, sample_results
from nemo_genrm.testing.rule_judges import RuleJudge, keyword_met, larger_wins, same_value, tagged_values

HTTP = {"backend": "http", "http": {"base_url": "http://stand-in/v1"}}
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


def _env(rule, reward: dict[str, Any] | None = None) -> tuple[GenRMEnvironmentImpl, RuleJudge]:
    judge = RuleJudge(rule)
    cfg = {"judge": {"model_name": "stand-in", **HTTP}, "resources": {"gpus_per_replica": 0}, "reward": reward or {}}
    return GenRMEnvironmentImpl(cfg, judge=judge), judge


def _parts(*texts: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t} for t in texts]


def _log(response: Any, question: Any = "Which number?") -> list[dict[str, Any]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": response}]


def _genrm(result) -> list[tuple[str, str | None]]:
    return [(m["genrm"]["reason"], m["genrm"]["why"]) for m in result.metadata]


# ---------------------------------------------------------------------------- content_text
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("plain", ("plain", None)),
        (_parts("Answer: 4"), ("Answer: 4", None)),
        # several text parts: joined by newlines, as vLLM renders them for a text-only model
        (_parts("Working.", "Answer: 4"), ("Working.\nAnswer: 4", None)),
        # an image beside the text is left out; the text is the content
        ([IMAGE, *_parts("Answer: 4")], ("Answer: 4", None)),
        # the Responses API's part types (NeMo Gym's input and output)
        ([{"type": "input_text", "text": "Q"}, {"type": "output_text", "text": "A"}], ("Q\nA", None)),
        # a datasets (Arrow) column fills a struct's missing fields with None: the image's text is None
        ([{"type": "image", "text": None}, {"type": "text", "text": "Q", "image": None}], ("Q", None)),
        ((*_parts("a"),), ("a", None)),  # a tuple of parts
        (np.array(_parts("a", "b"), dtype=object), ("a\nb", None)),  # a Parquet list column read by pandas
        (_parts(""), ("", None)),  # a text part holding nothing is text (no_answer later, not bad_input)
        ([IMAGE], (None, "no_text_part")),
        ([], (None, "no_text_part")),
        ([{"type": "refusal", "refusal": "I cannot."}], ("I cannot.", None)),  # a refusal's words are text
        ([{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}], (None, "no_text_part")),
        (None, (None, "content_not_text")),
        (7, (None, "content_not_text")),
        ({"type": "text", "text": "a"}, (None, "content_not_text")),  # one part, not a list of them
        (["Answer: 4"], (None, "content_not_text")),  # bare strings are no OpenAI parts
        ([{"text": "a"}], (None, "content_not_text")),  # a part without its type
        ([{"type": "text", "text": None}], (None, "content_not_text")),  # a text part without text
        ([*_parts("a"), 3], (None, "content_not_text")),  # one malformed part spoils the content
    ],
)
def test_content_text(content, expected):
    assert content_text(content) == expected


# ------------------------------------------------------------------- every mode reads parts
def test_reference_mode_judges_the_text_parts_of_response_and_question():
    env, judge = _env(same_value)
    logs = [
        _log(_parts("Thinking.", "Answer: ans-42"), question=_parts("What is", "6 x 7?")),  # right: 1
        _log([IMAGE, *_parts("Answer: ans-41")]),  # wrong, beside an image: 0
        _log([IMAGE]),  # no text part: bad_input, never judged
    ]
    metas = [{"ground_truth": "ans-42"}] * 3
    result = env.step(logs, metas)
    assert result.rewards.tolist() == [1.0, 0.0, 0.0]
    assert _genrm(result) == [("judged", None), ("judged", None), ("bad_input", "no_text_part")]
    assert len(judge.seen) == 2 and "What is\n6 x 7?" in judge.seen[0]
    assert result.answers[:2] == ["ans-42", "ans-41"] and result.answers[2] is None


def test_pairwise_mode_ranks_responses_given_as_parts():
    env, judge = _env(larger_wins, {"mode": "pairwise_group"})
    question = [IMAGE, *_parts("Which number is best?")]
    responses = [
        _parts("Answer: ans-3"),
        [IMAGE, *_parts("Answer: ans-1")],
        _parts("Thinking.", "Answer: ans-4"),
        [IMAGE],
    ]
    result = env.step([_log(r, question) for r in responses], [{} for _ in responses])
    # larger_wins over the three readable responses: 3 beats 1 and loses to 4 -> 1/2; 1 -> 0; 4 -> 1.
    # The image-only response arrived in its group (its question is read) but is not ranked.
    assert result.rewards.tolist() == [0.5, 0.0, 1.0, 0.0]
    assert _genrm(result) == [("judged", None)] * 3 + [("bad_input", "no_text_part")]
    assert len(judge.seen) == 6 and all("Which number is best?" in text for text in judge.seen)
    assert all(len(tagged_values(text)) == 2 for text in judge.seen)


def test_rubric_mode_checks_the_text_parts():
    env, judge = _env(keyword_met, {"mode": "rubric"})
    items = {"rubric": ["kw:alpha", "kw:beta"]}
    responses = [[IMAGE, *_parts("alpha", "gamma")], _parts("alpha beta"), [IMAGE]]
    result = env.step([_log(r, _parts("Name two Greek letters.")) for r in responses], [items] * 3)
    # keyword_met: alpha met, beta not -> 1/2; both met -> 1; no text part -> bad_input, 0.
    assert result.rewards.tolist() == [0.5, 1.0, 0.0]
    assert _genrm(result) == [("judged", None), ("judged", None), ("bad_input", "no_text_part")]
    assert len(judge.seen) == 4 and all("Name two Greek letters." in text for text in judge.seen)


# ---------------------------------------------------------------- bad_input says what was wrong
_GOOD = _log("Answer: ans-3")
_TRUTH = {"ground_truth": "ans-3"}
_BAD_INPUTS: dict[str, tuple[Any, Any]] = {
    "metadata_not_dict": (_GOOD, "ans-3"),
    "not_messages": ("Answer: ans-3", _TRUTH),
    "no_assistant_message": ([{"role": "user", "content": "hi"}], _TRUTH),
    "content_not_text": (_log(None), _TRUTH),
    "no_text_part": (_log([IMAGE]), _TRUTH),
    "bad_ground_truth": (_GOOD, {"ground_truth": float("nan")}),
}


def test_each_bad_input_gives_its_why_in_metadata_result_and_metrics():
    env, _ = _env(same_value)
    whys = list(_BAD_INPUTS)
    result = env.step([_BAD_INPUTS[w][0] for w in whys] + [_GOOD], [_BAD_INPUTS[w][1] for w in whys] + [_TRUTH])
    assert result.rewards.tolist() == [0.0] * len(whys) + [1.0]
    assert _genrm(result) == [("bad_input", w) for w in whys] + [("judged", None)]
    assert [r.why for r in sample_results(result.metadata, len(whys) + 1)] == [*whys, None]
    metrics = env.last_metrics()
    assert metrics["genrm/count/bad_input"] == len(whys)
    assert {k: v for k, v in metrics.items() if k.startswith("genrm/bad_input/")} == {
        f"genrm/bad_input/{w}": 1.0 for w in whys
    }
    assert set(whys) | {"bad_rubric"} == set(BAD_INPUT_WHYS)  # the vocabulary is closed


def test_a_malformed_rubric_is_bad_input_bad_rubric():
    env, _ = _env(keyword_met, {"mode": "rubric"})
    result = env.step([_log("alpha")] * 2, [{"rubric": "kw:alpha"}, {"rubric": ["kw:alpha"]}])
    assert result.rewards.tolist() == [0.0, 1.0]
    assert _genrm(result) == [("bad_input", "bad_rubric"), ("judged", None)]
    assert env.last_metrics()["genrm/bad_input/bad_rubric"] == 1


# ------------------------------------------------------ every metadata entry carries its result
@pytest.mark.parametrize("mode", ["reference", "pairwise_group", "rubric"])
def test_every_returned_entry_is_a_dict_holding_its_result(mode):
    rule = {"reference": same_value, "pairwise_group": larger_wins, "rubric": keyword_met}[mode]
    env, _ = _env(rule, {"mode": mode})
    passed = [None, "a string", 7, ["a", "list"], {"ground_truth": "ans-3", "rubric": ["kw:ans"], "mine": 1}]
    result = env.step([_GOOD] * len(passed), passed)
    reasons = [m["genrm"]["reason"] for m in result.metadata]  # never a KeyError or TypeError
    assert reasons[1:4] == ["bad_input"] * 3
    assert [m["genrm"]["why"] for m in result.metadata[1:4]] == ["metadata_not_dict"] * 3
    # None: nothing passed, a dict of its result alone; anything else kept whole under "metadata".
    assert list(result.metadata[0]) == ["genrm"]
    assert [m["metadata"] for m in result.metadata[1:4]] == passed[1:4]
    assert {k: v for k, v in result.metadata[4].items() if k != "genrm"} == passed[4]
    assert all(isinstance(r, SampleResult) for r in sample_results(result.metadata, len(passed)))


# ------------------------------------------------------------------- the judge service's requests
def test_the_judge_service_reads_text_parts_and_refuses_content_without_text():
    from nemo_genrm.config import JudgeConfig
    from nemo_genrm.serve.config import ServiceConfig
    from nemo_genrm.serve.guard import RequestError
    from nemo_genrm.serve.requests import parse_chat

    cfg = ServiceConfig(judge=JudgeConfig(model_name="judge"))
    body = {
        "messages": [{"role": "system", "content": "Grade."}, {"role": "user", "content": [IMAGE, *_parts("a", "b")]}]
    }
    call = parse_chat(body, cfg)
    assert call.request.messages == ({"role": "system", "content": "Grade."}, {"role": "user", "content": "a\nb"})
    for content, why in (([IMAGE], "no_text_part"), ([{"type": "text"}], "content_not_text")):
        with pytest.raises(RequestError) as info:
            parse_chat({"messages": [{"role": "user", "content": content}]}, cfg)
        assert (info.value.status, info.value.body["error"]["param"]) == (400, "messages.0.content")
        assert why in str(info.value)
