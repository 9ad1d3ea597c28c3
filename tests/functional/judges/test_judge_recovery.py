"""The judge recovers from stuck and crashed replicas, or says it cannot (stand-in workers on Ray).

The workers are a stand-in engine that answers "1" at once, hangs, or dies, as a mode file
says, so every fault is reproduced in seconds with no model loaded. The prompts are fitted with
a tiny tokenizer, as in a real pooled judge.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest
from ray import cloudpickle

from nemo_genrm.config import FaultToleranceConfig, JudgeConfig
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.errors import TIMEOUT, JudgeUnavailableError
from nemo_genrm.judges import JUDGE_ERROR
from nemo_genrm.judges.base import Placement, ReplicaPlacement
from nemo_genrm.judges.deadline import step_deadline
from nemo_genrm.judges.pooled_judge import PooledJudge
from nemo_genrm.judges.ray_hosts import WorkerSpec
from nemo_genrm.ray_runtime import job_runtime_env
from nemo_genrm.testing import cached_tiny_model
from nemo_genrm.testing.cluster import kill_actor

CPU = ReplicaPlacement(num_gpus=0.0, num_cpus=0.5)


class _ModeWorker:
    """Stand-in engine worker; the file at ``mode_file`` says what every call does.

    ``ok``: answer "1" for each prompt. ``hang``: sleep for a minute (a stuck engine).
    ``crash``: the worker process dies (an out-of-memory kill, a segfault).
    """

    def __init__(self, mode_file: str):
        # Unpickling the fitted prompts imports the judges package; a real engine has it loaded
        # when it starts, so load it here too rather than in the first (timed) call.
        import nemo_genrm.judges.fitting  # noqa: F401

        self.mode_file = mode_file

    def _act(self) -> None:
        mode = Path(self.mode_file).read_text().strip()
        if mode == "hang":
            time.sleep(60)
        elif mode == "crash":
            os._exit(1)

    def generate_fitted(self, prompts):
        self._act()
        return [("1", 1) for _ in prompts]

    def score_fitted(self, prompts, labels):
        self._act()
        return [{label: (0.0 if i == 0 else -5.0) for i, label in enumerate(labels)} for _ in prompts]

    def sleep(self) -> None:
        pass

    def wake(self) -> None:
        pass


cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this module


@pytest.fixture(scope="module")
def ray_cluster():
    """The session's Ray cluster when one runs, else a small one for this module (4 CPUs).

    The stand-in workers take half a CPU each, so a small cluster suffices, and it starts where
    a busy machine times out the start of a bigger one; a start that times out is tried again.
    """
    import ray

    if ray.is_initialized():
        yield ray
        return
    for attempt in range(3):
        try:
            ray.init(
                address="local",
                num_cpus=4,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                runtime_env=job_runtime_env(),
            )  # under `uv run`: the folder used in place, not uploaded
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def tokenizer_path(tiny_cache_dir):
    return str(cached_tiny_model())


@pytest.fixture
def mode(tmp_path):
    path = tmp_path / "mode"
    path.write_text("ok")
    return path


def _judge_section(tokenizer_path: str) -> dict:
    return {"model_name": tokenizer_path, "max_model_len": 2048, "sampling": {"max_new_tokens": 4}}


def _judge(tokenizer_path: str, mode_file: Path, replicas: int = 1, **fault_tolerance) -> PooledJudge:
    config = JudgeConfig(**_judge_section(tokenizer_path))
    spec = WorkerSpec(_ModeWorker, 1, lambda rank, replica: {"mode_file": str(mode_file)})
    return PooledJudge(
        config, Placement((CPU,) * replicas), fault_tolerance=FaultToleranceConfig(**fault_tolerance), spec=spec
    )


def _prompts(n: int) -> list[list[dict]]:
    return [[{"role": "user", "content": f"Question {i}. Candidate: {i}. Reply 1 or 0."}] for i in range(n)]


def _timed(fn):
    start = time.monotonic()
    out = fn()
    return out, time.monotonic() - start


def test_steps_past_the_deadline_replace_the_stuck_replica_without_spending_restarts(ray_cluster, tokenizer_path, mode):
    # No restart at all in the budget: before, two steps past the deadline left no replica and
    # every later step returned judge_error for every sample, silently.
    judge = _judge(tokenizer_path, mode, max_restarts=0, step_timeout_s=2.0)
    try:
        mode.write_text("hang")
        for _ in range(3):
            gens, elapsed = _timed(lambda: judge.generate(_prompts(4)))
            assert [g.error for g in gens] == [TIMEOUT] * 4
            # Returns at its 2 s deadline: the stuck work (a 60 s hang) is abandoned. The margin
            # covers replacing the replica on a loaded machine.
            assert elapsed < 10.0
        stats = judge.stats()
        assert stats.deadline_exceeded == 3 and stats.restarts == 0
        # The first step replaces the hung replica; a step that finds the replacement still
        # starting (a start can take longer than this 2 s deadline) leaves it to finish starting.
        assert stats.extra["replacements"] >= 1 and judge.pool.num_alive == 1
        mode.write_text("ok")
        deadline = time.monotonic() + 180  # bounded: until the replacement has started (slow when loaded)
        while True:
            gens = judge.generate(_prompts(4))
            if all(g.error is None for g in gens):
                break
            assert [g.error for g in gens] == [TIMEOUT] * 4
            assert time.monotonic() < deadline, "the replacement replica never started"
        assert [g.text for g in gens] == ["1"] * 4
        assert judge.stats().restarts == 0
    finally:
        judge.shutdown()


def test_crashed_replica_restarts_back_off_and_the_budget_refills(ray_cluster, tokenizer_path, mode):
    refill_s = 600.0
    judge = _judge(
        tokenizer_path,
        mode,
        max_restarts=1,
        restart_backoff_s=0.3,
        restart_budget_refill_s=refill_s,
        step_timeout_s=120.0,
        unavailable_grace_s=3600.0,
    )
    try:
        # The replica crashes mid-call; it is restarted after its back-off (the whole budget)
        # and the chunk it lost is retried on it: every sample is judged.
        mode.write_text("crash")
        threading.Timer(1.0, lambda: mode.write_text("ok")).start()
        taken = time.monotonic()
        gens = judge.generate(_prompts(3))
        assert [g.text for g in gens] == ["1"] * 3
        assert judge.stats().restarts == 1 and judge.pool.num_alive == 1
        # It crashes again with the budget spent: the step ends as judge_error as soon as that
        # is known (the next restart is past the step's deadline), not at the deadline.
        kill_actor(judge.pool.actors()[0][0])  # returns once it is dead
        with step_deadline(time.monotonic() + 5.0):
            gens, elapsed = _timed(lambda: judge.generate(_prompts(3)))
        assert [g.error for g in gens] == [JUDGE_ERROR] * 3 and elapsed < 5.0
        assert judge.stats().restarts == 1 and judge.pool.num_alive == 0
        assert judge.stats().unavailable_calls == 1
        # The replica comes back when the spent restart refills, one period after it was taken
        # (the refill itself is timed in tests/unit/judges/test_restart_budget.py).
        back = judge.pool._next_relaunch()
        assert taken + refill_s - 1.0 < back <= time.monotonic() + refill_s
    finally:
        judge.shutdown()


def test_a_judge_gone_past_its_grace_stops_the_step_with_a_typed_error(ray_cluster, tokenizer_path, mode):
    judge = _judge(
        tokenizer_path,
        mode,
        max_restarts=0,
        restart_budget_refill_s=0.0,
        restart_backoff_s=0.0,
        step_timeout_s=5.0,
        unavailable_grace_s=1.0,
    )
    cfg = {
        "judge": _judge_section(tokenizer_path),
        "resources": {"gpus_per_replica": 0},
        "fault_tolerance": {"step_timeout_s": 5.0},
    }
    env = GenRMEnvironmentImpl(cfg, judge=judge)
    batch = [[{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": f"Answer: {n}"}] for n in (4, 5)]
    meta = [{"ground_truth": "4"}] * 2
    try:
        mode.write_text("crash")
        result = env.step(batch, meta)  # within the grace period: zero rewards, counted
        assert [m["genrm"]["reason"] for m in result.metadata] == ["judge_error"] * 2
        metrics = env.last_metrics()
        assert metrics["genrm/judge_unavailable"] == 1 and metrics["genrm/count/judge_error"] == 2
        time.sleep(1.2)
        with pytest.raises(JudgeUnavailableError, match="unavailable_grace_s") as err:
            env.step(batch, meta)
        assert err.value.down_s > 1.0
    finally:
        env.shutdown()
        judge.shutdown()


def test_the_step_deadline_covers_fitting_and_coalescing(ray_cluster, tokenizer_path, mode):
    # Seconds, not tenths: every phase has room on a loaded machine, and each wrong accounting
    # of the deadline still lands outside the asserted windows.
    judge = _judge(tokenizer_path, mode, step_timeout_s=6.0)
    fit = judge.fitter.fit
    fit_s = [3.0]

    def slow_fit(batch):  # a fitter as slow as a long batch through a real tokenizer
        time.sleep(fit_s[0])
        return fit(batch)

    cfg = {
        "judge": _judge_section(tokenizer_path),
        "resources": {"gpus_per_replica": 0},
        "fault_tolerance": {"step_timeout_s": 6.0},
        "coalesce": {"max_wait_ms": 500},
    }
    env = GenRMEnvironmentImpl(cfg, judge=judge)
    batch = [[{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "Answer: 4"}]]
    try:
        mode.write_text("hang")
        judge.fitter.fit = slow_fit
        result, elapsed = _timed(lambda: env.step(batch, [{"ground_truth": "4"}]))
        # 0.5 s coalescing window + 3 s fitting + a hung engine: answered at the 6 s deadline,
        # not 6 s after the fitting (9.5 s).
        assert result.metadata[0]["genrm"]["reason"] == "judge_error"
        assert 5.9 < elapsed < 8.5
        assert env.last_metrics()["genrm/deadline_exceeded"] == 1
        assert judge.stats().extra["replacements"] == 1  # the hung replica
        # Fitting alone past the deadline: the engine is not even reached, nothing is replaced.
        fit_s[0] = 7.0
        result, elapsed = _timed(lambda: env.step(batch, [{"ground_truth": "4"}]))
        # Not 13.5 s (the deadline counted from the end of the fitting).
        assert result.metadata[0]["genrm"]["reason"] == "judge_error" and elapsed < 10.5
        assert env.last_metrics()["genrm/deadline_exceeded"] == 1
        assert judge.stats().extra["replacements"] == 1
    finally:
        env.shutdown()
        judge.shutdown()
