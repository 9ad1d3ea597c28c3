"""The judge service's guards without a cluster: keys, bodies, JSON checks, health, isolation."""

from __future__ import annotations

import asyncio
import json

import pytest

from nemo_genrm.config import ConfigError, validate
from nemo_genrm.judges.base import Generation, JudgeRequest
from nemo_genrm.serve import MetricsStore, ServiceConfig, prometheus_text
from nemo_genrm.serve.guard import (
    EngineHealth,
    FairShare,
    RequestError,
    check_bearer,
    client_identity,
    decode_json,
    engine_gone,
    is_loopback,
    key_digest,
    load_api_key,
    read_body,
)

JUDGE = {"backend": "dtensor", "model_name": "m", "max_model_len": 256, "sampling": {"max_new_tokens": 6}}


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),  # all of 127.0.0.0/8
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),  # every interface
        ("::", False),
        ("10.0.0.7", False),
        ("judge.internal", False),  # a name may resolve anywhere
    ],
)
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_exposed_host_without_a_key_is_one_config_error_with_every_problem():
    with pytest.raises(ConfigError) as info:
        validate(
            ServiceConfig,
            {
                "judge": {**JUDGE, "dtensor": {"tensor_parallel_size": 2}},
                "serve": {"host": "0.0.0.0", "engine_in_replica": True},
            },
        )
    text = str(info.value)
    assert "api_key_env" in text and "engine_in_replica" in text
    with pytest.raises(ConfigError, match="keep one"):
        validate(ServiceConfig, {"judge": JUDGE, "serve": {"api_key_env": "A", "api_key_file": "f"}})
    with pytest.raises(ConfigError, match="require_api_key is true"):
        validate(ServiceConfig, {"judge": JUDGE, "serve": {"require_api_key": True}})


def test_load_api_key_from_env_or_file(monkeypatch, tmp_path):
    monkeypatch.setenv("SVC_KEY", "  k-from-env \n")
    assert load_api_key("SVC_KEY", None) == "k-from-env"
    monkeypatch.delenv("SVC_KEY")
    with pytest.raises(ValueError, match="SVC_KEY"):
        load_api_key("SVC_KEY", None)
    key_file = tmp_path / "key"
    key_file.write_text("k-from-file\nignored\n")
    assert load_api_key(None, str(key_file)) == "k-from-file"
    key_file.write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        load_api_key(None, str(key_file))
    with pytest.raises(ValueError, match="cannot be read"):
        load_api_key(None, str(tmp_path / "absent"))
    assert load_api_key(None, None) is None


def test_check_bearer():
    digest = key_digest("s3cret")
    assert check_bearer("Bearer s3cret", digest)
    assert check_bearer("bearer  s3cret ", digest)  # scheme case and spaces as RFC 6750 allows
    for header in (None, "", "Bearer", "Bearer s3cre", "Bearer s3cret2", "Basic s3cret", "s3cret"):
        assert not check_bearer(header, digest), header
    assert check_bearer(None, None)  # no key configured: open


async def _chunks(*parts: bytes, pause_s: float = 0.0):
    for part in parts:
        await asyncio.sleep(pause_s)
        yield part


def test_read_body_limits_size_and_time():
    run = asyncio.run
    assert run(read_body(_chunks(b"ab", b"cd"), "4", 10, 1.0)) == b"abcd"
    for stream, length in ((_chunks(b"x" * 11), "11"), (_chunks(b"x" * 6, b"x" * 6), None)):
        with pytest.raises(RequestError) as info:  # declared too large, or found so while reading
            run(read_body(stream, length, 10, 1.0))
        assert (info.value.status, info.value.code) == (413, "body_too_large")
    with pytest.raises(RequestError) as info:
        run(read_body(_chunks(b"a", b"b", pause_s=0.3), None, 10, 0.4))
    assert (info.value.status, info.value.code) == (408, "body_timeout")
    with pytest.raises(RequestError) as info:
        run(read_body(_chunks(b"a"), "ten", 10, 1.0))
    assert info.value.status == 400


@pytest.mark.parametrize(
    "raw, code",
    [
        (b'{"content": "a\\u0000b"}', "invalid_text"),  # escaped NUL
        (b'{"content": "a\\ud800b"}', "invalid_text"),  # lone high surrogate
        (b'{"content": "\\udc00"}', "invalid_text"),  # lone low surrogate
        (b'{"a\\u0000": 1}', "invalid_text"),  # in a key
        (b"[" * 9 + b"]" * 9, "invalid_json"),  # past max_depth 8
        (b"[" * 50_000 + b"]" * 50_000, "invalid_json"),  # past the parser's own recursion limit
        (b'{"content": "\xff"}', "invalid_json"),  # not UTF-8
        (b"{", "invalid_json"),
    ],
)
def test_decode_json_refuses_what_the_engine_cannot_take(raw, code):
    with pytest.raises(RequestError) as info:
        decode_json(raw, max_depth=8)
    assert (info.value.status, info.value.code) == (400, code)


def test_decode_json_accepts_ordinary_text():
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "é 😀 \\u2028 ok"}]}]}
    assert decode_json(json.dumps(body).encode(), max_depth=8) == body
    assert decode_json(b"[" * 8 + b"]" * 8, max_depth=8) == [[[[[[[[]]]]]]]]  # exactly at the limit


def test_engine_health_states():
    health = EngineHealth(probe_interval_s=60.0, dead_after=3)
    assert health.needs_probe()
    health.record(True)
    assert health.report("m") == (200, {"status": "ready", "model": "m"})
    assert not health.needs_probe()
    health.record(False, "every sample failed (judge_error)")
    assert health.report("m") == (
        200,
        {"status": "degraded", "model": "m", "reason": "every sample failed (judge_error)"},
    )
    health.record(False, "x")
    health.record(False, "engine raised RuntimeError")
    assert health.report("m")[0] == 503 and health.state == "dead"
    health.record(True)  # a success brings it back
    assert health.state == "ready"
    health.mark_dead("engine raised ActorDiedError")
    assert health.report("m") == (503, {"status": "dead", "model": "m", "reason": "engine raised ActorDiedError"})


def test_rejections_are_counted_and_exported():
    store = MetricsStore()
    store.record(True, 0.1, 5, 1)
    store.record(False, 0.0, 0, 0, "unauthorized")
    store.record(False, 0.0, 0, 0, "unauthorized")
    store.record(False, 0.0, 0, 0, "body_too_large")
    snap = store.snapshot()
    assert (snap["requests"], snap["errors"], snap["rejected"]) == (4, 3, 3)
    assert snap["rejected_by_code"] == {"unauthorized": 2, "body_too_large": 1}
    text = prometheus_text(snap)
    assert 'genrm_serve_rejected_total{code="unauthorized"} 2' in text
    assert 'genrm_serve_rejected_total{code="body_too_large"} 1' in text
    assert "genrm_serve_replica_open_requests" not in text  # the store alone knows no replica


def test_the_answering_replicas_open_requests_are_exported_as_gauges():
    snap = {**MetricsStore().snapshot(), "replica": {"id": "r1", "open_requests": 7, "open_clients": 2}}
    text = prometheus_text(snap)
    assert "# TYPE genrm_serve_replica_open_requests gauge" in text
    assert 'genrm_serve_replica_open_requests{replica="r1"} 7' in text
    assert 'genrm_serve_replica_open_clients{replica="r1"} 2' in text


def test_fair_share_counts_what_every_client_holds():
    share = FairShare(capacity=4, floor=1)
    assert [share.enter("a"), share.enter("a"), share.enter("b")] == [True, True, True]
    assert (share.holding, len(share.open)) == (3, 2)
    share.leave("a")
    share.leave("b")
    assert (share.holding, len(share.open)) == (1, 1)


class _Replica:
    """The deployment's batch isolation (taken from the class behind Ray Serve's wrapper),
    on an object holding only what it uses."""

    def __init__(self):
        from nemo_genrm.serve.app import JudgeDeployment

        self.health_state = EngineHealth()
        self._run_isolated = JudgeDeployment.func_or_class._isolated

    async def _isolated(self, run, requests, failed):
        return await self._run_isolated(self, run, requests, failed)


def test_a_batch_that_raises_is_rerun_request_by_request():
    # The engine raises on any batch holding the poisoned prompt; the others still get answers.
    def engine(requests: list[JudgeRequest]) -> list[Generation]:
        if any(r.messages[0]["content"] == "poison" for r in requests):
            raise ValueError("tokenizer cannot encode this")
        return [Generation(text="1") for _ in requests]

    texts = ["a", "poison", "b", "c"]
    requests = [JudgeRequest(messages=({"role": "user", "content": t},)) for t in texts]
    failed = Generation(text=None, error="engine_error")
    replica = _Replica()
    out = asyncio.run(replica._isolated(engine, requests, failed))
    assert [g.text for g in out] == ["1", None, "1", "1"]
    assert out[1].error == "engine_error"
    with pytest.raises(ValueError):  # alone, the request's own failure is its 500
        asyncio.run(replica._isolated(engine, requests[1:2], failed))
    assert replica.health_state.state == "degraded"


def test_a_batch_that_cannot_reach_the_engine_makes_it_dead_at_once():
    # A refused connection (or a dead worker) is not one bad request: /health says dead now,
    # not after three failed batches and a probe interval.
    def unreachable(requests: list[JudgeRequest]) -> list[Generation]:
        raise ConnectionRefusedError("engine gone")

    requests = [JudgeRequest(messages=({"role": "user", "content": t},)) for t in "ab"]
    replica = _Replica()
    with pytest.raises(ConnectionRefusedError):
        asyncio.run(replica._isolated(unreachable, requests, Generation(text=None, error="engine_error")))
    assert replica.health_state.state == "dead"


def test_an_engine_that_raises_on_every_request_alone_is_dead():
    def broken(requests: list[JudgeRequest]) -> list[Generation]:
        raise RuntimeError("CUDA error: device-side assert")

    requests = [JudgeRequest(messages=({"role": "user", "content": t},)) for t in "abc"]
    replica = _Replica()
    out = asyncio.run(replica._isolated(broken, requests, Generation(text=None, error="engine_error")))
    assert [g.error for g in out] == ["engine_error"] * 3
    assert replica.health_state.state == "dead"


def test_engine_gone_tells_a_dead_engine_from_a_bad_request():
    from ray.exceptions import ActorDiedError

    from nemo_genrm.errors import JudgeUnavailableError

    assert engine_gone(ConnectionRefusedError()) and engine_gone(ActorDiedError())
    assert engine_gone(JudgeUnavailableError("no replica", 5.0))
    assert not engine_gone(ValueError("cannot encode this prompt"))
    assert engine_gone(errors=["http_connect", "http_connect"])
    assert not engine_gone(errors=["http_connect", "http_timeout"]) and not engine_gone(errors=[])


def test_clients_are_told_apart_by_key_and_address_and_the_key_is_never_kept():
    alice, bob = client_identity("Bearer k1", "10.0.0.1"), client_identity("Bearer k1", "10.0.0.2")
    assert alice != bob and "k1" not in alice and key_digest("k1") in alice  # one key, two machines
    assert client_identity("Bearer k2", "10.0.0.1") != alice
    assert client_identity(None, "10.0.0.9") == "no-key|host:10.0.0.9"


def test_a_client_alone_may_use_the_whole_replica_and_shares_it_as_others_come():
    share = FairShare(capacity=12, floor=2)
    alice, bob, carol = "a", "b", "c"
    assert all(share.enter(alice) for _ in range(12)) and not share.enter(alice)  # alone: all 12
    assert share.enter(bob) and share.enter(bob)  # the floor, however full the replica is
    assert share.share(bob) == 6 and share.enter(bob)  # two clients: half each
    for _ in range(7):
        share.leave(alice)
    assert share.open[alice] == 5 and share.enter(carol)  # a newcomer is let in at once
    assert share.share(carol) == 4 and share.open[bob] == 3  # three clients: a third each
    assert not share.enter(alice) and share.enter(bob)  # alice is past her third, bob is not
    for who, count in list(share.open.items()):
        for _ in range(count):
            share.leave(who)
    assert share.open == {}


def test_engine_slots_cannot_exceed_open_requests():
    with pytest.raises(ConfigError, match="max_open_requests"):
        validate(ServiceConfig, {"judge": JUDGE, "serve": {"max_ongoing_requests": 8, "max_open_requests": 4}})
    assert ServiceConfig(judge=JUDGE).serve.body_timeout_s == 10.0  # a slow body is cut after 10 s
