"""The judge past one machine, on Ray's own multi-node test cluster (several raylets here).

The module starts one simulated cluster (:class:`~nemo_genrm.testing.cluster.SimulatedCluster`):
a head that runs no work and three judge nodes of 2 CPUs, labelled ``genrm-role=judge`` and a
zone each, two of them with a custom ``judge_slot`` resource::

    n1  zone=a  judge_slot=1        n2  zone=b  judge_slot=1        n3  zone=c

The session's own Ray cluster (tests/conftest.py) is stopped first and started again after, so
the two never meet in this process, and every process of the simulated cluster is checked gone
(and killed if not) even when a test fails. Replicas are small: the real dtensor engine with a
tiny fixed-verdict model in the service, else a stand-in worker whose verdict is a
known function of the prompt (:class:`~nemo_genrm.testing.tagged_value_workers.RuleWorker`: ``1`` when
the candidate's ``ans-<n>`` equals the reference's), so every reward is checked against its
hand-computed value wherever the pool sent the sample.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from nemo_genrm.config import ConfigError, GenRMConfig, JudgeConfig, validate
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.judges.placement import acquire_resources
from nemo_genrm.judges.pooled_judge import PooledJudge
from nemo_genrm.testing import cached_tiny_judge, cached_tiny_tokenizer
from nemo_genrm.testing.cluster import SimulatedCluster
from nemo_genrm.testing.tagged_value_workers import rule_worker_spec

JUDGE_NODE = {"genrm-role": "judge"}
NODES = {  # name -> (zone, custom resources)
    "n1": ("a", {"judge_slot": 1.0}),
    "n2": ("b", {"judge_slot": 1.0}),
    "n3": ("c", {}),
}


@pytest.fixture(scope="module")
def cluster(tiny_cache_dir):
    """The simulated cluster; the session's Ray is stopped before and started again after."""
    import ray
    from conftest import start_session_ray

    had_session = ray.is_initialized()
    if had_session:
        ray.shutdown()
    sim = SimulatedCluster()
    killed: list[str] = []
    try:
        sim.start()
        for name, (zone, resources) in NODES.items():
            sim.add_node(name, cpus=2, labels={**JUDGE_NODE, "zone": zone}, resources=resources, wait=False)
        sim.wait_for_nodes()
        yield sim
    finally:
        killed = sim.shutdown()
        if had_session:
            start_session_ray()
    assert not killed, f"processes of the simulated cluster outlived its shutdown: {killed}"


# ----------------------------------------------------------------------------------- helpers
def _genrm(model: str, resources: dict[str, Any], **fault_tolerance: Any) -> GenRMConfig:
    ft = {"startup_timeout_s": 60.0, "step_timeout_s": 60.0, "restart_backoff_s": 0.2, **fault_tolerance}
    return validate(
        GenRMConfig,
        {
            "judge": {
                "model_name": model,
                "precision": "float32",
                "max_model_len": 1024,
                "sampling": {"max_new_tokens": 4},
                "batching": {"max_batch_size": 4},
            },
            "resources": {"gpus_per_replica": 0, "cpus_per_replica": 1.0, **resources},
            "fault_tolerance": ft,
        },
        prefix="env.genrm",
    )


def _rule_judge(cfg: GenRMConfig, delay_s: float = 0.0) -> tuple[PooledJudge, Any]:
    """A pool of rule workers where ``cfg.resources`` puts it, and its resources."""
    resources = acquire_resources(cfg.judge, cfg.resources, ready_timeout_s=cfg.fault_tolerance.startup_timeout_s)
    try:
        judge = PooledJudge(
            cfg.judge, resources.placement, fault_tolerance=cfg.fault_tolerance, spec=rule_worker_spec(delay_s=delay_s)
        )
    except BaseException:
        resources.release()
        raise
    return judge, resources


def _where(cluster: SimulatedCluster, stats: Any) -> list[str | None]:
    """The node name of each replica in a judge's stats (``None`` while it is down or starting)."""
    return [cluster.name_of(node) for node in stats.extra["replica_nodes"]]


def _judge_nodes(cluster: SimulatedCluster, count: int) -> None:
    """Add judge nodes until ``count`` are running (a test before may have removed one)."""
    for i in range(count - sum(n.labels.get("genrm-role") == "judge" for n in cluster.nodes.values())):
        cluster.add_node(f"extra{len(cluster.removed)}-{i}", cpus=2, labels={**JUDGE_NODE, "zone": "x"})


def _batch(n: int) -> tuple[list[list[dict]], list[dict], list[float]]:
    """``n`` samples, their metadata and their rewards computed by hand.

    Sample ``i`` answers ``ans-<i % 5>`` against the reference ``ans-<i % 3>``: the rule judge
    says 1 exactly when they are equal (i % 5 == i % 3, i.e. i % 15 in {0, 1, 2}). Every 7th
    sample answers nothing: it is not judged and gets 0 (reason no_answer).
    """
    logs, meta, expected = [], [], []
    for i in range(n):
        answer = "" if i % 7 == 6 else f"Working it out. Answer: ans-{i % 5}"
        logs.append(
            [{"role": "user", "content": f"Question {i}: which value?"}, {"role": "assistant", "content": answer}]
        )
        meta.append({"ground_truth": f"ans-{i % 3}", "question": f"Question {i}: which value?"})
        expected.append(0.0 if i % 7 == 6 else float(i % 5 == i % 3))
    return logs, meta, expected


# ---------------------------------------------------------------------------------- placement
def test_strict_spread_puts_one_replica_on_each_node_the_labels_admit(cluster):
    # Two replicas, each on a node of its own among zones a and c, stepped by the environment.
    # Rule workers: placement is the same for any engine, and the real dtensor engine runs on
    # these nodes in the service test below (each real replica costs seconds of start-up).
    cfg = _genrm(
        str(cached_tiny_tokenizer()),
        {"num_replicas": 2, "num_nodes": 2, "strategy": "STRICT_SPREAD", "node_labels": {"zone": "in(a,c)"}},
    )
    judge, resources = _rule_judge(cfg)
    env = GenRMEnvironmentImpl(cfg, judge=judge)
    try:
        assert sorted(_where(cluster, env.judge_stats())) == ["n1", "n3"]
        logs, meta, expected = _batch(7)
        result = env.step(logs, meta)
        assert result.rewards.tolist() == expected == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
        assert [m["genrm"]["reason"] for m in result.metadata] == ["judged"] * 6 + ["no_answer"]
    finally:
        env.shutdown()
        judge.shutdown()
        resources.release()


def test_num_nodes_one_packs_the_replicas_on_the_node_the_label_names(cluster):
    cfg = _genrm(str(cached_tiny_tokenizer()), {"num_replicas": 2, "node_labels": {"zone": "b"}})
    judge, resources = _rule_judge(cfg)
    try:
        assert resources.owned_groups and _where(cluster, judge.stats()) == ["n2", "n2"]
        gens = judge.generate([[{"role": "user", "content": "Reference: ans-4. Candidate: ans-4."}]] * 3)
        assert [g.text for g in gens] == ["1"] * 3
    finally:
        judge.shutdown()
        resources.release()


def test_a_custom_resource_keeps_the_replicas_on_the_nodes_that_have_it(cluster):
    # n3 has CPUs to spare but no judge_slot: the two replicas spread over n1 and n2.
    cfg = _genrm(
        str(cached_tiny_tokenizer()), {"num_replicas": 2, "num_nodes": 2, "custom_resources": {"judge_slot": 1}}
    )
    judge, resources = _rule_judge(cfg)
    try:
        assert sorted(_where(cluster, judge.stats())) == ["n1", "n2"]
    finally:
        judge.shutdown()
        resources.release()


@pytest.mark.parametrize(
    ("resources", "named"),
    [
        # Three judge_slot asked of a cluster with two.
        (
            {"num_replicas": 3, "num_nodes": 3, "custom_resources": {"judge_slot": 1}},
            ["needs 3 judge_slot", "has 2", "ray start --resources"],
        ),
        # No node carries the label: the message lists the labels the nodes do carry.
        (
            {"num_replicas": 1, "node_labels": {"zone": "d"}},
            ["no alive node matches", "zone=d", "zone=a", "--labels=zone=d"],
        ),
        # Two workers on nodes of their own, in a zone of one node.
        (
            {"num_replicas": 2, "num_nodes": 2, "strategy": "STRICT_SPREAD", "node_labels": {"zone": "b"}},
            ["STRICT_SPREAD", "1 of the nodes labelled zone=b can hold one", "1 more node"],
        ),
        # A worker larger than any node.
        (
            {"num_replicas": 1, "cpus_per_replica": 3.0},
            ["can hold one judge worker", "CPU (needs 3; the most one node has is 2)"],
        ),
    ],
)
def test_a_layout_no_node_can_hold_fails_at_once_naming_what_is_missing(cluster, resources, named):
    cfg = _genrm("unused", resources)
    start = time.monotonic()
    with pytest.raises(ConfigError) as err:
        acquire_resources(cfg.judge, cfg.resources, ready_timeout_s=60)
    assert time.monotonic() - start < 10  # read from the nodes' totals, not waited for
    for text in named:
        assert text in str(err.value), str(err.value)


def test_a_layout_whose_resources_are_held_fails_within_the_start_time(cluster):
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    held = placement_group([{"CPU": 2}], strategy="STRICT_PACK", bundle_label_selector=[{"zone": "b"}])
    ray.get(held.ready(), timeout=60)
    cfg = _genrm("unused", {"num_replicas": 1, "node_labels": {"zone": "b"}}, startup_timeout_s=3.0)
    try:
        start = time.monotonic()
        with pytest.raises(ConfigError) as err:
            acquire_resources(cfg.judge, cfg.resources, ready_timeout_s=cfg.fault_tolerance.startup_timeout_s)
        assert time.monotonic() - start < 10
        message = str(err.value)
        assert "not scheduled within 3s" in message and "zone=b" in message
        assert "CPU 0 of 2" in message, message  # what the one eligible node has free
    finally:
        remove_placement_group(held)


# ---------------------------------------------------------------------------------- node loss
def test_a_node_lost_mid_step_leaves_every_reward_right_and_its_replica_comes_back(cluster):
    cfg = _genrm(
        str(cached_tiny_tokenizer()),
        {"num_replicas": 3, "num_nodes": 3, "strategy": "STRICT_SPREAD", "node_labels": JUDGE_NODE},
    )
    judge, resources = _rule_judge(cfg, delay_s=1.5)  # every chunk takes 1.5 s: the loss lands mid-call
    env = GenRMEnvironmentImpl(cfg, judge=judge)
    logs, meta, expected = _batch(28)  # 24 judged prompts, 6 chunks of 4, 2 per replica at once
    try:
        where = _where(cluster, judge.stats())
        assert sorted(where) == ["n1", "n2", "n3"]
        victim = where[0]
        done: list[Any] = []
        stepping = threading.Thread(target=lambda: done.append(env.step(logs, meta)))
        stepping.start()
        time.sleep(0.7)
        cluster.remove_node(victim)  # its processes killed, as when the machine dies
        stepping.join(timeout=60)
        assert done, "the step did not return"
        result = done[0]
        assert result.rewards.tolist() == expected  # each sample's own, none lost
        assert [m["genrm"]["reason"] for m in result.metadata] == [
            "no_answer" if i % 7 == 6 else "judged" for i in range(28)
        ]
        metrics = env.last_metrics()
        assert metrics["genrm/judge_node_losses"] == 1.0
        assert metrics["genrm/judge_restarts"] == 0.0  # a lost node spends no restart
        assert metrics["genrm/count/judge_error"] == 0.0

        # No judge node has room left (STRICT_SPREAD: one worker per node): the replica waits
        # for one, and steps run on the two left.
        second = env.step(logs, meta)
        assert second.rewards.tolist() == expected
        stats = judge.stats()
        assert stats.node_losses == 1 and stats.restarts == 0
        assert stats.extra["replicas_starting"] == 1 and _where(cluster, judge.stats())[0] is None

        # A node comes back: Ray places the replica's bundle there and the replica is used again.
        cluster.add_node("n4", cpus=2, labels={**JUDGE_NODE, "zone": "d"})
        import ray

        ray.get(judge.pool._replicas[0].started, timeout=120)
        before = judge.pool.chunks_done()[0]
        third = env.step(logs, meta)
        assert third.rewards.tolist() == expected
        assert _where(cluster, judge.stats())[0] == "n4"
        assert judge.pool.chunks_done()[0] > before
        assert judge.stats().node_losses == 1

        # Training idle, no step: n4's raylet alone is killed. Its judge worker goes with it at
        # once, and the loss is noticed and the replica brought back on a node that joins, all
        # before any step.
        workers = cluster.actor_pids("n4", "WorkerHost")
        assert len(workers) == 1, workers
        os.kill(cluster.raylet_pid("n4"), signal.SIGKILL)
        killed = time.monotonic()
        _wait_for(lambda: not any(_running(pid) for pid in workers), timeout_s=10)
        outlived = time.monotonic() - killed
        _wait_for(lambda: judge.stats().node_losses == 2, timeout_s=60)
        cluster.remove_node("n4")  # what else of it is left (its agents)
        cluster.add_node("n5", cpus=2, labels={**JUDGE_NODE, "zone": "e"})
        _wait_for(lambda: _where(cluster, judge.stats())[0] == "n5", timeout_s=120)
        print(
            f"the judge worker outlived its raylet by {outlived:.2f} s; "
            f"the replica was back on a new node {time.monotonic() - killed:.1f} s after, with no step"
        )
        assert outlived < 6.0  # its watch polls every 0.5 s; Ray alone leaves it running about 10 s
        fourth = env.step(logs, meta)
        assert fourth.rewards.tolist() == expected
        # The loss noticed between steps is counted in the next step's metrics, once.
        assert env.last_metrics()["genrm/judge_node_losses"] == 1.0
        assert judge.stats().restarts == 0
    finally:
        env.shutdown()
        judge.shutdown()
        resources.release()


def _wait_for(predicate, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not so within {timeout_s:g} s")
        time.sleep(0.1)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


# ------------------------------------------------------------------------------------ service
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _health(base: str) -> dict[str, Any]:
    response = httpx.get(f"{base}/health", timeout=10)
    try:
        return {"code": response.status_code, **response.json()}
    except ValueError:  # Serve's proxy's own plain-text 5xx, for a request it sent to the lost replica
        return {"code": response.status_code, "error": response.text[:200]}


def _wait_health(base: str, predicate, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            last = _health(base)
        except httpx.HTTPError as exc:
            last = {"error": type(exc).__name__}
        if predicate(last):
            return last
        time.sleep(0.3)
    raise AssertionError(f"/health never became what was awaited within {timeout_s:g} s; last: {last}")


def test_the_service_across_nodes_answers_or_5xxs_every_request_while_a_node_is_lost(cluster):
    from nemo_genrm.judges.http import HttpJudge
    from nemo_genrm.serve import start_judge_service, stop_judge_service

    _judge_nodes(cluster, 3)  # two replicas, one node to spare
    app = "genrm-scale-out"
    port = _free_port()
    service = {
        "judge": {
            "backend": "dtensor",
            "model_name": str(cached_tiny_judge("1")),
            "precision": "float32",
            "max_model_len": 256,
            "sampling": {"max_new_tokens": 4},
        },
        "serve": {
            "port": port,
            "app_name": app,
            "served_model_name": "judge",
            "proxy_location": "HeadOnly",  # one proxy, on the head: every node here shares one IP
            "num_replicas": 2,
            "max_replicas_per_node": 1,
            "node_labels": JUDGE_NODE,
            "num_cpus_per_replica": 1,
            "max_batch_size": 8,
            "batch_wait_timeout_s": 0.3,  # requests wait in their replica: the loss finds some there
            "health_check_period_s": 1.0,
            "health_check_timeout_s": 5.0,
            "startup_timeout_s": 300,
        },
    }
    url = start_judge_service(service)
    base = url.removesuffix("/v1")
    body = {"model": "judge", "messages": [{"role": "user", "content": "Reference: 4. Answer: 4."}]}
    codes: collections.Counter[Any] = collections.Counter()
    stop = threading.Event()
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(timeout=60) as http:
            while not stop.is_set():
                try:
                    code: Any = http.post(f"{url}/chat/completions", json=body).status_code
                except httpx.HTTPError as exc:  # a dropped connection: what must not happen
                    code = type(exc).__name__
                with lock:
                    codes[code] += 1

    http_judge = HttpJudge(
        JudgeConfig(
            backend="http",
            model_name="judge",
            max_model_len=256,
            sampling={"max_new_tokens": 4},
            http={"base_url": url, "max_retries": 5, "timeout_s": 60},
        )
    )
    threads = [threading.Thread(target=client) for _ in range(4)]
    try:
        ready = _health(base)
        assert ready["status"] == "ready" and ready["replicas"]["running"] == 2, ready
        serving = cluster.actor_nodes(f"ServeReplica:{app}")
        assert len(serving) == 2 and len(set(serving)) == 2, serving  # one replica per node
        spare = sorted(set(cluster.nodes) - set(serving))
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        judged: list[Any] = []
        retrying = threading.Thread(
            target=lambda: judged.extend(  # a daemon: a failure ends the test at once
                gen.text for gen in http_judge.generate([body["messages"]] * 24)
            ),
            daemon=True,
        )
        retrying.start()
        cluster.remove_node(serving[0])  # its processes killed, requests in flight on it
        degraded = _wait_health(base, lambda h: h.get("status") == "degraded", timeout_s=60)
        assert degraded["code"] == 200 and degraded["replicas"]["running"] == 1, degraded
        assert "1 of 2 replicas running" in degraded["reason"]
        retrying.join(timeout=120)
        # The loss is over for the clients: stopped now, they leave the cores to the replica
        # Serve starts next (on 2 shared cores they would slow its start by tens of seconds).
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        print(f"service statuses while a node was lost: {dict(codes)}")
        # Every request got an answer or a 5xx the client may retry; none vanished.
        assert set(codes) <= {200, 500, 502, 503, 504}, codes
        assert codes[200] > 0
        assert judged == ["1"] * 24  # the package's HTTP judge retried its 5xx to an answer
        # Serve starts the missing replica on the node to spare; /health is ready again.
        back = _wait_health(base, lambda h: h.get("status") == "ready", timeout_s=180)
        assert back["replicas"]["running"] == 2, back
        assert cluster.actor_nodes(f"ServeReplica:{app}") == sorted([serving[1], *spare])
    finally:
        stop.set()
        for thread in threads:
            if thread.is_alive():
                thread.join(timeout=60)
        http_judge.shutdown()
        stop_judge_service(app)


# A node whose Python cannot start Ray workers: its raylet's environment puts this
# sitecustomize first on the path, which stops a Ray worker process before it connects (as a
# missing or broken interpreter, or a failing import, would), and nothing else.
BROKEN_SITE = """
import sys
if any(str(arg).endswith("default_worker.py") for arg in sys.orig_argv):
    sys.stderr.write("broken-node: this node's Python cannot start Ray workers\\n")
    sys.exit(3)
"""


def test_a_replica_whose_worker_cannot_start_fails_the_start_with_the_workers_own_error(cluster, tmp_path):
    from nemo_genrm.errors import JudgeStartupError
    from nemo_genrm.serve import start_judge_service, stop_judge_service

    (tmp_path / "sitecustomize.py").write_text(BROKEN_SITE)
    cluster.add_node("broken", cpus=2, labels={"zone": "broken"}, env_vars={"PYTHONPATH": str(tmp_path)})
    app = "genrm-broken-node"
    service = {
        "judge": {
            "backend": "dtensor",
            "model_name": str(cached_tiny_judge("1")),
            "precision": "float32",
            "max_model_len": 256,
            "sampling": {"max_new_tokens": 4},
        },
        "serve": {
            "port": _free_port(),
            "app_name": app,
            "proxy_location": "HeadOnly",
            "num_replicas": 1,
            "node_labels": {"zone": "broken"},
            "startup_timeout_s": 120,
        },
    }
    try:
        start = time.monotonic()
        with pytest.raises(JudgeStartupError) as err:
            start_judge_service(service)
        took = time.monotonic() - start
        message = str(err.value)
        print(f"start-up failed after {took:.1f} s with:\n{message}")
        # The worker's own words, where it ran, and what to check there.
        assert "broken-node: this node's Python cannot start Ray workers" in message
        assert "exited before it connected" in message and "'zone': 'broken'" in message
        assert sys.executable in message and "docs/scale_out.md" in message
        from ray._private.state import actors

        left = [a["State"] for a in actors().values() if f"ServeReplica:{app}" in a["ActorClassName"]]
        assert set(left) <= {"DEAD"}, left  # the service was taken down: nothing left retrying it
    finally:
        stop_judge_service(app)
        cluster.remove_node("broken")
