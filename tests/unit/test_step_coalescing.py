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
    cfg = {"judge": {"model_name": "stand-in"}, "resources": {"gpus_per_replica": 0}, "coalesce": coalesce}
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
    judge = _CountingJudge(delay_s=0.5)
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
