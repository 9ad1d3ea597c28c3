"""Concurrent ``step`` calls share judge calls: counts, per-caller results, failure isolation."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from nemo_genrm.env.coalesce import Coalescer
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.errors import JudgeClosedError
from nemo_genrm.judges.base import Generation, Judge, JudgeStats
from nemo_genrm.testing.tagged_value_judges import RuleJudge, keyword_met, larger_wins, same_value

_ANSWER = re.compile(r"ans(\d+)x")


class _CountingJudge(Judge):
    """A stand-in engine: the verdict is 1 when the answer's number is even; counts its calls.

    It raises for a batch holding a ``poison`` answer (an engine that chokes on one prompt).
    """

    def __init__(self, delay_s: float = 0.05):
        self.delay_s = delay_s
        self.calls: list[int] = []  # prompts per engine call
        self.prompts: list[str] = []
        self._lock = threading.Lock()

    def generate(self, batch):
        with self._lock:
            self.calls.append(len(batch))
        time.sleep(self.delay_s)  # engine time: calls that arrive meanwhile join the next batch
        texts = [" ".join(m["content"] for m in request.messages) for request in batch]
        if any("poison" in t for t in texts):
            raise RuntimeError("engine choked on a prompt")
        out = []
        for text in texts:
            number = int(_ANSWER.search(text).group(1))
            with self._lock:
                self.prompts.append(f"ans{number}x")
            out.append(Generation(text="1" if number % 2 == 0 else "0"))
        return out

    def score(self, batch, labels):
        raise NotImplementedError

    def stats(self):
        return JudgeStats(generate_calls=len(self.calls), prompts_generated=len(self.prompts))

    def reset_stats(self):
        pass


def _env(judge: Judge, **coalesce: Any) -> GenRMEnvironmentImpl:
    cfg = {
        "judge": {"model_name": "stand-in"},
        "resources": {"gpus_per_replica": 0},
        "coalesce": coalesce,
        # These tests count the engine calls real samples make: the watchdog's canaries and
        # probes (a call of their own once a 64-prompt step buys one) are off.
        "reward": {"watchdog": {"canaries": {"rate": 0.0}}},
    }
    return GenRMEnvironmentImpl(cfg, judge=judge)


def _call(env: GenRMEnvironmentImpl, answer: str, tag: int):
    log = [{"role": "user", "content": "Pick a number."}, {"role": "assistant", "content": f"Answer: {answer}"}]
    return env.step([log], [{"ground_truth": "ref", "question": "Pick a number.", "tag": tag}])


def _run_concurrently(fn, args: list[tuple]) -> list[Any]:
    """Run ``fn(*a)`` for every ``a`` from its own thread, all released at once."""
    barrier = threading.Barrier(len(args))

    def go(a):
        barrier.wait()
        try:
            return fn(*a)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            return exc

    with ThreadPoolExecutor(max_workers=len(args)) as pool:
        return list(pool.map(go, args))


def _expected(number: int) -> float:
    return 1.0 if number % 2 == 0 else 0.0


def test_256_single_sample_calls_make_one_engine_call_of_64_prompts():
    judge = _CountingJudge()
    # The batch closes when full, not at the end of a 60 s window (a wide margin, so a loaded
    # machine starting 256 threads slowly cannot blur the two).
    env = _env(judge, max_wait_ms=60_000, max_samples=256)
    numbers = [i % 64 for i in range(256)]
    start = time.perf_counter()
    results = _run_concurrently(lambda i, n: _call(env, f"ans{n}x", i), [(i, n) for i, n in enumerate(numbers)])
    elapsed = time.perf_counter() - start

    assert judge.calls == [64], judge.calls  # one engine call, deduplicated across the 256 callers
    assert sorted(judge.prompts) == sorted(f"ans{n}x" for n in range(64))
    assert elapsed < 30.0  # closed when full, not at the end of the window
    for i, (n, result) in enumerate(zip(numbers, results, strict=True)):
        assert not isinstance(result, Exception), result
        assert result.rewards.tolist() == [_expected(n)]
        assert result.answers == [f"ans{n}x"]
        assert result.metadata[0]["tag"] == i  # each caller gets its own metadata back
    _, metrics = env.global_post_process_and_metrics({})
    assert metrics["genrm/num_samples"] == 256
    assert metrics["genrm/judge_prompts"] == 64 and metrics["genrm/dedup_hits"] == 192
    assert metrics["genrm/mean_reward"] == pytest.approx(0.5)
    assert env.last_metrics()["genrm/num_samples"] == 256  # the last judge call served every caller


def test_default_window_keeps_256_calls_to_a_handful_of_engine_calls():
    # Callers that arrive while a call runs join the next one: a 2 s call keeps a loaded
    # machine's slowly started threads to a handful of calls.
    judge = _CountingJudge(delay_s=2.0)
    env = _env(judge)  # default window and size
    numbers = [i % 64 for i in range(256)]
    results = _run_concurrently(lambda n: _call(env, f"ans{n}x", n), [(n,) for n in numbers])

    assert 1 <= len(judge.calls) <= 5, judge.calls
    assert [r.rewards.tolist() for r in results] == [[_expected(n)] for n in numbers]
    _, metrics = env.global_post_process_and_metrics({})
    assert metrics["genrm/judge_prompts"] == len(judge.prompts) == sum(judge.calls)
    assert metrics["genrm/num_samples"] == 256


def test_multi_sample_calls_keep_their_own_order():
    judge = _CountingJudge()
    env = _env(judge, max_wait_ms=5000, max_samples=6 * 5)
    batches = [[(c * 7 + k) % 10 for k in range(5)] for c in range(6)]

    def run(numbers):
        logs = [[{"role": "assistant", "content": f"Answer: ans{n}x"}] for n in numbers]
        return env.step(logs, [{"ground_truth": "ref"}] * len(numbers))

    results = _run_concurrently(run, [(b,) for b in batches])
    assert len(judge.calls) == 1 and judge.calls[0] == 10  # 30 samples, 10 distinct answers
    for numbers, result in zip(batches, results, strict=True):
        assert result.rewards.tolist() == [_expected(n) for n in numbers]
        assert result.answers == [f"ans{n}x" for n in numbers]


def test_one_callers_failure_never_changes_anothers_rewards():
    judge = _CountingJudge()
    env = _env(judge, max_wait_ms=5000, max_samples=4)

    def run(kind: str):
        if kind == "bad_metadata":  # a caller bug: raises in that caller only
            return env.step([[{"role": "assistant", "content": "Answer: ans2x"}]], [{}, {}])
        return _call(env, kind, 0)

    kinds = ["ans2x", "ans3x", "poison ans4x", "ans6x", "bad_metadata"]
    results = dict(zip(kinds, _run_concurrently(run, [(k,) for k in kinds]), strict=True))

    assert isinstance(results["bad_metadata"], ValueError)
    assert results["ans2x"].rewards.tolist() == [1.0]
    assert results["ans3x"].rewards.tolist() == [0.0]
    assert results["ans6x"].rewards.tolist() == [1.0]
    poisoned = results["poison ans4x"]
    assert poisoned.rewards.tolist() == [0.0] and poisoned.metadata[0]["genrm"]["reason"] == "judge_error"
    # The shared call of 4 raised; each of its step calls was then judged alone.
    assert judge.calls == [4, 1, 1, 1, 1]
    _, metrics = env.global_post_process_and_metrics({})
    assert metrics["genrm/count/judge_error"] == 1 and metrics["genrm/count/judged"] == 3


def test_fatal_judge_error_reaches_every_caller():
    judge = _CountingJudge()
    env = _env(judge, max_wait_ms=5000, max_samples=3)
    env.shutdown()
    results = _run_concurrently(lambda n: _call(env, f"ans{n}x", n), [(1,), (2,), (3,)])
    assert all(isinstance(r, JudgeClosedError) for r in results)


def test_coalescer_runs_one_batch_at_a_time_and_never_splits_a_call():
    running, overlaps, seen = [0], [], []
    lock = threading.Lock()

    def run_batch(items):
        with lock:
            running[0] += 1
            overlaps.append(running[0])
            seen.append(list(items))
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return [item * 10 if item != 13 else ValueError("thirteen") for item in items]

    coalescer = Coalescer(run_batch, max_wait_s=0.01, max_items=4)
    sizes = {7: 9}  # item 7 is bigger than max_items: it runs alone
    results = _run_concurrently(lambda i: coalescer.submit(i, size=sizes.get(i, 1)), [(i,) for i in range(20)])

    assert max(overlaps) == 1
    assert [r for i, r in enumerate(results) if i != 13] == [i * 10 for i in range(20) if i != 13]
    assert isinstance(results[13], ValueError)
    assert [7] in seen
    assert all(len(batch) <= 4 for batch in seen)
    assert sorted(i for batch in seen for i in batch) == list(range(20))


# ------------------------------------------------------- one caller's bad request, every mode
class _ChokingRuleJudge(RuleJudge):
    """A :class:`RuleJudge` whose whole batch raises when any prompt in it shows ``poison``."""

    def __init__(self, rule):
        super().__init__(rule)
        self.raised = 0

    def generate(self, batch):
        replies = super().generate(batch)
        if any("poison" in text for text in self.seen[-len(batch) :]):
            self.raised += 1
            raise RuntimeError("engine choked on a prompt")
        return replies


_STAND_IN = {"model_name": "stand-in", "backend": "http", "http": {"base_url": "http://stand-in/v1"}}


def _reference_calls(question: str = "Pick a number.") -> list[tuple[list[str], list[dict]]]:
    meta = {"ground_truth": "ans-4", "question": question}
    return [(["ans-4"], [meta]), (["ans-5"], [meta]), (["poison ans-4"], [meta])]


# Per case: reward section, extra voting judges, the step calls (answers, metadata), and per call
# the rewards and reasons computed by hand: same_value gives 1 to ans-4 against ans-4 and 0 to ans-5
# in each order and vote; larger_wins ranks a group by value (win rate: wins + draws/2 over the
# others); keyword_met meets kw:alpha when the response says alpha. The poisoned caller's samples
# alone get judge_error.
_ISOLATION_CASES = {
    "plain": ({}, 0, same_value, _reference_calls(), [([1.0], "judged"), ([0.0], "judged"), ([0.0], "judge_error")]),
    "votes": (
        {"votes": 3},
        0,
        same_value,
        _reference_calls(),
        [([1.0], "judged"), ([0.0], "judged"), ([0.0], "judge_error")],
    ),
    "swap": (
        {"swap": True},
        0,
        same_value,
        _reference_calls(),
        [([1.0], "judged"), ([0.0], "judged"), ([0.0], "judge_error")],
    ),
    "two_judges": (
        {},
        1,
        same_value,
        _reference_calls(),
        [([1.0], "judged"), ([0.0], "judged"), ([0.0], "judge_error")],
    ),
    "pairwise": (
        {"mode": "pairwise_group"},
        0,
        larger_wins,
        [
            (["ans-1", "ans-3"], [{}, {}]),
            (["ans-2", "ans-6", "ans-4"], [{}, {}, {}]),
            (["ans-7 poison", "ans-8"], [{}, {}]),
        ],
        [([0.0, 1.0], "judged"), ([0.0, 1.0, 0.5], "judged"), ([0.0, 0.0], "judge_error")],
    ),
    "pairwise_gathered": (
        {"mode": "pairwise_group", "pairwise_group": {"group_size": 2, "group_wait_ms": 20_000}},
        0,
        larger_wins,
        [
            (["ans-1"], [{"group_id": 0}]),
            (["ans-3"], [{"group_id": 0}]),
            (["ans-7 poison"], [{"group_id": 1}]),
            (["ans-8"], [{"group_id": 1}]),
        ],
        [([0.0], "judged"), ([1.0], "judged"), ([0.0], "judge_error"), ([0.0], "judge_error")],
    ),
    "rubric": (
        {"mode": "rubric"},
        0,
        keyword_met,
        [
            (["alpha"], [{"rubric": ["kw:alpha"]}]),
            (["beta"], [{"rubric": ["kw:alpha"]}]),
            (["poison alpha"], [{"rubric": ["kw:alpha"]}]),
        ],
        [([1.0], "judged"), ([0.0], "judged"), ([0.0], "judge_error")],
    ),
}


@pytest.mark.parametrize("case", sorted(_ISOLATION_CASES))
def test_one_callers_bad_request_costs_only_that_caller_in_every_mode(case):
    reward, extra, rule, calls, expected = _ISOLATION_CASES[case]
    temperature = 0.7 if reward.get("votes", 1) > 1 else 0.0
    judge = {**_STAND_IN, "sampling": {"temperature": temperature}}
    members = [_ChokingRuleJudge(rule) for _ in range(extra)]
    cfg = {
        "judge": judge,
        "resources": {"gpus_per_replica": 0},
        "reward": {**reward, "judges": [{**judge, "model_name": f"member-{i}"} for i in range(extra)]},
        # Every call joins one shared judge call: it closes when all samples are in.
        "coalesce": {"max_wait_ms": 20_000, "max_samples": sum(len(answers) for answers, _ in calls)},
    }
    first = _ChokingRuleJudge(rule)
    env = GenRMEnvironmentImpl(cfg, judge=first, judges=members)

    def run(answers, metas):
        logs = [
            [{"role": "user", "content": "Pick a number."}, {"role": "assistant", "content": f"Answer: {a}"}]
            for a in answers
        ]
        return env.step(logs, metas)

    results = _run_concurrently(run, calls)
    for result, (rewards, reason) in zip(results, expected, strict=True):
        assert not isinstance(result, Exception), result
        assert result.rewards.tolist() == pytest.approx(rewards)
        assert [m["genrm"]["reason"] for m in result.metadata] == [reason] * len(rewards)
    # The shared call raised once; then each unit was judged alone and only the poisoned one raised.
    assert first.raised == 2 and all(m.raised <= 2 for m in members)
    _, metrics = env.global_post_process_and_metrics({})
    poisoned = sum(len(r) for r, reason in expected if reason == "judge_error")
    assert metrics["genrm/count/judge_error"] == poisoned
    assert metrics["genrm/count/judged"] == sum(len(r) for r, _ in expected) - poisoned
