"""Pairwise groups are gathered by their group key, never by thread timing or batch boundaries.

With ``reward.pairwise_group.group_size`` set only complete groups are ranked: a group still
short when its wait ends is masked in full, and its stragglers are masked at once. Without it a
group is what one ``step`` call holds. The stand-in judge is ``more_working_wins`` (the response
with more ``because`` wins; equal working draws), so every expected reward is computed by hand.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.errors import JudgeClosedError
from nemo_genrm.testing.integrity_judges import more_working_wins, working
from nemo_genrm.testing.tagged_value_judges import RuleJudge

HTTP = {"backend": "http", "http": {"base_url": "http://stand-in/v1", "supports_logprobs": True}}
GOOD = "Because light scatters, because blue is short, because air. Answer: scattering"  # working 3
POOR = "Answer: scattering"  # working 0
# Working 0, 1, 2 and 3, the same final answer.
LADDER = [
    "Answer: scattering",
    "Blue because it is short. Answer: scattering",
    "Because blue is short and because it scatters. Answer: scattering",
    GOOD,
]


def _env(pairwise: dict[str, Any], judge: RuleJudge, **sections: Any) -> GenRMEnvironmentImpl:
    cfg = {
        "judge": {"model_name": "stand-in", **HTTP},
        "resources": {"gpus_per_replica": 0},
        "reward": {"mode": "pairwise_group", "pairwise_group": pairwise},
        **sections,
    }
    return GenRMEnvironmentImpl(cfg, judge=judge)


def _log(response: str, question: str = "Why is the sky blue?") -> list[dict[str, str]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": response}]


def _win_rates(scores: list[int]) -> list[float]:
    """more_working_wins by hand: 1 per opponent with less working, 1/2 per equal, over the others."""
    out = []
    for i, mine in enumerate(scores):
        others = [s for j, s in enumerate(scores) if j != i]
        out.append(sum(1.0 if mine > s else 0.5 if mine == s else 0.0 for s in others) / len(others))
    return out


def _concurrently(env: GenRMEnvironmentImpl, calls: list[tuple[list[str], str, dict]]) -> list[tuple[Any, float]]:
    """Each (responses, question, meta) as its own step call from its own thread, released at once;
    per call its result and the seconds it took."""
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def go(index: int, responses: list[str], question: str, meta: dict) -> None:
        barrier.wait()
        start = time.monotonic()
        result = env.step([_log(r, question) for r in responses], [dict(meta) for _ in responses])
        out[index] = (result, time.monotonic() - start)

    threads = [threading.Thread(target=go, args=(i, *call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert all(o is not None for o in out), "a step call did not return"
    return out


def _one_each(responses: list[str], question: str = "Why is the sky blue?", meta: dict | None = None):
    return [([r], question, meta or {}) for r in responses]


def _genrm(result: Any, index: int = 0) -> dict:
    return result.metadata[index]["genrm"]


# ------------------------------------------------------------------- short groups, stragglers
# A group that must fill waits seconds, not tenths: its members are threads that a loaded machine
# may start a second apart. A full group is released at once; only the short ones pay the wait.
def test_a_group_short_at_its_deadline_is_masked_in_full_and_its_stragglers_at_once():
    """Two identical good responses must never get 1.0 and 0.5 because of when they arrived."""
    judge = RuleJudge(more_working_wins)
    env = _env({"group_size": 4, "group_wait_ms": 3000}, judge)
    early = _concurrently(env, _one_each([GOOD, POOR]))  # half the group, then the wait ends
    late = _concurrently(env, _one_each([GOOD, GOOD]))  # the other half, after the wait
    # Before: early [1.0, 0.0] (ranked as far as it got), late [0.5, 0.5] (ranked among themselves).
    for result, _ in early + late:
        assert result.rewards.tolist() == [0.0]
        assert _genrm(result)["reason"] == "incomplete_group" and _genrm(result)["masked"] is True
        assert _genrm(result)["arrived"] == 2  # members of the group that arrived within its wait
    assert [_genrm(r)["late"] for r, _ in early + late] == [False, False, True, True]
    assert all(seconds < 1.5 for _, seconds in late)  # stragglers wait for no other window (3 s)
    assert judge.seen == []  # nothing was ranked: no judge prompt at all
    _, metrics = env.global_post_process_and_metrics({})
    assert metrics["genrm/pairwise/incomplete_groups"] == 1 and metrics["genrm/pairwise/late_responses"] == 2
    assert metrics["genrm/masked"] == 4 and metrics["genrm/count/incomplete_group"] == 4


def test_a_short_group_masks_its_no_answer_members_too():
    env = _env({"group_size": 4, "group_wait_ms": 300}, RuleJudge(more_working_wins))
    ((result, _),) = _concurrently(env, [([GOOD, POOR, ""], "Why is the sky blue?", {})])
    assert [m["genrm"]["reason"] for m in result.metadata] == ["incomplete_group"] * 3
    assert [m["genrm"]["masked"] for m in result.metadata] == [True] * 3


def test_a_response_that_is_not_text_still_arrives_in_its_group():
    """Its group fills (it is bad_input, not judged) and the others are ranked among themselves,
    instead of the whole group waiting for a member that came and being masked."""
    env = _env({"group_size": 4, "group_wait_ms": 30_000}, RuleJudge(more_working_wins))
    logs = [_log(r) for r in LADDER[1:]]
    logs.append([{"role": "user", "content": "Why is the sky blue?"}, {"role": "assistant", "content": ["parts"]}])
    start = time.monotonic()
    result = env.step(logs, [{} for _ in logs])
    assert time.monotonic() - start < 5.0  # whole at once: no wait for the group to fill
    assert result.rewards.tolist() == pytest.approx([*_win_rates([1, 2, 3]), 0.0])
    assert [m["genrm"]["reason"] for m in result.metadata] == ["judged"] * 3 + ["bad_input"]
    assert result.metadata[3]["genrm"]["masked"] is False


def test_complete_groups_never_wait_for_an_incomplete_one():
    judge = RuleJudge(more_working_wins)
    env = _env({"group_size": 4, "group_wait_ms": 10_000}, judge)
    calls = _one_each(LADDER, "Q one?") + _one_each([GOOD], "Q two?")  # Q two? never fills
    out = _concurrently(env, calls)
    assert [r.rewards.item() for r, _ in out[:4]] == pytest.approx(_win_rates([0, 1, 2, 3]))
    assert all(seconds < 5.0 for _, seconds in out[:4])  # not held until Q two?'s wait ends
    lone, seconds = out[4]
    assert _genrm(lone)["reason"] == "incomplete_group" and _genrm(lone)["masked"] and seconds >= 9.9


def test_a_full_coalesced_batch_never_splits_a_group():
    """coalesce.max_samples 3 with groups of 4, members interleaved: every group stays whole."""
    judge = RuleJudge(more_working_wins)
    env = _env({"group_size": 4, "group_wait_ms": 5000}, judge, coalesce={"max_samples": 3, "max_wait_ms": 50})
    calls = [([LADDER[(i + g) % 4]], f"Q{g}?", {}) for i in range(4) for g in range(3)]
    out = _concurrently(env, calls)
    for g in range(3):
        got = [out[i * 3 + g][0].rewards.item() for i in range(4)]
        assert got == pytest.approx(_win_rates([working(LADDER[(i + g) % 4]) for i in range(4)])), g
    _, metrics = env.global_post_process_and_metrics({})
    assert metrics["genrm/pairwise/groups"] == 3 and metrics["genrm/pairwise/incomplete_groups"] == 0


# ------------------------------------------------------------------------- the same key again
def test_the_same_question_in_a_later_step_is_a_new_group():
    env = _env({"group_size": 2, "group_wait_ms": 3000, "straggler_memory_s": 60}, RuleJudge(more_working_wins))
    for _ in range(2):  # two GRPO steps asking the same question: two groups, each ranked
        out = _concurrently(env, _one_each([GOOD, POOR]))
        assert [r.rewards.item() for r, _ in out] == [1.0, 0.0]
    # A group short at its deadline; its straggler arrives: it is masked and the debt is paid ...
    ((short, _),) = _concurrently(env, _one_each([GOOD]))
    ((straggler, _),) = _concurrently(env, _one_each([POOR]))
    assert _genrm(short)["reason"] == _genrm(straggler)["reason"] == "incomplete_group"
    assert _genrm(straggler)["late"] is True
    # ... so the next group of the same question is ranked whole.
    out = _concurrently(env, _one_each([POOR, GOOD]))
    assert [r.rewards.item() for r, _ in out] == [0.0, 1.0]


def test_one_lost_response_costs_at_most_its_group_and_the_next_one_of_its_key():
    """A debt paid by the next group's first response (nothing tells it from a straggler) leaves
    that group short; it owes nothing in turn, so the group after it is ranked whole again."""
    env = _env({"group_size": 4, "group_wait_ms": 3000, "straggler_memory_s": 60}, RuleJudge(more_working_wins))
    lost = _concurrently(env, _one_each(LADDER[:3]))  # one response never comes: short, owes 1
    assert all(_genrm(r)["reason"] == "incomplete_group" for r, _ in lost)
    # The next step's group: its first response pays the debt, the other three are short.
    ((first, _),) = _concurrently(env, _one_each(LADDER[:1]))
    rest = _concurrently(env, _one_each(LADDER[1:]))
    assert _genrm(first)["late"] is True
    assert all(_genrm(r)["reason"] == "incomplete_group" and not _genrm(r)["late"] for r, _ in rest)
    # Before, that short group owed one in turn and every later group of the question lost a
    # member and was masked; now the third step's group is ranked whole.
    out = _concurrently(env, _one_each(LADDER))
    assert [r.rewards.item() for r, _ in out] == pytest.approx(_win_rates([0, 1, 2, 3]))


def test_stragglers_are_remembered_only_for_straggler_memory_s():
    env = _env({"group_size": 2, "group_wait_ms": 3000, "straggler_memory_s": 0.3}, RuleJudge(more_working_wins))
    _concurrently(env, _one_each([GOOD]))  # short: one response still owed
    time.sleep(0.4)  # past straggler_memory_s: the owed response is forgotten
    out = _concurrently(env, _one_each([POOR, GOOD]))
    assert [r.rewards.item() for r, _ in out] == [0.0, 1.0]


def test_the_owed_memory_is_bounded():
    import concurrent.futures

    from nemo_genrm.env.gather import GroupGate

    released: list[Any] = []

    def release(bundle):
        released.append(bundle)
        done: concurrent.futures.Future = concurrent.futures.Future()
        done.set_result([[tags] for _, tags in bundle])
        return done

    gate = GroupGate(2, wait_s=0.0, release=release, memory_s=60.0, max_owed=3)
    try:
        for k in range(5):  # five groups, each short by one
            gate.admit(f"call{k}", [f"key{k}"]).result(timeout=10)
        assert gate.owed_keys() == ["key2", "key3", "key4"]  # the oldest were forgotten
    finally:
        gate.close(RuntimeError("closed"))


def test_shutdown_fails_the_calls_still_held_for_their_groups():
    env = _env({"group_size": 4, "group_wait_ms": 60_000}, RuleJudge(more_working_wins))
    outcome: list[BaseException] = []

    def one() -> None:
        try:
            env.step([_log(GOOD)], [{}])
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    thread = threading.Thread(target=one)
    thread.start()
    time.sleep(0.3)  # held: its group waits for three more responses
    env.shutdown()
    thread.join(timeout=10)
    assert not thread.is_alive() and isinstance(outcome[0], JudgeClosedError)
    with pytest.raises(JudgeClosedError):
        env.step([_log(GOOD)], [{}])


# ---------------------------------------------------------------------------- no group_size
def test_without_group_size_a_group_is_what_one_step_call_holds():
    """Two concurrent calls asking the same question share one judge call, not one group."""
    judge = RuleJudge(more_working_wins)
    env = _env({}, judge, coalesce={"max_wait_ms": 2000})
    out = _concurrently(env, [(LADDER[:2], "Same?", {}), (LADDER[2:], "Same?", {})])
    # Before: one group of four, [0, 1/3, 2/3, 1]; now each call's two responses are ranked apart.
    assert [r.rewards.tolist() for r, _ in out] == [[0.0, 1.0], [0.0, 1.0]]
    assert judge.stats().generate_calls == 1  # still one judge call for both


# ------------------------------------------------------------------------------ whole calls
def test_a_call_that_holds_whole_groups_settles_them_inside_and_owes_nothing():
    """A validation at one response per prompt (the environment actor's calls, a TRL step: each
    holds every response of its groups): its groups are masked at once, not after group_wait_ms,
    and leave no debt, so the training step on the same prompts right after is ranked whole,
    gathered or whole; a group larger than group_size has its extra responses masked as late."""
    judge = RuleJudge(more_working_wins)
    env = _env({"group_size": 4, "group_wait_ms": 20_000}, judge)
    start = time.monotonic()
    validation = env.step([_log(GOOD, f"Q{q}?") for q in range(3)], [{} for _ in range(3)], whole_groups=True)
    assert time.monotonic() - start < 5.0  # no wait for members that will never come
    assert [m["genrm"]["reason"] for m in validation.metadata] == ["incomplete_group"] * 3
    assert [m["genrm"]["arrived"] for m in validation.metadata] == [1] * 3
    assert judge.seen == []
    # Training, same prompts: Q0 in one whole call, Q1 gathered from calls of one response each.
    whole = env.step([_log(r, "Q0?") for r in LADDER], [{} for _ in LADDER], whole_groups=True)
    assert whole.rewards.tolist() == pytest.approx(_win_rates([0, 1, 2, 3]))
    gathered = _concurrently(env, _one_each(LADDER, "Q1?"))
    assert [r.rewards.item() for r, _ in gathered] == pytest.approx(_win_rates([0, 1, 2, 3]))
    # Five responses to Q2 in a whole call: the first four ranked, the fifth late.
    five = env.step([_log(r, "Q2?") for r in [*LADDER, GOOD]], [{} for _ in range(5)], whole_groups=True)
    assert five.rewards.tolist()[:4] == pytest.approx(_win_rates([0, 1, 2, 3]))
    assert five.metadata[4]["genrm"]["reason"] == "incomplete_group" and five.metadata[4]["genrm"]["late"] is True


def test_a_key_that_names_one_group_stays_settled_past_straggler_memory_s():
    """An extra row of a settled one-group key (verl's validation padding) that comes long after its
    group is masked at once, never opening a phantom group that would wait group_wait_ms."""
    from nemo_genrm.samples.groups import UNIQUE_FIELD

    env = _env({"group_size": 2, "group_wait_ms": 20_000, "straggler_memory_s": 0.1}, RuleJudge(more_working_wins))
    meta = {"group_id": ["uid", "u-1"], UNIQUE_FIELD: True}
    out = _concurrently(env, _one_each([GOOD, POOR], meta=meta))
    assert [r.rewards.item() for r, _ in out] == [1.0, 0.0]
    time.sleep(0.2)  # past straggler_memory_s
    ((extra, seconds),) = _concurrently(env, _one_each([GOOD], meta=meta))
    assert _genrm(extra)["reason"] == "incomplete_group" and _genrm(extra)["late"] is True
    assert seconds < 5.0


def test_straggler_memory_0_keeps_no_debt():
    """NeMo Gym's safe setting: a short group (a validation at one response per task) owes nothing,
    so the next group of the same key (training on that task) is ranked whole."""
    env = _env({"group_size": 2, "group_wait_ms": 3000, "straggler_memory_s": 0}, RuleJudge(more_working_wins))
    ((short, _),) = _concurrently(env, _one_each([GOOD]))
    assert _genrm(short)["reason"] == "incomplete_group"
    out = _concurrently(env, _one_each([POOR, GOOD]))
    assert [r.rewards.item() for r, _ in out] == [0.0, 1.0]
