"""Judge worker actors that cannot start fail fast, saying which actor and why."""

from __future__ import annotations

import sys
import time

import pytest
from ray import cloudpickle

from nemo_genrm import ray_env
from nemo_genrm.config import FaultToleranceConfig
from nemo_genrm.judges.base import Placement, ReplicaPlacement
from nemo_genrm.judges.ray_hosts import JudgeStartupError, WorkerSpec, default_actor_options
from nemo_genrm.judges.ray_pool import ReplicaPool
from nemo_genrm.ray_env import actor_options, actor_runtime_env, job_runtime_env


class _Echo:
    """A minimal engine worker (pickled by value: the workers cannot import this test module)."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def python(self) -> str:
        return sys.executable


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _spec(**extra_options) -> WorkerSpec:
    def options_for(rank, replica):
        return {**default_actor_options(rank, replica), **extra_options}

    return WorkerSpec(_Echo, 1, lambda rank, replica: {}, options_for)


def _pool(spec: WorkerSpec, timeout_s: float, replicas: int = 1) -> ReplicaPool:
    placement = Placement(tuple(ReplicaPlacement(num_cpus=0.5) for _ in range(replicas)))
    return ReplicaPool(spec, placement, FaultToleranceConfig(startup_timeout_s=timeout_s, max_restarts=0))


def _assert_actors_gone(ray, before: set[str]) -> None:
    """The pool killed the actors it created (none is left alive or pending)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = {a["ActorID"]: a["State"] for a in ray._private.state.actors().values()}
        new = {k: v for k, v in states.items() if k not in before and v != "DEAD"}
        if not new:
            return
        time.sleep(0.2)
    raise AssertionError(f"actors left behind: {new}")


def _actor_ids(ray) -> set[str]:
    return set(ray._private.state.actors())


def test_workers_run_on_the_drivers_interpreter(ray_cluster):
    pool = _pool(_spec(), timeout_s=120, replicas=2)
    try:
        results = pool.run("python", [(), ()], [1, 1])
    finally:
        pool.shutdown()
    assert results == [(sys.executable, None), (sys.executable, None)]


def test_unschedulable_worker_fails_within_the_startup_timeout(ray_cluster):
    before = _actor_ids(ray_cluster)
    start = time.monotonic()
    with pytest.raises(JudgeStartupError) as err:
        _pool(_spec(num_gpus=64), timeout_s=3)
    elapsed = time.monotonic() - start
    assert elapsed < 30
    message = str(err.value)
    assert "replica 0 rank 0" in message and "startup_timeout_s" in message
    assert "PENDING_CREATION" in message and "never fits" in message and "GPU" in message
    _assert_actors_gone(ray_cluster, before)


def test_worker_whose_interpreter_cannot_start_fails_within_the_startup_timeout(ray_cluster):
    before = _actor_ids(ray_cluster)
    start = time.monotonic()
    with pytest.raises(JudgeStartupError) as err:
        _pool(_spec(runtime_env={"py_executable": "/nonexistent/bin/python"}), timeout_s=5)
    assert time.monotonic() - start < 40
    message = str(err.value)
    assert "replica 0 rank 0" in message
    assert "/nonexistent/bin/python" in message and "runtime_env" in message
    _assert_actors_gone(ray_cluster, before)


def test_actor_runtime_env_merges_the_callers():
    assert actor_runtime_env() == {"py_executable": sys.executable}
    mine = {"env_vars": {"A": "1"}}
    merged = actor_runtime_env(mine)
    assert merged == {"py_executable": sys.executable, "env_vars": {"A": "1"}}
    merged["env_vars"]["A"] = "2"
    assert mine == {"env_vars": {"A": "1"}}  # the caller's dict is not shared
    assert actor_runtime_env({"py_executable": "/opt/py"})["py_executable"] == "/opt/py"
    opts = actor_options({"num_cpus": 1, "runtime_env": mine}, num_gpus=0)
    assert opts == {"num_cpus": 1, "num_gpus": 0, "runtime_env": {"py_executable": sys.executable, **mine}}


def test_the_job_uses_the_drivers_folder_in_place_under_uv_run(monkeypatch, tmp_path):
    # Under Ray's `uv run` hook the job's working directory is the current folder as a
    # `local://` URI: used in place (nothing packed or uploaded) and not checked against the
    # uv project's folder, so `uv run --project <checkout>` works from any folder.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ray_env, "_uv_run_hook_active", lambda: True)
    mine = {"env_vars": {"A": "1"}}
    assert job_runtime_env(mine) == {"env_vars": {"A": "1"}, "working_dir": f"local://{tmp_path}"}
    assert mine == {"env_vars": {"A": "1"}}  # the caller's dict is not changed
    assert job_runtime_env({"working_dir": "/mine"}) == {"working_dir": "/mine"}  # the caller's is kept
    monkeypatch.setattr(ray_env, "_uv_run_hook_active", lambda: False)
    assert job_runtime_env() == {}  # without the hook Ray uploads nothing: nothing to change
    assert job_runtime_env(mine) == mine


def test_package_actor_classes_default_to_the_drivers_interpreter():
    """``SomeActor.remote(...)`` with no options already runs on this interpreter."""
    from nemo_genrm.env.environment import MAX_CONCURRENCY, GenRMEnvironment
    from nemo_genrm.grpo.policy import PolicyActor
    from nemo_genrm.judges.ray_hosts import RemoteWorkerHost

    for actor_class in (GenRMEnvironment, PolicyActor, RemoteWorkerHost):
        assert actor_class._default_options["runtime_env"] == {"py_executable": sys.executable}
    assert GenRMEnvironment._default_options["max_concurrency"] == MAX_CONCURRENCY


def test_environment_that_cannot_be_scheduled_fails_within_the_startup_timeout(ray_cluster, tiny_cache_dir):
    """``GenRMEnvironment.start`` gives up on an actor Ray cannot place, saying why, and leaves
    no actor behind (the judge is never loaded; the driver checks its folder first)."""
    from nemo_genrm.env.environment import GenRMEnvironment
    from nemo_genrm.testing import cached_tiny_judge

    before = _actor_ids(ray_cluster)
    cfg = {
        "judge": {"model_name": str(cached_tiny_judge("1", cache_dir=tiny_cache_dir)), "precision": "float32"},
        "resources": {"gpus_per_replica": 0},
        "fault_tolerance": {"startup_timeout_s": 2},
    }
    start = time.monotonic()
    with pytest.raises(JudgeStartupError) as err:
        GenRMEnvironment.options(num_cpus=10_000).start(cfg)
    assert time.monotonic() - start < 30
    message = str(err.value)
    assert "environment actor was not scheduled within fault_tolerance.startup_timeout_s (2 s)" in message
    assert "PENDING_CREATION" in message and "never fits" in message
    _assert_actors_gone(ray_cluster, before)
