"""The GenRM environment as a Ray actor over the real dtensor engine (CPU, virtual GPUs).

One module-scoped environment actor (separate placement, 2 replicas x 1 virtual GPU, fixed judge
"1"), started the way NeMo-RL starts a registered env, serves the step, placement and crash tests; the last test shuts it down and checks that Ray has
every resource back. Colocated placement and start-up errors get their own short tests.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from nemo_genrm.config import ConfigError
from nemo_genrm.env.environment import GenRMEnvironment, GenRMEnvironmentImpl
from nemo_genrm.integrations.nemo_rl import ACTOR_FQN
from nemo_genrm.ray_env import actor_runtime_env
from nemo_genrm.samples.types import EnvironmentReturn
from nemo_genrm.testing import cached_tiny_judge


def _cfg(model: str, **resources) -> dict:
    return {
        "judge": {
            "model_name": model,
            "precision": "float32",
            "max_model_len": 1024,
            "batching": {"max_batch_size": 2},  # many small chunks: a crash lands mid-step
        },
        "resources": {"num_replicas": 2, "gpus_per_replica": 1, "cpus_per_replica": 1.0, **resources},
        "fault_tolerance": {"max_restarts": 3, "step_timeout_s": 300},
    }


def _sample(answer: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": "What is 6 times 7?"}, {"role": "assistant", "content": f"Answer: {answer}"}]


def _cpu_gpu(resources: dict) -> dict:
    return {k: round(v, 6) for k, v in resources.items() if k in ("CPU", "GPU")}


def _wait_for(predicate, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.fixture(scope="module")
def judge_path(tiny_cache_dir: str) -> str:
    return str(cached_tiny_judge("1", cache_dir=tiny_cache_dir))


@pytest.fixture(scope="module")
def env(ray_cluster, judge_path):
    """The environment actor, started as NeMo-RL's ``create_env`` starts a registered env."""
    from hydra.utils import get_object

    ray = ray_cluster
    initial = _cpu_gpu(ray.available_resources())
    actor_class = get_object(ACTOR_FQN)
    assert actor_class is GenRMEnvironment
    actor = actor_class.options(runtime_env={"py_executable": sys.executable}).remote(_cfg(judge_path))
    ray.get(actor.last_metrics.remote())  # constructed (raises here if the constructor failed)
    yield actor, initial
    ray.get(actor.shutdown.remote())
    ray.kill(actor)


def test_step_through_the_actor(ray_cluster, env):
    actor, _ = env
    logs = [_sample("42"), _sample("41"), _sample("42"), [{"role": "assistant", "content": None}]]
    meta = [{"ground_truth": "42"}, {"ground_truth": "42"}, {"ground_truth": "42"}, {"ground_truth": "42"}]
    result = ray_cluster.get(actor.step.remote(logs, meta))
    assert isinstance(result, EnvironmentReturn) and type(result).__name__ == "EnvironmentReturn"
    # The judge says 1 to everything; the value verifier (reward.verifier both) vetoes 41.
    assert result.rewards.tolist() == [1.0, 0.0, 1.0, 0.0]
    assert result.answers == ["42", "41", "42", None]
    assert [m["genrm"]["reason"] for m in result.metadata] == ["judged"] * 3 + ["bad_input"]
    metrics = ray_cluster.get(actor.last_metrics.remote())
    assert metrics["genrm/judge_prompts"] == 2 and metrics["genrm/dedup_hits"] == 1
    assert metrics["genrm/prompt_tokens"] > 0
    _, total = ray_cluster.get(actor.global_post_process_and_metrics.remote({"rewards": result.rewards}))
    assert total["genrm/num_samples"] == 4 and total["genrm/mean_reward"] == 0.5


def test_the_driver_handle_reads_typed_results_across_ray(ray_cluster, env):
    """The GRPO driver's handle calls the actor by method, and the typed results cross Ray."""
    from nemo_genrm.grpo.handles import EnvHandle
    from nemo_genrm.samples.types import SampleResult, sample_results

    handle = EnvHandle(env[0])
    result = handle.step([_sample("42"), [{"role": "assistant", "content": None}]], [{"ground_truth": "42"}] * 2)
    assert sample_results(result.metadata, 2) == [
        SampleResult("judged", 1.0, 1, info={"verifier": "equal"}),
        SampleResult("bad_input", why="content_not_text"),
    ]
    assert handle.last_metrics()["genrm/num_samples"] == 2.0


def test_separate_placement_lands_in_its_own_group(ray_cluster, env):
    actor, _ = env
    info = ray_cluster.get(actor.placement_info.remote())
    assert info["layout"] == "separate" and len(info["owned_groups"]) == 1 and info["joined_group"] is None
    group = info["owned_groups"][0]
    table = ray_cluster.util.placement_group_table()[group]
    assert table["strategy"] == "STRICT_PACK" and list(table["bundles"].values()) == [{"CPU": 1.0, "GPU": 1.0}] * 2
    workers = [w for replica in info["replicas"] for w in replica]
    assert len(info["replicas"]) == 2 and len(workers) == 2
    assert all(w["placement_group_id"] == group and w["resources"] == {"CPU": 1.0, "GPU": 1.0} for w in workers)
    assert len({w["gpu_ids"][0] for w in workers}) == 2  # one (virtual) GPU each, not shared
    free = ray_cluster.available_resources()
    assert [free.get(f"GPU_group_{i}_{group}", 0.0) for i in range(2)] == [0.0, 0.0]  # each bundle fully used


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_killing_a_judge_worker_mid_step_still_yields_every_reward(ray_cluster, env):
    actor, _ = env
    info = ray_cluster.get(actor.placement_info.remote())
    victim = info["replicas"][0][0]["pid"]
    answers = [str(i) for i in range(240)]  # 240 distinct prompts -> 120 chunks of 2
    start_ticks = _cpu_ticks(victim)
    ref = actor.step.remote([_sample(a) for a in answers], [{"ground_truth": "7"}] * len(answers))
    # Kill the worker once it is busy judging (its CPU time moves), i.e. in the middle of the step.
    assert _wait_for(lambda: _cpu_ticks(victim) - start_ticks >= 3, timeout_s=120), "worker never got work"
    os.kill(victim, signal.SIGKILL)
    result = ray_cluster.get(ref, timeout=300)
    # The judge says 1 to all; the value verifier vetoes every answer but 7.
    assert result.rewards.tolist() == [float(a == "7") for a in answers]
    assert result.answers == answers
    metrics = ray_cluster.get(actor.last_metrics.remote())
    assert metrics["genrm/judge_restarts"] >= 1 and metrics["genrm/count/judge_error"] == 0
    after = ray_cluster.get(actor.placement_info.remote())
    assert after["replicas"][0][0]["pid"] != victim  # the replica was recreated in its bundle
    assert after["replicas"][0][0]["placement_group_id"] == info["owned_groups"][0]


def test_shutdown_gives_back_every_resource(ray_cluster, env):
    actor, initial = env
    group = ray_cluster.get(actor.placement_info.remote())["owned_groups"][0]
    ray_cluster.get(actor.shutdown.remote())
    ray_cluster.get(actor.shutdown.remote())  # idempotent

    # At least what was free before the env started: actors of earlier test modules may still be
    # winding down when the baseline is taken, so "more free" is fine, "less free" is a leak.
    def given_back() -> bool:
        free = _cpu_gpu(ray_cluster.available_resources())
        return all(free.get(key, 0.0) >= value for key, value in initial.items())

    assert _wait_for(given_back), (
        ray_cluster.available_resources(),
        initial,
    )
    assert ray_cluster.util.placement_group_table()[group]["state"] == "REMOVED"
    assert not any(group in key for key in ray_cluster.available_resources())


def test_colocated_judge_shares_the_policy_bundles(ray_cluster, judge_path):
    ray = ray_cluster
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    initial = _cpu_gpu(ray.available_resources())
    policy_pg = placement_group([{"GPU": 1, "CPU": 1}] * 2, strategy="PACK", name="test_policy_pg")
    ray.get(policy_pg.ready())

    @ray.remote(runtime_env=actor_runtime_env())
    class Policy:
        def gpu_ids(self):
            return [str(g) for g in ray.get_gpu_ids()]

    policies = [
        Policy.options(
            num_cpus=0.5,
            num_gpus=0.5,
            scheduling_strategy=PlacementGroupSchedulingStrategy(policy_pg, placement_group_bundle_index=i),
        ).remote()
        for i in range(2)
    ]
    policy_gpus = ray.get([p.gpu_ids.remote() for p in policies])
    cfg = _cfg(
        judge_path, placement="colocated", colocate_with="test_policy_pg", gpu_fraction=0.3, cpus_per_replica=0.25
    )
    env = None
    try:
        env = GenRMEnvironmentImpl(cfg)  # in this process: the actor path is covered above
        info = env.placement_info()
        pg_id = policy_pg.id.hex()
        assert info["layout"] == "colocated" and info["joined_group"] == pg_id and info["owned_groups"] == []
        for bundle, (replica, gpus) in enumerate(zip(info["replicas"], policy_gpus, strict=True)):
            worker = replica[0]
            assert worker["placement_group_id"] == pg_id
            assert worker["resources"] == {"CPU": 0.25, "GPU": 0.3}
            assert worker["gpu_ids"] == gpus  # replica r shares bundle r's GPU with the policy
            assert ray.available_resources()[f"GPU_group_{bundle}_{pg_id}"] == pytest.approx(0.2)  # 1 - 0.5 - 0.3
        result = env.step([_sample("3")] * 3, [{"ground_truth": "3"}] * 3)
        assert result.rewards.tolist() == [1.0] * 3
        metrics = env.last_metrics()
        assert metrics["genrm/wake_s"] > 0 and metrics["genrm/sleep_s"] > 0
        env.shutdown()
        # The joined group survives the judge and its bundles are back to the policy's use only.
        assert ray.util.placement_group_table(policy_pg)["state"] == "CREATED"
        assert _wait_for(lambda: ray.available_resources().get(f"GPU_group_0_{pg_id}") == pytest.approx(0.5))
    finally:
        if env is not None:
            env.shutdown()
        for p in policies:
            ray.kill(p)
        remove_placement_group(policy_pg)
    assert _wait_for(lambda: _cpu_gpu(ray.available_resources()) == initial)


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"placement": "colocated"}, "no placement group to join"),
        ({"placement": "colocated", "colocate_with": "no_such_group"}, "no placement group named 'no_such_group'"),
        ({"num_replicas": 8}, "needs 8 GPUs"),
    ],
)
def test_layout_errors_at_start_up(ray_cluster, judge_path, resources, message):
    before = _cpu_gpu(ray_cluster.available_resources())
    with pytest.raises(ConfigError, match=message):
        GenRMEnvironmentImpl(_cfg(judge_path, **resources))
    assert _cpu_gpu(ray_cluster.available_resources()) == before  # nothing reserved, nothing leaked


def test_concurrent_single_sample_steps_share_judge_calls(ray_cluster, judge_path):
    """NeMo-RL's async rollout: one ``step`` per sample, all in flight at once, one actor."""
    ray = ray_cluster
    cfg = {**_cfg(judge_path, num_replicas=1), "coalesce": {"max_wait_ms": 3000, "max_samples": 48}}
    actor = GenRMEnvironment.remote(cfg)  # the class's own defaults: threaded, driver's interpreter
    try:
        ray.get(actor.last_metrics.remote())
        answers = [str(i % 12) for i in range(40)]
        refs = [actor.step.remote([_sample(a)], [{"ground_truth": "7", "tag": i}]) for i, a in enumerate(answers)]
        broken = actor.step.remote([[{"role": "assistant", "content": None}]] * 8, [{"ground_truth": "7"}] * 8)
        bad_call = actor.step.remote([_sample("1")], [{}, {}])  # a caller bug: raises for that caller only
        results = ray.get(refs, timeout=300)
        with pytest.raises(ValueError):
            ray.get(bad_call, timeout=300)
        assert ray.get(broken, timeout=300).rewards.tolist() == [0.0] * 8
        for i, (answer, result) in enumerate(zip(answers, results, strict=True)):
            # The fixed judge agrees with every answer; the value verifier vetoes all but 7.
            assert result.rewards.tolist() == [float(answer == "7")]
            assert result.answers == [answer] and result.metadata[0]["tag"] == i
        _, metrics = ray.get(actor.global_post_process_and_metrics.remote({}))
        assert metrics["genrm/num_samples"] == 48
        assert metrics["genrm/count/judged"] == 40 and metrics["genrm/count/bad_input"] == 8
        assert metrics["genrm/judge_prompts"] == 12  # 40 callers, 12 distinct answers, one judge call
        assert metrics["genrm/judge_latency_s"] > 0
    finally:
        ray.get(actor.shutdown.remote())
        ray.kill(actor)
