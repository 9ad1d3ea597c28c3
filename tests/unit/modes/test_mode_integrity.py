"""Reward integrity of every mode through GenRMEnvironmentImpl, with stand-in judges whose verdict
is a known function of what they are shown (nemo_genrm.testing.integrity_judges): pairwise and
rubric judge the whole response, votes are independent draws, masks and template errors.

Every expected reward below is computed by hand from the stand-in's rule.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import Any

import pytest

from nemo_genrm.config import ConfigError
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.errors import JudgeUnavailableError
from nemo_genrm.testing.integrity_judges import (
    Reply,
    SeededJudge,
    StandInServer,
    criterion_in_response,
    dead_base_url,
    more_working_wins,
    multi_token_reply,
    seeded_bit,
    shown_responses,
    working,
)
from nemo_genrm.testing.tagged_value_judges import RuleJudge

HTTP = {"backend": "http", "http": {"base_url": "http://stand-in/v1", "supports_logprobs": True}}


def _cfg(reward: dict[str, Any], *, judge: dict | None = None, **sections: Any) -> dict:
    judge = {"model_name": "stand-in", **HTTP, **(judge or {})}
    return {"judge": judge, "resources": {"gpus_per_replica": 0}, "reward": reward, **sections}


def _logs(responses: list[str], question: str = "Why is the sky blue?") -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": question}, {"role": "assistant", "content": r}] for r in responses]


def _win_rates(scores: list[int]) -> list[float]:
    """more_working_wins by hand: 1 per opponent with less working, 1/2 per equal, over the others."""
    out = []
    for i, mine in enumerate(scores):
        others = [s for j, s in enumerate(scores) if j != i]
        out.append(sum(1.0 if mine > s else 0.5 if mine == s else 0.0 for s in others) / len(others))
    return out


# Four responses with the same final answer and different working (0, 1, 2 and 3 "because").
SAME_ANSWER = [
    "Rayleigh scattering. Answer: scattering",
    "Blue scatters more because it is shorter. Answer: scattering",
    "Because blue is short, and because short waves scatter more. Answer: scattering",
    "Because of size, because of wavelength, because of air. Answer: scattering",
]


# --------------------------------------------------------------------- 1. what is shown
def test_pairwise_judges_the_whole_response_not_the_extracted_answer():
    judge = RuleJudge(more_working_wins)
    env = GenRMEnvironmentImpl(_cfg({"mode": "pairwise_group"}), judge=judge)
    result = env.step(_logs(SAME_ANSWER), [{}] * 4)
    assert result.rewards.tolist() == pytest.approx(_win_rates([0, 1, 2, 3]))  # [0, 1/3, 2/3, 1]
    assert env.last_metrics()["genrm/judge_prompts"] == 12  # 6 pairs, both orders
    # Each response is shown whole, fenced, and the answers returned are what was shown.
    assert all(len(shown_responses(text)) == 2 for text in judge.seen)
    assert all("<candidate-" in text for text in judge.seen)
    assert result.answers == SAME_ANSWER


def test_pairwise_free_form_answers_are_compared_whole_not_on_their_tail():
    tail = " and that is all there is to say about it." * 10  # 430 characters shared by both
    responses = ["It is blue because of scattering" + tail, "It is blue" + tail]
    judge = RuleJudge(more_working_wins)
    env = GenRMEnvironmentImpl(_cfg({"mode": "pairwise_group"}), judge=judge)
    assert env.step(_logs(responses), [{}, {}]).rewards.tolist() == [1.0, 0.0]


def test_rubric_judges_the_whole_response_the_docs_example():
    # docs/modes.md's rubric example: both criteria are met in the reasoning, not in the answer line.
    response = (
        "Suppose sqrt(2) = p/q in lowest terms. Then p^2 = 2 q^2, so p is even; the parity argument "
        "makes q even too, a contradiction. Answer: sqrt(2) is irrational"
    )
    judge = RuleJudge(criterion_in_response)
    env = GenRMEnvironmentImpl(_cfg({"mode": "rubric"}), judge=judge)
    items = [{"criterion": "argues by kw:contradiction", "weight": 2}, "names the kw:parity argument", "kw:induction"]
    result = env.step(_logs([response], "Prove that the square root of 2 is irrational."), [{"rubric": items}])
    assert result.rewards.tolist() == [pytest.approx(3 / 4)]  # weights 2 + 1 met of 2 + 1 + 1
    assert [i["met"] for i in result.metadata[0]["genrm"]["rubric"]] == [True, True, False]


def test_long_responses_are_shortened_to_the_cap_around_an_elision():
    response = "because " + "x" * 5000 + " because the end"
    judge = RuleJudge(criterion_in_response)
    cfg = _cfg({"mode": "rubric"}, prompt={"response": {"max_chars": 400}})
    env = GenRMEnvironmentImpl(cfg, judge=judge)
    result = env.step(_logs([response]), [{"rubric": ["kw:end"]}])
    assert result.rewards.tolist() == [1.0]  # the tail is kept
    (shown,) = shown_responses(judge.seen[0])
    assert shown.startswith("because xxx") and shown.endswith("because the end") and "[...]" in shown
    assert len(shown) < 450


def test_identity_and_dedup_use_what_the_judge_is_shown():
    # A zero-width space is dropped by neutralisation: the judge would see two identical responses.
    judge = RuleJudge(more_working_wins)
    env = GenRMEnvironmentImpl(_cfg({"mode": "pairwise_group"}), judge=judge)
    result = env.step(_logs(["blue because light", "blue be\u200bcause light", "blue"]), [{}] * 3)
    # The two look-alikes draw without a call; each beats "blue"; "blue" loses both.
    assert result.rewards.tolist() == pytest.approx([0.75, 0.75, 0.0])
    assert env.last_metrics()["genrm/judge_prompts"] == 2


def test_reference_mode_still_shows_the_extracted_answer():
    judge = RuleJudge(lambda text: "1" if "because" not in shown_responses(text)[0] else "0")
    env = GenRMEnvironmentImpl(_cfg({}), judge=judge)
    # The judge sees the final answer's paragraph: the working in paragraphs before it stays out.
    result = env.step(_logs(["4 because 2+2.\n\nAnswer: 4"]), [{"ground_truth": "4"}])
    assert result.rewards.tolist() == [1.0] and result.answers == ["4"]


# --------------------------------------------------------------------------- 2. votes
def _seeded_cfg(votes: int, seed: int = 7) -> dict:
    return _cfg({"votes": votes}, judge={"sampling": {"temperature": 0.8, "seed": seed}})


def _majority(value: int, seed: int, votes: int) -> float:
    ones = sum(seeded_bit(value, seed + v) for v in range(votes))
    return 1.0 if ones * 2 > votes else 0.0


def test_votes_are_independent_draws_one_seed_each():
    values = list(range(1, 13))
    judge = SeededJudge(seed=7)
    env = GenRMEnvironmentImpl(_seeded_cfg(5), judge=judge)
    logs = [[{"role": "user", "content": "Q?"}, {"role": "assistant", "content": f"Answer: ans-{v}"}] for v in values]
    result = env.step(logs, [{"ground_truth": "ans-0"}] * len(values))
    assert result.rewards.tolist() == [_majority(v, 7, 5) for v in values]
    # Every prompt was put to seeds 7..11, and the votes disagree where the coins do.
    seeds_per_prompt: dict[str, set[int]] = {}
    for text, seed in judge.seen:
        seeds_per_prompt.setdefault(text, set()).add(seed)
    assert all(seeds == {7, 8, 9, 10, 11} for seeds in seeds_per_prompt.values())
    agreement = env.last_metrics()["genrm/votes/agreement"]
    expected = sum(max(k, 5 - k) / 5 for k in (sum(seeded_bit(v, 7 + i) for i in range(5)) for v in values)) / 12
    assert agreement == pytest.approx(expected) and agreement < 1.0


def test_http_votes_carry_seed_plus_vote_index():
    seen: list[int | None] = []

    def rule(body: dict) -> str:
        seen.append(body.get("seed"))
        return str(seeded_bit(4, body.get("seed")))

    with StandInServer(rule) as server:
        cfg = _cfg(
            {"votes": 3}, judge={"http": {"base_url": server.base_url}, "sampling": {"temperature": 0.8, "seed": 11}}
        )
        env = GenRMEnvironmentImpl(cfg)
        try:
            result = env.step(_logs(["Answer: ans-4"]), [{"ground_truth": "ans-4"}])
        finally:
            env.shutdown()
    assert sorted(seen) == [11, 12, 13]
    assert result.rewards.tolist() == [_majority(4, 11, 3)]


@pytest.mark.parametrize(
    "judge, member",
    [
        ({"verdict_from": "logprobs", "sampling": {"temperature": 0.8}}, None),  # one forward pass per vote
        ({"sampling": {"temperature": 0.8}}, {"verdict_from": "logprobs", "sampling": {"temperature": 0.8}}),
    ],
)
def test_votes_that_cannot_differ_are_refused_with_what_to_set(judge, member):
    reward: dict[str, Any] = {"votes": 3}
    where = "judge"
    if member is not None:
        reward["judges"] = [{"model_name": "b", **HTTP, **member}]
        where = r"reward\.judges\[0\]"
    with pytest.raises(ConfigError, match=rf"reward\.votes \(3\).*{where}\.verdict_from 'logprobs'.*identical") as err:
        GenRMEnvironmentImpl(_cfg(reward, judge=judge), judge=SeededJudge(), judges=[SeededJudge()] if member else None)
    assert "verdict_from: text" in str(err.value) and "reward.votes: 1" in str(err.value)


# ------------------------------------------------------------------------ 3. coalescing
def test_async_steps_share_one_judge_call_whatever_the_thread_pool():
    """64 concurrent async callers on a loop whose default pool has 4 threads: one judge call."""
    judge = RuleJudge(lambda text: "1")
    # The judge alone (no verifier): 64 distinct answers, 64 prompts, every reward the judge's 1.
    # No watchdog canaries: their budget (3% of 64 prompts) would add a judge call of their own.
    reward = {"verifier": "none", "watchdog": {"canaries": {"rate": 0.0}}}
    # The call closes when its 64th sample arrives (max_samples), so the long window costs no
    # time; it only keeps a loaded machine's slow callers in the one call.
    env = GenRMEnvironmentImpl(_cfg(reward, coalesce={"max_wait_ms": 30_000, "max_samples": 64}), judge=judge)

    async def go():
        asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor(4))
        return await asyncio.gather(*(env.astep(_logs([f"Answer: {i}"]), [{"ground_truth": "4"}]) for i in range(64)))

    results = asyncio.run(go())
    assert [r.rewards.tolist() for r in results] == [[1.0]] * 64
    assert judge.stats().generate_calls == 1 and judge.stats().prompts_generated == 64


def test_async_pairwise_groups_are_gathered_by_key_not_by_timing():
    judge = RuleJudge(more_working_wins)
    reward = {"mode": "pairwise_group", "pairwise_group": {"group_size": 4, "group_wait_ms": 10000}}
    env = GenRMEnvironmentImpl(_cfg(reward, coalesce={"max_wait_ms": 0}), judge=judge)
    groups = 8
    order = [(g, i) for i in range(4) for g in range(groups)]  # members of a group arrive far apart

    async def one(g: int, i: int) -> float:
        await asyncio.sleep(0.001 * (g + i))
        out = await env.astep(_logs([SAME_ANSWER[(i + g) % 4]]), [{"group_id": g}])
        return out.rewards.item()

    async def go():
        return await asyncio.gather(*(one(g, i) for g, i in order))

    got = dict(zip(order, asyncio.run(go()), strict=True))
    for g in range(groups):
        scores = [working(SAME_ANSWER[(i + g) % 4]) for i in range(4)]
        assert [got[g, i] for i in range(4)] == pytest.approx(_win_rates(scores)), g


# --------------------------------------------------------------------------- 4. masks
def test_lone_response_among_empty_ones_is_masked_at_once():
    reward = {"mode": "pairwise_group", "pairwise_group": {"group_size": 4, "group_wait_ms": 5000}}
    env = GenRMEnvironmentImpl(_cfg(reward), judge=RuleJudge(more_working_wins))
    start = time.monotonic()
    result = env.step(_logs(["blue because", "", "  ", "."]), [{}] * 4)  # the group is all there
    assert time.monotonic() - start < 2.0  # no wait for members that already arrived
    assert [m["genrm"]["reason"] for m in result.metadata] == ["incomplete_group"] + ["no_answer"] * 3
    assert [m["genrm"]["masked"] for m in result.metadata] == [True, False, False, False]


# ------------------------------------------------------------- 6. multi-token labels
def test_pairwise_logprobs_over_http_with_multi_token_markers_is_refused_at_start_up():
    def rule(body: dict) -> Any:
        return multi_token_reply(more_working_wins(StandInServer.user_text(body)))

    with StandInServer(rule) as server:
        cfg = _cfg(
            {"mode": "pairwise_group"}, judge={"verdict_from": "logprobs", "http": {"base_url": server.base_url}}
        )
        with pytest.raises(ConfigError, match=r"\[\[A\]\].*judge\.tokenizer|verdict_from: text"):
            GenRMEnvironmentImpl(cfg)
        assert server.bodies == []  # refused before any request


# ------------------------------------------------------------------- 7. template keys
def test_mode_template_errors_name_the_modes_key(tmp_path):
    bad = tmp_path / "pairwise.yaml"
    bad.write_text("user: 'Compare {response_a} with {answer}'\n")
    with pytest.raises(ConfigError, match="reward.pairwise_group.template") as err:
        GenRMEnvironmentImpl(
            _cfg({"mode": "pairwise_group", "pairwise_group": {"template": str(bad)}}),
            judge=RuleJudge(more_working_wins),
        )
    assert "prompt.template" not in str(err.value)
    rubric = tmp_path / "rubric.txt"
    rubric.write_text("Does {response} meet {criteria}?")
    with pytest.raises(ConfigError, match="reward.rubric.template"):
        GenRMEnvironmentImpl(
            _cfg({"mode": "rubric", "rubric": {"template": str(rubric)}}), judge=RuleJudge(criterion_in_response)
        )


# ------------------------------------------------------------ 7. an HTTP judge gone for good
def test_http_judge_gone_for_good_raises_after_the_grace_period():
    cfg = _cfg(
        {},
        judge={"http": {"base_url": dead_base_url(), "max_retries": 0}},
        fault_tolerance={"unavailable_grace_s": 0.5},
    )
    env = GenRMEnvironmentImpl(cfg)
    try:
        first = env.step(_logs(["Answer: 4"]), [{"ground_truth": "4"}])
        assert first.metadata[0]["genrm"]["reason"] == "judge_error"  # within the grace
        assert env.last_metrics()["genrm/judge_unavailable"] == 1
        time.sleep(0.6)
        with pytest.raises(JudgeUnavailableError, match="unavailable_grace_s"):
            env.step(_logs(["Answer: 4"]), [{"ground_truth": "4"}])
    finally:
        env.shutdown()


def test_http_judge_that_comes_back_within_the_grace_keeps_going():
    with StandInServer(lambda body: "1") as server:
        url = server.base_url
        cfg = _cfg({}, judge={"http": {"base_url": url, "max_retries": 0}}, fault_tolerance={"unavailable_grace_s": 60})
        env = GenRMEnvironmentImpl(cfg)
        assert env.step(_logs(["Answer: 4"]), [{"ground_truth": "4"}]).rewards.tolist() == [1.0]
    # The server is gone: judge_error within the grace, counted as an unavailable call.
    assert env.step(_logs(["Answer: 4"]), [{"ground_truth": "4"}]).metadata[0]["genrm"]["reason"] == "judge_error"
    assert env.last_metrics()["genrm/judge_unavailable"] == 1
    env.shutdown()


def test_http_judge_answering_5xx_to_everything_is_unavailable_after_the_grace_period():
    """A healthy proxy in front of a dead engine: every request gets 503 after its retries."""
    state = {"down": True}

    def rule(body: dict) -> Reply:
        return Reply(None, status=503) if state["down"] else Reply("1")

    with StandInServer(rule) as server:
        cfg = _cfg(
            {},
            judge={"http": {"base_url": server.base_url, "max_retries": 1, "backoff_s": 0.0}},
            fault_tolerance={"unavailable_grace_s": 0.5},
        )
        env = GenRMEnvironmentImpl(cfg)
        try:
            first = env.step(_logs(["Answer: 4"]), [{"ground_truth": "4"}])
            assert first.metadata[0]["genrm"]["reason"] == "judge_error"  # within the grace
            assert env.last_metrics()["genrm/judge_unavailable"] == 1
            assert len(server.bodies) == 2  # the request and its retry
            time.sleep(0.6)
            for _ in range(2):  # every step past the grace raises, as for a refused connection
                with pytest.raises(JudgeUnavailableError, match="unavailable_grace_s"):
                    env.step(_logs(["Answer: 4"]), [{"ground_truth": "4"}])
            state["down"] = False  # the engine is back: training goes on
            assert env.step(_logs(["Answer: 4"]), [{"ground_truth": "4"}]).rewards.tolist() == [1.0]
        finally:
            env.shutdown()


def test_http_judge_answering_4xx_is_a_bad_request_not_unavailability():
    with StandInServer(lambda body: Reply(None, status=400)) as server:
        cfg = _cfg(
            {},
            judge={"http": {"base_url": server.base_url, "max_retries": 1}},
            fault_tolerance={"unavailable_grace_s": 0.2},
        )
        env = GenRMEnvironmentImpl(cfg)
        try:
            for _ in range(2):
                result = env.step(_logs(["Answer: 4"]), [{"ground_truth": "4"}])
                assert result.metadata[0]["genrm"]["reason"] == "judge_error"
                assert env.last_metrics()["genrm/judge_unavailable"] == 0
                time.sleep(0.3)
        finally:
            env.shutdown()


def test_the_environment_has_no_coroutine_methods():
    """An ``async def`` on the class would make Ray run the GenRMEnvironment actor as an async
    actor (every method on one event loop), where concurrent blocking steps deadlock."""
    import inspect

    assert not [
        name for name, member in inspect.getmembers(GenRMEnvironmentImpl) if inspect.iscoroutinefunction(member)
    ]
