"""The drop-ins' own logic, without their frameworks: runs in the main suite.

The call shapes are those TRL and verl use (see test_trl_reward.py and test_verl_reward.py for
the same code driven by the frameworks themselves).
"""

from __future__ import annotations

import asyncio

import pytest
from dropins_support import GENRM_SECTION, RuleJudge, RuleServer, http_section

from nemo_genrm.config import ConfigError
from nemo_genrm.integrations import verl as verl_dropin
from nemo_genrm.integrations.judge_reward import JudgeReward, genrm_section
from nemo_genrm.integrations.trl import GenRMReward

ANSWERS = ["Answer: RIGHT", "Answer: WRONG", "Answer: CONFUSE", "Answer: CRASH", ""]
REASONS = ["judged", "judged", "parse_failure", "judge_error", "no_answer"]


def test_judge_reward_reasons_and_judge_failures():
    judge = RuleJudge()
    with JudgeReward(GENRM_SECTION, judge=judge) as reward:
        got = reward.judge(ANSWERS + ["Answer: RIGHT"], ["4"] * 5 + [None], ["What is 2+2?"] * 6)
        metrics = reward.metrics()
    assert [j.reason for j in got] == REASONS + ["missing_ground_truth"]
    assert [j.reward_or_none for j in got] == [1.0, 0.0, None, None, 0.0, 0.0]
    assert [j.judge_failed for j in got] == [False, False, True, True, False, False]
    assert metrics["genrm/num_samples"] == 6.0 and len(judge.prompts) == 4
    with pytest.raises(ValueError, match="one of each"):
        JudgeReward(GENRM_SECTION, judge=judge).judge(["a"], [], None)


def test_genrm_section_accepts_a_path_a_run_config_or_the_section(tmp_path):
    section = http_section("http://127.0.0.1:1/v1")
    assert genrm_section({"env": {"genrm": section}}) == section
    assert genrm_section({"genrm": section}) == section
    assert genrm_section(section) == section
    path = tmp_path / "run.yaml"
    path.write_text("env:\n  genrm:\n    judge: {backend: http, model_name: j, http: {base_url: null}}\n")
    loaded = genrm_section(path, ["env.genrm.judge.model_name=other"])
    assert loaded["judge"]["model_name"] == "other"
    with pytest.raises(ConfigError):  # a bad section fails at once, with the config's own message
        JudgeReward({"judge": {"backend": "http", "model_name": "j", "nope": 1}})


def test_trl_reward_follows_trl_call_shapes():
    """Chat prompts and completions as TRL passes them; None exactly where the judge failed."""
    judge = RuleJudge()
    reward = GenRMReward(GENRM_SECTION, judge=judge, reference_column="solution")
    prompts = [[{"role": "system", "content": "be brief"}, {"role": "user", "content": "What is 2+2?"}]] * 5
    completions = [[{"role": "assistant", "content": answer}] for answer in ANSWERS]
    metrics, extra = {}, {}
    rewards = asyncio.run(
        reward(
            prompts=prompts,
            completions=completions,
            completion_ids=[[1, 2]] * 5,
            solution=["4"] * 5,
            trainer_state=None,
            log_metric=lambda name, value: metrics.setdefault(name, value),
            log_extra=lambda column, values: extra.setdefault(column, values),
        )
    )
    assert rewards == [1.0, 0.0, None, None, 0.0]
    assert extra["genrm_reason"] == REASONS
    assert metrics["genrm/parse_failure_rate"] > 0 and metrics["genrm/num_samples"] == 5.0
    assert all("What is 2+2?" in p and "be brief" not in p for p in judge.prompts)  # the user turn is the question
    assert reward.__name__ == "genrm"
    with pytest.raises(KeyError, match="ground_truth"):
        asyncio.run(GenRMReward(GENRM_SECTION, judge=judge)(prompts=["q"], completions=["a"], completion_ids=[[1]]))


def test_verl_compute_score_fields_and_router():
    try:
        with RuleServer() as server:
            direct = [
                asyncio.run(
                    verl_dropin.compute_score(
                        "math", a, "4", {"question": "q?"}, genrm_config=http_section(server.base_url)
                    )
                )
                for a in ANSWERS
            ]
            routed = asyncio.run(
                verl_dropin.compute_score(
                    "math", "Answer: RIGHT", 4, None, server.address, None, genrm_config=http_section(None)
                )
            )
    finally:
        verl_dropin.close_shared_rewards()
    assert [d["score"] for d in direct] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert [d["acc"] for d in direct] == [1.0, 0.0, None, None, 0.0]
    assert [d["genrm_reason"] for d in direct] == REASONS
    assert routed["score"] == 1.0  # an integer reference is judged as its text
    # One judge per distinct config: the five direct calls shared one, the routed call had its own.
    assert len(server.prompts) == 5


# ------------------------------------------------------------------ modes and masks
def test_trl_reward_feeds_each_mode_and_masks_are_none():
    from nemo_genrm.integrations.trl import prompt_runs
    from nemo_genrm.testing.integrity_judges import criterion_in_response, more_working_wins
    from nemo_genrm.testing.tagged_value_judges import RuleJudge as ModeJudge

    prompt = [{"role": "user", "content": "Why?"}]
    pairwise = GenRMReward({**GENRM_SECTION, "reward": {"mode": "pairwise_group"}}, judge=ModeJudge(more_working_wins))
    # No reference column. Without group_size the eight completions of one prompt are one group;
    # the working each shows: 1, 2, -, -, 0, 1, 3, 0 ("" and "." have no answer: 0, not ranked).
    texts = ["because", "because because", "", ".", "x", "because x", "because because because", "y"]
    rewards = asyncio.run(pairwise(prompts=[prompt] * 8, completions=texts, completion_ids=[[1]] * 8))
    assert rewards == pytest.approx([2.5 / 5, 4 / 5, 0.0, 0.0, 0.5 / 5, 2.5 / 5, 1.0, 0.5 / 5])
    # With group_size 4 the same prompt's two runs of four are two groups (two dataset rows).
    sized = GenRMReward(
        {**GENRM_SECTION, "reward": {"mode": "pairwise_group", "pairwise_group": {"group_size": 4}}},
        judge=ModeJudge(more_working_wins),
    )
    masked = asyncio.run(
        sized(prompts=[prompt] * 8, completions=["because", "", "", ""] + texts[4:], completion_ids=[[1]] * 8)
    )
    assert masked[:4] == [None, 0.0, 0.0, 0.0]  # alone among unanswered ones: masked, None for TRL
    assert masked[4:] == pytest.approx([0.5 / 3, 2 / 3, 1.0, 0.5 / 3])
    assert prompt_runs([prompt] * 8, 4) == [0] * 4 + [1] * 4 and prompt_runs([prompt] * 8, None) == [0] * 8

    rubric = GenRMReward({**GENRM_SECTION, "reward": {"mode": "rubric"}}, judge=ModeJudge(criterion_in_response))
    items = [[{"criterion": "kw:because", "weight": 3}, {"criterion": "kw:never", "weight": None}]] * 2
    shares = asyncio.run(
        rubric(
            prompts=[prompt] * 2,
            completions=["x because y. Answer: 4", "Answer: 4"],
            completion_ids=[[1]] * 2,
            rubric=items,
        )
    )
    assert shares == [0.75, 0.0]
    with pytest.raises(KeyError, match="rubric"):
        asyncio.run(rubric(prompts=[prompt], completions=["a"], completion_ids=[[1]]))


def test_verl_and_gym_fields_carry_masks():
    from nemo_genrm.integrations.judge_reward import Judgement

    lone = Judgement(0.0, "incomplete_group", None, "because", masked=True)
    fields = verl_dropin.result_fields(lone, "pairwise_group")
    assert (fields["genrm_masked"], fields["acc"], fields["genrm_judge_failed"]) == (1.0, None, 0.0)
    assert verl_dropin.result_fields(Judgement(0.5, "judged", None, "x"), "pairwise_group")["acc"] is None
    assert verl_dropin.result_fields(Judgement(0.0, "no_answer", None, None))["acc"] == 0.0
    assert lone.reward_or_none is None and not lone.judge_failed


# Each value is malformed, and each must be bad_input (reward 0, counted), never judged:
MALFORMED_RUBRICS = [
    {"criterion": "kw:because", "weight": 1},  # one item, not a list: list() gave its keys, judged as criteria
    "kw:because",  # a string: list() gave its characters
    [3],  # an item that is neither text nor {criterion, weight}
    [{"criterion": "kw:because", "weight": -1}],  # a weight that is not > 0
]


def test_malformed_rubric_items_are_bad_input_in_trl_and_verl():
    import numpy as np

    from nemo_genrm.testing.integrity_judges import StandInServer, criterion_in_response
    from nemo_genrm.testing.tagged_value_judges import RuleJudge as ModeJudge

    section = {**GENRM_SECTION, "reward": {"mode": "rubric"}}
    judge = ModeJudge(criterion_in_response)
    rubric = GenRMReward(section, judge=judge)
    size = len(MALFORMED_RUBRICS)
    extra: dict = {}
    rewards = asyncio.run(
        rubric(
            prompts=["Why?"] * size,
            completions=["x because y"] * size,
            completion_ids=[[1]] * size,
            rubric=MALFORMED_RUBRICS,
            log_extra=lambda column, values: extra.setdefault(column, values),
        )
    )
    assert rewards == [0.0] * size and extra["genrm_reason"] == ["bad_input"] * size
    assert judge.seen == []

    def rule(body: dict) -> str:
        return criterion_in_response(StandInServer.user_text(body))

    with StandInServer(rule) as server:
        verl_section = {**http_section(server.base_url), "reward": {"mode": "rubric"}}
        try:
            got = [
                asyncio.run(
                    verl_dropin.compute_score("math", "x because y", None, {"rubric": value}, genrm_config=verl_section)
                )
                for value in [*MALFORMED_RUBRICS, np.array([{"criterion": "kw:because", "weight": 1}], dtype=object)]
            ]
        finally:
            verl_dropin.close_shared_rewards()
        asked = len(server.bodies)
    assert [g["genrm_reason"] for g in got] == ["bad_input"] * size + ["judged"]
    assert [g["score"] for g in got] == [0.0] * size + [1.0]  # a parquet row's array of items is a list
    assert asked == 1  # only the well-formed rubric reached the judge


def test_verl_pairwise_groups_by_uid_and_prompt_never_by_a_bare_index():
    """verl's preprocessing numbers every data file from 0, and its MATH script writes no question.

    Two files, each with one prompt at ``index`` 0, four responses each, interleaved: with the uid
    and prompt that nemo_genrm's reward manager passes, each prompt's four are ranked alone (by
    ``index`` alone they shared a key and were ranked in arrival quartets across both prompts).
    Without them (verl's own managers) the call is refused, naming the manager.
    """
    from nemo_genrm.testing.integrity_judges import StandInServer, more_working_wins

    working = [0, 4, 1, 5, 2, 6, 3, 7]  # rows alternate between the two files' prompts
    sources = ["gsm8k", "math"] * 4
    reward = {"mode": "pairwise_group", "pairwise_group": {"group_size": 4}}

    async def score_all(section):
        return await asyncio.gather(
            *(
                verl_dropin.compute_score(
                    source,
                    "Answer: 7. " + "because " * w,
                    None,
                    {"index": 0},
                    genrm_config=section,
                    genrm_group=f"uuid-{source}",
                    genrm_prompt=[101, 7 + len(source)],
                )
                for w, source in zip(working, sources, strict=True)
            )
        )

    with StandInServer(lambda body: more_working_wins(StandInServer.user_text(body))) as server:
        section = {**http_section(server.base_url), "reward": reward}
        try:
            got = asyncio.run(score_all(section))
            with pytest.raises(ConfigError, match="GenRMRewardManager"):
                asyncio.run(verl_dropin.compute_score("math", "Answer: 7", None, {"index": 0}, genrm_config=section))
        finally:
            verl_dropin.close_shared_rewards()
    # Within each file's prompt the working is 0..3 (+4 for math): win rates 0, 1/3, 2/3, 1 in both.
    assert [g["score"] for g in got] == pytest.approx([0, 0, 1 / 3, 1 / 3, 2 / 3, 2 / 3, 1, 1])
    assert {g["genrm_reason"] for g in got} == {"judged"}


class _FakeActor:
    """A handle on the verl groups' shared actor: dead (every call raises Ray's ActorDiedError), or live."""

    def __init__(self, alive: bool) -> None:
        self.alive, self.calls = alive, 0
        self.judge = self  # handle.judge.remote(...) as Ray's handles are called

    def remote(self, *args):
        import ray

        from nemo_genrm.integrations.judge_reward import Judgement

        self.calls += 1

        async def reply():
            if not self.alive:
                raise ray.exceptions.ActorDiedError()
            return Judgement(1.0, "judged", None, args[0])

        return reply()


def _gathered_with(monkeypatch, handles: list[_FakeActor]):
    """A GatheredReward whose get-or-create hands out ``handles`` in turn (no Ray cluster)."""
    from nemo_genrm.config import GenRMConfig, validate
    from nemo_genrm.integrations import verl_groups

    section = {
        **http_section("http://127.0.0.1:9/v1"),
        "reward": {"mode": "pairwise_group", "pairwise_group": {"group_size": 2}},
    }
    given = iter(handles)
    monkeypatch.setattr(verl_groups.GatheredReward, "_connect", lambda self: next(given))
    return verl_groups.GatheredReward(section, validate(GenRMConfig, section, prefix="env.genrm"))


def test_verl_shared_judge_found_dead_is_got_again_once_per_call(monkeypatch):
    """A dead shared actor is dropped and got (or created) again; still dead: JudgeUnavailableError."""
    from nemo_genrm.errors import JudgeUnavailableError

    dead, live = _FakeActor(alive=False), _FakeActor(alive=True)
    reward = _gathered_with(monkeypatch, [dead, live])
    got = asyncio.run(reward.ajudge(["Answer: 1"], None, None, [{"group_id": 0}]))
    assert [j.reason for j in got] == ["judged"] and (dead.calls, live.calls) == (1, 1)
    asyncio.run(reward.ajudge(["Answer: 2"], None, None, [{"group_id": 0}]))
    assert (dead.calls, live.calls) == (1, 2)  # the live handle is kept for later calls

    first, second = _FakeActor(alive=False), _FakeActor(alive=False)
    reward = _gathered_with(monkeypatch, [first, second])
    with pytest.raises(JudgeUnavailableError, match=reward.name):
        asyncio.run(reward.ajudge(["Answer: 1"], None, None, [{"group_id": 0}]))
    assert (first.calls, second.calls) == (1, 1)  # got again once in the call, then raised


# --------------------------------------------------------------- content parts and bad_input whys
IMAGE = {"type": "image", "image": None}  # a VLM dataset's image part (its payload left out here)


def _parts(*texts: str) -> list[dict]:
    return [{"type": "text", "text": t} for t in texts]


def test_judge_reward_reads_content_parts_and_message_lists():
    """Responses as text, content parts or message lists; questions as text or parts."""
    judge = RuleJudge()
    answers = [
        _parts("Working.\n", "Answer: RIGHT"),  # parts (joined by newlines): 1; its answer a paragraph of its own
        [IMAGE, *_parts("Answer: WRONG")],  # text beside an image: 0
        [{"role": "assistant", "content": _parts("Answer: RIGHT")}],  # a message list: its assistant's parts
        [IMAGE],  # no text part: bad_input
        [{"role": "tool", "content": "4"}],  # a message list without an assistant message: bad_input
    ]
    with JudgeReward(GENRM_SECTION, judge=judge) as reward:
        got = reward.judge(answers, ["4"] * 5, [[IMAGE, *_parts("What is", "2+2?")]] * 5)
    assert [(j.reward, j.reason, j.why) for j in got] == [
        (1.0, "judged", None),
        (0.0, "judged", None),
        (1.0, "judged", None),
        (0.0, "bad_input", "no_text_part"),
        (0.0, "bad_input", "no_assistant_message"),
    ]
    # The two RIGHT answers are one judgement (dedup): two prompts, each showing the question's text.
    assert len(judge.prompts) == 2 and all("What is\n2+2?" in p for p in judge.prompts)


def test_trl_and_verl_read_content_parts_and_log_the_why():
    """TRL's shapes for a vision-language model (every content a list of parts, as
    ``prepare_multimodal_messages`` makes them) and a verl row whose question is parts."""
    import numpy as np

    judge = RuleJudge()
    reward = GenRMReward(GENRM_SECTION, judge=judge, reference_column="solution")
    prompt = [{"role": "user", "content": [IMAGE, *_parts("What is 2+2?")]}]
    completions = [
        [{"role": "assistant", "content": _parts("Answer: RIGHT")}],
        [{"role": "assistant", "content": _parts("Answer: WRONG")}],
        [{"role": "assistant", "content": [IMAGE]}],
    ]
    extra: dict = {}
    rewards = asyncio.run(
        reward(
            prompts=[prompt] * 3,
            completions=completions,
            completion_ids=[[1]] * 3,
            solution=["4"] * 3,
            log_extra=lambda column, values: extra.setdefault(column, values),
        )
    )
    assert rewards == [1.0, 0.0, 0.0]
    assert extra["genrm_reason"] == ["judged", "judged", "bad_input"]
    assert extra["genrm_why"] == [None, None, "no_text_part"]
    assert len(judge.prompts) == 2 and all("What is 2+2?" in p for p in judge.prompts)

    question = np.array(_parts("What is", "2+2?"), dtype=object)  # a Parquet list column read by pandas
    with RuleServer() as server:
        try:
            got = asyncio.run(
                verl_dropin.compute_score(
                    "math", "Answer: RIGHT", "4", {"question": question}, genrm_config=http_section(server.base_url)
                )
            )
        finally:
            verl_dropin.close_shared_rewards()
        prompts = server.prompts
    assert (got["score"], got["genrm_reason"], got["genrm_why"]) == (1.0, "judged", None)
    assert len(prompts) == 1 and "What is\n2+2?" in prompts[0]
