"""The judge service (Ray Serve) with the dtensor engine, called through HttpJudge and raw HTTP.

Two services share one Serve proxy on a free 127.0.0.1 port: a tiny random model (compared with
the same model run in process) and a fixed-verdict judge that always answers "1", which also
requires an API key and has small body limits (the attack tests use it). They start together
once for the module; start-up dominates the module's time.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from nemo_genrm.config import ConfigError, JudgeConfig, validate
from nemo_genrm.judges.http import HttpJudge
from nemo_genrm.testing.slow_client import trickled_head

PROMPTS = [
    "Is 2 + 2 = 4? Answer 1 or 0.",
    "The reference is 7; the answer is 8.",
    "hello",
    "Question: capital of France? Reference: Paris. Answer: Paris",
    "Compare 0.5 and 1/2.",
    "x",
]
KEY_ENV = "GENRM_TEST_SERVICE_KEY"
KEY = "svc-key-7d1f0c9e2b"
AUTH = {"Authorization": f"Bearer {KEY}"}
MAX_BODY = 64 * 1024
ENGINE_SLOTS = 4  # the fixed service's engine slots per replica
PER_CLIENT = 8  # the open requests a client (key and address) may always hold
OPEN = 64  # the open requests one replica holds, shared among its clients
HEADER_TIMEOUT_S = 2.0  # both services' (one edge serves their port)
# The fixed service's. Tests hold up to 44 slow bodies at once and must finish their checks
# before the first of them times out: on a loaded 2-core machine that took over 2 s.
BODY_TIMEOUT_S = 6.0
JUDGE = {
    "backend": "dtensor",
    "precision": "float32",
    "max_model_len": 256,
    "sampling": {"max_new_tokens": 6},
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _service(model_path: str, name: str, port: int) -> dict[str, Any]:
    return {
        "judge": {**JUDGE, "model_name": model_path},
        "serve": {
            "port": port,
            "app_name": f"genrm-test-{name}",
            "route_prefix": f"/{name}",
            "served_model_name": f"{name}-judge",
            "max_batch_size": 8,
            "batch_wait_timeout_s": 0.05,
            "num_cpus_per_replica": 1,
            "startup_timeout_s": 300,
            "header_timeout_s": HEADER_TIMEOUT_S,
        },
    }


@pytest.fixture(scope="module")
def services(ray_cluster, tiny_cache_dir):
    """Both services, started concurrently; yields {name: (config dict, base url)}."""
    from nemo_genrm.serve import start_judge_service, stop_judge_service, wait_until_healthy
    from nemo_genrm.testing import cached_tiny_judge, cached_tiny_model

    port = _free_port()
    configs = {
        "random": _service(str(cached_tiny_model()), "random", port),
        "fixed": _service(str(cached_tiny_judge("1")), "fixed", port),
    }
    configs["fixed"]["serve"].update(
        api_key_env=KEY_ENV,
        max_body_bytes=MAX_BODY,
        body_timeout_s=BODY_TIMEOUT_S,
        max_json_depth=16,
        max_ongoing_requests=ENGINE_SLOTS,
        max_requests_per_key=PER_CLIENT,
        max_open_requests=OPEN,
    )
    os.environ[KEY_ENV] = KEY  # read by start_judge_service on this (driver) process only
    urls = {}
    try:
        for name, cfg in configs.items():
            urls[name] = start_judge_service(cfg, wait=False)
        for url in urls.values():
            wait_until_healthy(url, timeout_s=300)
        yield {name: (configs[name], urls[name]) for name in configs}
    finally:
        for cfg in configs.values():
            stop_judge_service(cfg["serve"]["app_name"])
        os.environ.pop(KEY_ENV, None)


def _http_judge(service: tuple[dict, str], **overrides: Any) -> HttpJudge:
    cfg, url = service
    judge = {
        **cfg["judge"],
        "backend": "http",
        "model_name": cfg["serve"]["served_model_name"],
        "tokenizer": None,
        "http": {
            "base_url": url,
            "max_concurrency": 8,
            "timeout_s": 60,
            "max_retries": 1,
            "api_key_env": cfg["serve"].get("api_key_env"),
        },
        **overrides,
    }
    return HttpJudge(JudgeConfig(**judge))


def _batch() -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": text}] for text in PROMPTS]


def _pick_labels(tops: list[dict[str, float]], tokenizer) -> list[str]:
    """Two labels that both engines score the same way: plain one-token words (no leading
    space, no other top token stripping to them), the two seen in the most top-20 lists."""
    seen: Counter[str] = Counter()
    for top in tops:
        stripped = Counter(token.strip() for token in top)
        for token in top:
            one_token = len(tokenizer.encode(token, add_special_tokens=False)) == 1
            if token.isalpha() and token == token.strip() and stripped[token] == 1 and one_token:
                seen[token] += 1
    labels = [label for label, _ in seen.most_common(2)]
    if len(labels) < 2:
        raise AssertionError(f"the tiny model has no two plain one-token words in its top 20: {tops}")
    return labels


def test_http_engine_matches_in_process_engine(services):
    from nemo_genrm.judges.transformers import LocalTransformersJudge

    cfg, _ = services["random"]
    local = LocalTransformersJudge(JudgeConfig.model_validate(cfg["judge"]))
    try:
        texts = [g.text for g in local.generate(_batch())]
        tops = local.top_logprobs(_batch(), 20)
        labels = _pick_labels(tops, local.tokenizer)
        expected = local.score(_batch(), labels)
    finally:
        local.shutdown()
    with _http_judge(services["random"]) as judge:
        remote_texts = [g.text for g in judge.generate(_batch())]
        remote_tops = judge.top_logprobs(_batch(), 20)
        remote = judge.score(_batch(), labels)
    assert remote_texts == texts
    for mine, theirs in zip(remote_tops, tops, strict=True):
        assert mine is not None and set(mine) == set(theirs)
        assert all(mine[t] == pytest.approx(theirs[t], abs=1e-4) for t in mine)
    checked = 0
    for top, want, got in zip(tops, expected, remote, strict=True):
        present = [label for label in labels if label in top]
        if len(present) == 2:  # both in the top 20: the same renormalised probabilities
            assert got.probs == pytest.approx(want.probs, abs=1e-4)
            checked += 1
        elif present:  # the other label is outside the top 20: probability 0 (documented)
            assert got.probs == pytest.approx({present[0]: 1.0, **{lab: 0.0 for lab in labels if lab not in present}})
        else:
            assert (got.probs, got.error) == (None, "labels_not_in_top_logprobs")
    assert checked >= 1


def test_fixed_verdict_judge_through_http(services):
    with _http_judge(services["fixed"]) as judge:
        texts = [g.text for g in judge.generate(_batch())]
        scores = judge.score(_batch(), ["1", "0"])
    assert texts == ["1"] * len(PROMPTS)
    for score in scores:
        assert score.error is None
        assert score.probs is not None and score.probs["1"] > 0.999 and score.probs["0"] < 1e-3


def _metrics(url: str) -> dict[str, Any]:
    return httpx.get(url.removesuffix("/v1") + "/metrics", params={"format": "json"}, headers=AUTH).json()


def test_health_models_metrics_and_batching(services):
    _, url = services["fixed"]
    root = url.removesuffix("/v1")
    assert httpx.get(root + "/health").json() == {
        "status": "ready",
        "model": "fixed-judge",
        "replicas": {"target": 1, "running": 1},
    }
    models = httpx.get(url + "/models", headers=AUTH).json()
    assert [m["id"] for m in models["data"]] == ["fixed-judge"]
    before = _metrics(url)
    with _http_judge(services["fixed"]) as judge:
        judge.generate(_batch() + _batch())  # 12 concurrent requests, up to 8 in flight
    after = _metrics(url)
    assert after["requests"] - before["requests"] == 12
    assert after["errors"] == before["errors"]
    assert after["completion_tokens"] > before["completion_tokens"]
    assert after["prompt_tokens"] > before["prompt_tokens"]
    assert after["max_batch_size"] >= 2  # concurrent requests were merged into one engine call
    assert 0.0 < after["latency_p50_s"] <= after["latency_p95_s"]
    text = httpx.get(root + "/metrics", headers=AUTH).text
    assert f"genrm_serve_requests_total {after['requests']}" in text


def test_openai_shapes_and_request_rules(services):
    _, url = services["fixed"]
    chat = url + "/chat/completions"
    messages = [{"role": "user", "content": "Is it right?"}]
    long_messages = [{"role": "user", "content": "word " * 400}]  # over max_model_len 256
    before = _metrics(url)

    ok = httpx.post(chat, headers=AUTH, json={"model": "fixed-judge", "messages": messages}).json()
    assert ok["choices"][0]["message"] == {"role": "assistant", "content": "1"}
    assert ok["choices"][0]["finish_reason"] == "stop"
    usage = ok["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] and usage["prompt_tokens"] > 0

    lp = httpx.post(
        chat, headers=AUTH, json={"messages": messages, "logprobs": True, "top_logprobs": 3, "max_tokens": 1}
    ).json()
    entry = lp["choices"][0]["logprobs"]["content"][0]
    assert entry["token"] == "1" and len(entry["top_logprobs"]) == 3
    assert entry["top_logprobs"][0] == {"token": "1", "logprob": entry["logprob"], "bytes": [49]}
    # Counted with the judge's tokenizer: the same prompt, the same count as the engine's.
    assert lp["usage"]["prompt_tokens"] == usage["prompt_tokens"]

    rejected = {
        "n": ({"n": 2}, 400, "unsupported"),
        "temperature": ({"temperature": 0.7}, 400, "sampling_mismatch"),
        "max_tokens": ({"max_tokens": 2}, 400, "sampling_mismatch"),
        "logprobs": ({"logprobs": True, "max_tokens": 5}, 400, "unsupported"),
        "model": ({"model": "other"}, 404, "model_not_found"),
        "messages": ({"messages": []}, 400, "invalid_request"),
        "too long": ({"messages": long_messages}, 400, "prompt_too_long"),
        "too long, logprobs": (
            {"messages": long_messages, "logprobs": True, "max_tokens": 1},
            400,
            "prompt_too_long",
        ),
    }
    for name, (fields, status, code) in rejected.items():
        response = httpx.post(chat, headers=AUTH, json={"messages": messages, **fields})
        assert response.status_code == status, name
        assert response.json()["error"]["code"] == code, name
    # The same engine settings restated are fine.
    same = httpx.post(chat, headers=AUTH, json={"messages": messages, "temperature": 0.0, "seed": 0, "max_tokens": 6})
    assert same.status_code == 200

    with _http_judge(services["fixed"]) as judge:  # the client maps the length error back
        out = judge.generate([long_messages])
        scored = judge.score([long_messages], ["1", "0"])
    assert (out[0].text, out[0].error) == (None, "prompt_too_long")
    assert (scored[0].probs, scored[0].error) == (None, "prompt_too_long")
    after = _metrics(url)
    assert after["requests"] - before["requests"] == 2 + len(rejected) + 1 + 2
    assert after["errors"] - before["errors"] == len(rejected) + 2
    # Refused by the request rules before the engine: all but the two too-long prompts.
    assert after["rejected"] - before["rejected"] == len(rejected) - 2


def test_a_second_proxy_port_on_one_cluster_is_refused(services):
    from ray.serve.context import _get_global_client

    from nemo_genrm.serve import start_judge_service

    cfg, _ = services["fixed"]
    proxy_port = _get_global_client().http_config.port
    serve = {**cfg["serve"], "proxy_port": proxy_port + 1, "app_name": "genrm-test-other"}
    with pytest.raises(ConfigError, match="already listens"):
        start_judge_service({**cfg, "serve": serve})


def _machine_address() -> str | None:
    """This machine's address on its network (not loopback), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: the route picks the address
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_slow_headers_are_cut_and_ray_serves_own_routes_stay_off_the_network(services):
    # Real sockets that send their request line and headers a piece at a time, never whole.
    from ray.serve.context import _get_global_client

    cfg, url = services["fixed"]
    port = cfg["serve"]["port"]

    async def slow_heads(n: int) -> tuple[list[bytes], float]:
        # A header every 0.25 s, each in time, the whole head never (10 s unless cut).
        head = "POST /fixed/v1/chat/completions HTTP/1.1"
        start = time.monotonic()
        replies = await asyncio.gather(*(trickled_head(port, head, every_s=0.25) for _ in range(n)))
        return replies, time.monotonic() - start

    replies, took = asyncio.run(slow_heads(50))
    assert all(r.startswith(b"HTTP/1.1 408") for r in replies), replies[0][:200]
    assert took < HEADER_TIMEOUT_S + 5, took  # closed at the timeout, not left open
    for route in ("/-/routes", "/-/healthz", "/%2D/routes"):
        assert httpx.get(f"http://127.0.0.1:{port}{route}").status_code == 404, route
    # They are Ray Serve's, on its proxy's own port, which listens on loopback alone.
    proxy = _get_global_client().http_config
    assert proxy.host == "127.0.0.1" and httpx.get(f"http://127.0.0.1:{proxy.port}/-/routes").status_code == 200
    if (address := _machine_address()) is not None:
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://{address}:{proxy.port}/-/routes", timeout=5)
    assert (
        httpx.post(
            url + "/chat/completions", headers=AUTH, json={"messages": [{"role": "user", "content": "still served?"}]}
        ).status_code
        == 200
    )


def test_service_config_rules():
    from nemo_genrm.serve import ServiceConfig

    judge = {**JUDGE, "model_name": "m"}
    assert ServiceConfig(judge=judge).in_replica  # dtensor, TP 1: inside the replica
    tp2 = {**judge, "dtensor": {"tensor_parallel_size": 2}}
    assert not ServiceConfig(judge=tp2).in_replica
    with pytest.raises(ConfigError, match="engine_in_replica"):
        validate(ServiceConfig, {"judge": tp2, "serve": {"engine_in_replica": True}})
    with pytest.raises(ConfigError, match="route_prefix"):
        validate(ServiceConfig, {"judge": judge, "serve": {"route_prefix": "judge"}})


# ------------------------------------------------------------------ attacks on the service
def test_api_key_is_required_where_set(services):
    _, url = services["fixed"]
    chat, root = url + "/chat/completions", url.removesuffix("/v1")
    body = {"messages": [{"role": "user", "content": "Is it right?"}]}
    before = _metrics(url)
    for headers in (
        {},
        {"Authorization": "Bearer wrong-key"},
        {"Authorization": KEY},
        {"Authorization": f"Basic {KEY}"},
    ):
        response = httpx.post(chat, json=body, headers=headers)
        assert response.status_code == 401, headers
        assert response.json()["error"]["code"] == "unauthorized"
        assert response.headers["www-authenticate"] == "Bearer"
    assert httpx.get(url + "/models").status_code == 401
    assert httpx.get(root + "/metrics").status_code == 401
    assert httpx.get(root + "/health").status_code == 200  # open, for load balancers
    assert httpx.post(chat, json=body, headers=AUTH).status_code == 200
    after = _metrics(url)
    assert after["rejected_by_code"].get("unauthorized", 0) - before["rejected_by_code"].get("unauthorized", 0) == 6


def _bad_bodies() -> dict[str, tuple[bytes, int, str]]:
    """Raw bodies that cannot be served -> (body, status, error code)."""
    nested = b'{"messages": [{"role": "user", "content": "x", "extra": ' + b"[" * 40 + b"]" * 40 + b"}]}"
    return {
        "NUL": (b'{"messages": [{"role": "user", "content": "a\\u0000b"}]}', 400, "invalid_text"),
        "lone surrogate": (b'{"messages": [{"role": "user", "content": "a\\ud800b"}]}', 400, "invalid_text"),
        "nested": (nested, 400, "invalid_json"),
        "very nested": (b"[" * 200_000 + b"]" * 200_000, 413, "body_too_large"),
        "deep under the limit": (b"[" * 20_000 + b"]" * 20_000, 400, "invalid_json"),
        "not UTF-8": (b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 400, "invalid_json"),
        "not JSON": (b'{"messages": [', 400, "invalid_json"),
        "unknown role": (b'{"messages": [{"role": "tool", "content": "x"}]}', 400, "invalid_request"),
        "too large": (
            b'{"messages": [{"role": "user", "content": "' + b"a" * (MAX_BODY + 10) + b'"}]}',
            413,
            "body_too_large",
        ),
    }


def test_bad_requests_are_rejected_alone_and_good_ones_batched_with_them_succeed(services):
    _, url = services["fixed"]
    chat = url + "/chat/completions"
    bad = _bad_bodies()
    good = [{"messages": [{"role": "user", "content": f"question {i}"}]} for i in range(24)]
    before = _metrics(url)

    async def fire() -> tuple[list[httpx.Response], list[httpx.Response]]:
        async with httpx.AsyncClient(headers=AUTH, timeout=60) as client:
            headers = {"Content-Type": "application/json"}
            bad_calls = [client.post(chat, content=body, headers=headers) for body, _, _ in bad.values()]
            good_calls = [client.post(chat, json=body) for body in good]
            # Interleaved, all in flight together: the good ones share engine batches.
            responses = await asyncio.gather(*bad_calls, *good_calls)
        return responses[: len(bad_calls)], responses[len(bad_calls) :]

    bad_responses, good_responses = asyncio.run(fire())
    for (name, (_, status, code)), response in zip(bad.items(), bad_responses, strict=True):
        assert response.status_code == status, (name, response.text[:300])
        assert response.json()["error"]["code"] == code, name
    assert [r.status_code for r in good_responses] == [200] * len(good)
    assert all(r.json()["choices"][0]["message"]["content"] == "1" for r in good_responses)
    after = _metrics(url)
    assert after["rejected"] - before["rejected"] == len(bad)
    assert after["max_batch_size"] >= 2
    assert httpx.get(url.removesuffix("/v1") + "/health").json()["status"] == "ready"


def test_slow_body_gets_408(services):
    _, url = services["fixed"]

    def trickle():
        yield b'{"messages": [{"role": "user", '
        time.sleep(BODY_TIMEOUT_S + 1.0)  # past the service's body_timeout_s
        yield b'"content": "x"}]}'

    start = time.monotonic()
    response = httpx.post(url + "/chat/completions", content=trickle(), headers=AUTH, timeout=30)
    assert response.status_code == 408, response.text[:300]
    assert response.json()["error"]["code"] == "body_timeout"
    assert time.monotonic() - start < BODY_TIMEOUT_S + 5


def test_exposed_service_needs_a_key():
    from nemo_genrm.serve import ServiceConfig

    judge = {**JUDGE, "model_name": "m"}
    with pytest.raises(ConfigError, match="serve.api_key_env"):
        validate(ServiceConfig, {"judge": judge, "serve": {"host": "0.0.0.0"}})
    assert validate(ServiceConfig, {"judge": judge, "serve": {"host": "0.0.0.0", "api_key_env": "K"}}).api_key_required
    open_cfg = {"host": "0.0.0.0", "require_api_key": False}
    assert not validate(ServiceConfig, {"judge": judge, "serve": open_cfg}).api_key_required
    assert not validate(ServiceConfig, {"judge": judge}).api_key_required  # 127.0.0.1


def test_huge_body_is_refused_without_stalling_small_requests(services):
    _, url = services["fixed"]
    chat = url + "/chat/completions"
    huge = b'{"messages": [{"role": "user", "content": "' + b"a" * (20 * 1024 * 1024) + b'"}]}'
    small = {"messages": [{"role": "user", "content": "quick?"}]}

    async def fire() -> tuple[httpx.Response, list[tuple[int, float]]]:
        async with httpx.AsyncClient(headers=AUTH, timeout=60) as client:

            async def timed() -> tuple[int, float]:
                start = time.monotonic()
                response = await client.post(chat, json=small)
                return response.status_code, time.monotonic() - start

            big = asyncio.ensure_future(client.post(chat, content=huge, headers={"Content-Type": "application/json"}))
            await asyncio.sleep(0.05)
            smalls = await asyncio.gather(*(timed() for _ in range(4)))
            return await big, smalls

    big, smalls = asyncio.run(fire())
    assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large"
    assert [status for status, _ in smalls] == [200] * 4
    assert max(latency for _, latency in smalls) < 5.0, smalls


def test_the_api_description_is_behind_the_key(services):
    _, url = services["fixed"]
    root = url.removesuffix("/v1")
    for route in ("/openapi.json", "/docs", "/redoc"):
        assert httpx.get(root + route).status_code == 401, route
        assert httpx.get(root + route, headers=AUTH).status_code == 200, route
    paths = httpx.get(root + "/openapi.json", headers=AUTH).json()["paths"]
    assert "/v1/chat/completions" in paths and "/docs" not in paths
    _, open_url = services["random"]  # a service without a key shows it to anyone
    assert httpx.get(open_url.removesuffix("/v1") + "/openapi.json").status_code == 200


async def _open_slow_bodies(
    url: str, n: int, source: str = "127.0.0.1"
) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """``n`` requests from address ``source`` whose headers and first body bytes are sent, the rest never."""
    parts = urlsplit(url)
    head = (
        f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n"
        '{"messages": '
    )
    before = await _open_on_replica(url)
    held = []
    for _ in range(n):
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port, local_addr=(source, 0))
        writer.write(head.encode())
        await writer.drain()
        held.append((reader, writer))
    await _open_on_replica(url, until=before + n)  # every one has reached the replica and been counted
    return held


async def _open_on_replica(url: str, until: int | None = None, timeout_s: float = 20.0) -> int:
    """The requests open on the service's one replica (its ``/metrics``), first waiting until
    they number ``until`` when given."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(headers=AUTH, timeout=10) as client:
        while True:
            snapshot = (await client.get(url.removesuffix("/v1") + "/metrics", params={"format": "json"})).json()
            held = snapshot["replica"]["open_requests"]
            if until is None or held == until:
                return held
            assert time.monotonic() < deadline, f"{held} requests open on the replica, not {until}"
            await asyncio.sleep(0.02)


async def _statuses(held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]], timeout_s: float) -> list[int]:
    """The status code each held request has got within ``timeout_s`` (0: none yet)."""

    async def status(reader: asyncio.StreamReader) -> int:
        try:  # a cancelled readline leaves what it read in the buffer
            line = await asyncio.wait_for(reader.readline(), timeout_s)
        except TimeoutError:
            return 0
        return int(line.split()[1]) if line else 0

    return list(await asyncio.gather(*(status(reader) for reader, _ in held)))


def _close(held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
    for _, writer in held:
        writer.close()


def test_slow_bodies_hold_no_engine_slot(services):
    # Three times the replica's engine slots are held by bodies that never finish. A whole
    # request is answered while they all still wait for their 408: a slow body holds no slot.
    _, url = services["fixed"]
    body = {"messages": [{"role": "user", "content": "Is it right?"}]}
    n = 3 * ENGINE_SLOTS

    async def run() -> tuple[httpx.Response, list[int], list[int]]:
        await _open_on_replica(url, until=0)  # the slow bodies of earlier tests are gone
        held = await _open_slow_bodies(url, n)
        try:
            async with httpx.AsyncClient(headers=AUTH, timeout=30) as client:
                response = await client.post(url + "/chat/completions", json=body)
            early = await _statuses(held, 0.05)
            waiting = [h for h, status in zip(held, early, strict=True) if status == 0]
            return response, early, await _statuses(waiting, BODY_TIMEOUT_S + 5)
        finally:
            _close(held)

    response, early, late = asyncio.run(run())
    assert response.status_code == 200
    assert early == [0] * n, "a slow body was answered before the whole request was"
    assert late == [408] * n


def test_one_slow_client_shuts_out_no_request_of_its_key(services):
    # The issue as met: one key, slow bodies from real sockets, and plain requests with the same
    # key from the same machine, more of them than the per-client floor. None gets a 429.
    _, url = services["fixed"]
    before = _metrics(url)
    slow, plain = 40, 20  # 60 of the replica's 64 open requests, one client

    async def run() -> tuple[list[int], list[int]]:
        await _open_on_replica(url, until=0)
        held = await _open_slow_bodies(url, slow)
        try:
            async with httpx.AsyncClient(headers=AUTH, timeout=30) as client:
                answers = await asyncio.gather(
                    *(
                        client.post(
                            url + "/chat/completions", json={"messages": [{"role": "user", "content": f"q{i}"}]}
                        )
                        for i in range(plain)
                    )
                )
            return [a.status_code for a in answers], await _statuses(held, BODY_TIMEOUT_S + 5)
        finally:
            _close(held)

    codes, statuses = asyncio.run(run())
    assert codes == [200] * plain
    assert statuses == [408] * slow
    after = _metrics(url)
    assert after["rejected_by_code"].get("too_many_requests", 0) == before["rejected_by_code"].get(
        "too_many_requests", 0
    )


def test_a_client_past_its_share_gets_429_and_another_machine_on_the_same_key_is_served(services):
    # Two machines share the service's one key (127.0.0.1 and 127.0.0.2). The first holds 40
    # slow bodies; once the second holds requests too, each may hold half of the 64: the first
    # gets a 429 at once, the second is served.
    _, url = services["fixed"]
    other = httpx.AsyncHTTPTransport(local_address="127.0.0.2")

    async def run() -> tuple[int, int, list[int]]:
        await _open_on_replica(url, until=0)
        first = await _open_slow_bodies(url, 40)  # all 40 counted before the second machine comes
        second = await _open_slow_bodies(url, 4, source="127.0.0.2")
        try:
            body = {"messages": [{"role": "user", "content": "x"}]}
            async with httpx.AsyncClient(headers=AUTH, timeout=30) as client:
                refused = await client.post(url + "/chat/completions", json=body)
            async with httpx.AsyncClient(headers=AUTH, timeout=30, transport=other) as client:
                served = await client.post(url + "/chat/completions", json=body)
            return refused.status_code, served.status_code, await _statuses(first + second, BODY_TIMEOUT_S + 5)
        finally:
            _close(first + second)

    refused, served, statuses = asyncio.run(run())
    assert (refused, served) == (429, 200)
    assert statuses == [408] * 44


# ---------------------------------------------------------------------------- stopping the CLI
STOPPED_WITHIN_S = 10.0  # every process of the service gone after its stop or kill


def _alive_of(procs: dict[int, float]) -> list[int]:
    """The processes of ``procs`` (pid -> create time) still running (not zombies)."""
    import psutil

    alive = []
    for pid, created in procs.items():
        try:
            proc = psutil.Process(pid)
            if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            continue
    return alive


def _as_a_shell_starts_it() -> None:
    """Default SIGINT and SIGTERM in the child, as a shell starts a command (a test session may
    have inherited them ignored, and an ignored signal stays ignored across exec)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv on the PATH")
@pytest.mark.parametrize("stop", ["SIGINT to the process group", "SIGTERM to the driver", "SIGKILL to uv"])
def test_the_service_cli_stopped_or_killed_leaves_no_process_and_no_traceback(stop, tiny_cache_dir, tmp_path):
    # As users start it: `uv run python -m nemo_genrm.serve ...`, with no terminal (a process
    # manager, `nohup`, CI). Stopped or killed by real pids, every process it started goes.
    import psutil

    from nemo_genrm.testing import cached_tiny_judge

    root = Path(__file__).resolve().parents[3]
    log = tmp_path / "service.log"
    command = [
        shutil.which("uv"),
        "run",
        "--project",
        str(root),
        "python",
        "-m",
        "nemo_genrm.serve",
        "--config",
        str(root / "examples" / "configs" / "serve_judge_tiny.yaml"),
        f"judge.model_name={cached_tiny_judge('1')}",
        f"serve.port={_free_port()}",
    ]
    # A cluster of its own, even where a `ray start` (or a simulated) cluster runs on the machine.
    env = {**os.environ, "RAY_ADDRESS": "local"}
    with log.open("w") as out:
        uv = subprocess.Popen(
            command,
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_as_a_shell_starts_it,
        )
    run: dict[int, float] = {}
    try:
        deadline = time.monotonic() + 300
        while "serving 'tiny-judge'" not in log.read_text():
            assert uv.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        run = {p.pid: p.create_time() for p in psutil.Process(uv.pid).children(recursive=True)}
        driver = next(p.pid for p in psutil.Process(uv.pid).children() if "nemo_genrm.serve" in " ".join(p.cmdline()))
        assert len(run) > 5, run  # uv's driver, Ray's GCS, raylet, agents, Serve's actors, the guard
        if stop == "SIGINT to the process group":  # Ctrl-C where there is no terminal
            os.killpg(uv.pid, signal.SIGINT)
        elif stop == "SIGTERM to the driver":
            os.kill(driver, signal.SIGTERM)
        else:
            os.kill(uv.pid, signal.SIGKILL)
        stopped = time.monotonic()
        while _alive_of(run) and time.monotonic() - stopped < STOPPED_WITHIN_S:
            time.sleep(0.1)
        left = {pid: psutil.Process(pid).name() for pid in _alive_of(run)}
        ignored = Path(f"/proc/{driver}/status").read_text().split("SigIgn:")[1].split()[0] if driver in left else ""
        assert not left, f"{stop}: still running {STOPPED_WITHIN_S:g} s later: {left} (driver SigIgn {ignored})"
        print(f"{stop}: every process of the service gone {time.monotonic() - stopped:.1f} s after")
        uv.wait(timeout=30)
        output = log.read_text()
        assert "Traceback" not in output, output[-3000:]
        if stop != "SIGKILL to uv":
            assert "stopping the judge service" in output and uv.returncode == 0, (uv.returncode, output[-2000:])
    finally:
        for pid in _alive_of(run):
            os.kill(pid, signal.SIGKILL)
        if uv.poll() is None:
            uv.kill()
            uv.wait(timeout=30)
