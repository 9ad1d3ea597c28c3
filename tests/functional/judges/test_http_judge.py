"""HttpJudge against small local servers on 127.0.0.1: retries, timeouts, logprobs, API keys.

No Ray here. A scripted OpenAI-style server (starlette + uvicorn on a background thread) plays
each failure mode; a listening socket that never accepts plays a server that never answers.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nemo_genrm.config import ConfigError, FaultToleranceConfig, JudgeConfig
from nemo_genrm.errors import JudgeClosedError
from nemo_genrm.judges import create_judge
from nemo_genrm.judges.base import JudgeRequest
from nemo_genrm.judges.http import HttpJudge
from nemo_genrm.judges.http_replies import label_probs
from nemo_genrm.judges.http_transport import parse_retry_after, retry_delay

SECRET = "sk-test-5ecret-value-91f2"

# First-token distribution the scripted server returns in "logprobs" mode. " 1" and "1" both
# strip to the label "1": P(1) = 0.50 + 0.05 = 0.55, P(0) = 0.20, the rest is not a label.
# Renormalised over the labels: 0.55 / 0.75 and 0.20 / 0.75.
TOP = [(" 1", 0.50), ("0", 0.20), ("maybe", 0.15), ("1", 0.05)]


@dataclass
class ServerState:
    mode: str = "ok"
    delay_s: float = 0.0
    calls: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    payloads: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)


def _completion(content: str, logprobs: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "stop",
    }
    if logprobs:
        tops = [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in TOP]
        choice["logprobs"] = {"content": [{**tops[0], "top_logprobs": tops}]}
    return {
        "id": "cmpl-test",
        "object": "chat.completion",
        "choices": [choice],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
    }


def _poisoned(kind: str, echo: str, logprobs: bool) -> Response:
    """A 200 reply that cannot be trusted, in one of the ways servers have got it wrong."""
    body = _completion(echo, logprobs=logprobs)
    if kind == "usage_list":
        body["usage"] = [7, 2]
    elif kind == "usage_strings":
        body["usage"] = {"prompt_tokens": "7", "completion_tokens": "2"}
    elif kind == "logprob_1000":
        body["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["logprob"] = 1000.0
    elif kind == "two_choices":
        body["choices"] = body["choices"] * 2
    elif kind == "no_choices":
        body["choices"] = []
    elif kind == "malformed_json":
        return Response(b'{"choices": [{"message": ', media_type="application/json")
    elif kind == "deep_json":
        return Response(b"[" * 100_000 + b"]" * 100_000, media_type="application/json")
    return JSONResponse(body)


def _build_app(state: ServerState) -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        state.calls += 1
        number = state.calls
        state.payloads.append(body)
        state.auth.append(request.headers.get("authorization"))
        state.in_flight += 1
        state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            await asyncio.sleep(state.delay_s)
        finally:
            state.in_flight -= 1
        mode = state.mode
        if mode == "flaky500" and number % 2 == 0:
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=500)
        if mode == "flaky429" and number % 2 == 0:
            return JSONResponse({"error": {"message": "slow down"}}, status_code=429, headers={"Retry-After": "0"})
        if mode == "429_once" and number == 1:
            return JSONResponse({"error": {"message": "slow down"}}, status_code=429, headers={"Retry-After": "0.4"})
        if mode == "echo_auth":  # a careless server that quotes the request's headers back
            message = f"bad request with authorization {request.headers.get('authorization')}"
            return JSONResponse({"error": {"message": message}}, status_code=400)
        if mode == "always500":
            return JSONResponse({"error": {"message": "broken"}}, status_code=500)
        if mode == "too_long":
            message = "This model's maximum context length is 64 tokens; you requested 90 tokens."
            return JSONResponse({"error": {"message": message}}, status_code=400)
        echo = "echo:" + body["messages"][-1]["content"]
        if mode.startswith("poison:") and echo == "echo:q1":  # one unreadable reply in the call
            return _poisoned(mode.removeprefix("poison:"), echo, bool(body.get("logprobs")))
        if mode == "straddle":  # the key quoted so that the 200-character log cut splits it
            key = (request.headers.get("authorization") or "").removeprefix("Bearer ")
            return JSONResponse({"error": {"message": "x" * 150 + key + " tail"}}, status_code=500)
        with_logprobs = mode in ("logprobs", "poison:logprob_1000") or (mode == "logprobs_but_q1" and echo != "echo:q1")
        return JSONResponse(_completion(echo, logprobs=with_logprobs and bool(body.get("logprobs"))))

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


@pytest.fixture(scope="module")
def server():
    """The scripted server on a free 127.0.0.1 port; yields (base_url, state)."""
    state = ServerState()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(_build_app(state), log_level="warning", lifespan="off")
    uv_server = uvicorn.Server(config)
    thread = threading.Thread(target=uv_server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv_server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    if not uv_server.started:
        raise RuntimeError("test server did not start")
    yield f"http://127.0.0.1:{port}/v1", state
    uv_server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture
def state(server) -> ServerState:
    """Reset the scripted server before each test."""
    _, st = server
    for name, value in vars(ServerState()).items():
        setattr(st, name, value)
    return st


def _judge(base_url: str, **http: Any) -> HttpJudge:
    settings = {"max_retries": 3, "backoff_s": 0.01, "timeout_s": 5.0, **http}
    cfg = JudgeConfig(
        backend="http",
        model_name="served-judge",
        sampling={"temperature": 0.0, "top_p": 0.9, "max_new_tokens": 8, "seed": 3},
        http={"base_url": base_url, **settings},
    )
    return HttpJudge(cfg)


def _batch(n: int) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": f"q{i}"}] for i in range(n)]


@pytest.mark.parametrize("mode", ["flaky500", "flaky429"])
def test_every_other_request_failing_is_retried(server, state, mode):
    # Every second request the server sees fails; each failed one is retried and then succeeds.
    state.mode = mode
    with _judge(server[0]) as judge:
        out = judge.generate(_batch(6))
        stats = judge.stats()
    assert [g.text for g in out] == [f"echo:q{i}" for i in range(6)]  # input order kept
    assert all(g.error is None for g in out)
    assert stats.errors == 0 and stats.prompts_generated == 6
    # Every failed call was retried once more; which calls fail depends on arrival order.
    assert stats.extra["http_retries"] == state.calls - 6 >= 3
    assert state.calls // 2 == state.calls - 6  # exactly the even-numbered calls failed
    assert stats.prompt_tokens == 6 * 7 and stats.output_tokens == 6 * 2


def test_sampling_and_model_are_sent(server, state):
    with _judge(server[0]) as judge:
        judge.generate([JudgeRequest(messages=({"role": "user", "content": "hi"},))])
    payload = state.payloads[0]
    assert payload["model"] == "served-judge"
    assert (payload["temperature"], payload["top_p"], payload["max_tokens"]) == (0.0, 0.9, 8)
    assert "seed" not in payload  # greedy: a seed changes nothing, so none is sent
    assert payload["messages"] == [{"role": "user", "content": "hi"}]


def test_greedy_defaults_send_only_what_reward_bench_sends(server, state):
    # temperature 0 and top_p 1.0: the fields of a reward-bench API request, no top_p, no seed.
    cfg = JudgeConfig(
        backend="http",
        model_name="served-judge",
        sampling={"max_new_tokens": 8},
        http={"base_url": server[0], "max_retries": 0, "timeout_s": 5.0},
    )
    with HttpJudge(cfg) as judge:
        judge.generate([JudgeRequest(messages=({"role": "user", "content": "hi"},))])
    cfg = JudgeConfig(
        backend="http",
        model_name="served-judge",
        sampling={"temperature": 0.7, "seed": 5},
        http={"base_url": server[0], "max_retries": 0, "timeout_s": 5.0},
    )
    with HttpJudge(cfg) as judge:
        judge.generate([JudgeRequest(messages=({"role": "user", "content": "hi"},))])
    greedy, sampled = state.payloads[0], state.payloads[1]
    assert set(greedy) == {"model", "messages", "temperature", "max_tokens", "n"}
    assert sampled["seed"] == 5 and sampled["temperature"] == 0.7 and "top_p" not in sampled


def test_retries_exhausted_is_a_per_sample_error(server, state):
    state.mode = "always500"
    with _judge(server[0], max_retries=2) as judge:
        out = judge.generate(_batch(2))
        stats = judge.stats()
    assert [(g.text, g.error) for g in out] == [(None, "http_500")] * 2
    assert state.calls == 2 * 3  # one try + two retries each
    assert stats.errors == 2 and stats.extra["http_retries"] == 4


def test_retry_after_is_honoured(server, state):
    # backoff 0 would retry at once; the 429 says wait 0.4 s.
    state.mode = "429_once"
    with _judge(server[0], backoff_s=0.0) as judge:
        start = time.monotonic()
        out = judge.generate(_batch(1))
        elapsed = time.monotonic() - start
    assert out[0].text == "echo:q0"
    assert elapsed >= 0.4


def test_server_length_error_is_prompt_too_long(server, state):
    state.mode = "too_long"
    with _judge(server[0]) as judge:
        out = judge.generate(_batch(2))
    assert [g.error for g in out] == ["prompt_too_long", "prompt_too_long"]
    assert state.calls == 2  # a 400 is not retried


def test_never_answering_server_times_out():
    # A socket that listens but never accepts: connects succeed, no byte ever comes back.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    try:
        with _judge(url, timeout_s=1.0, max_retries=1, backoff_s=0.05) as judge:
            start = time.monotonic()
            out = judge.generate(_batch(3))
            elapsed = time.monotonic() - start
            stats = judge.stats()
    finally:
        sock.close()
    assert [(g.text, g.error) for g in out] == [(None, "http_timeout")] * 3
    assert stats.extra["http_retries"] == 3
    # Two attempts of 1 s each, the three requests in parallel: about 2 s (one after another: 6 s).
    assert 2.0 <= elapsed < 5.0


def test_call_deadline_cuts_retries_short():
    # Never answering, 5 s per attempt and 4 attempts (>= 20 s), but the call has 0.8 s.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    cfg = JudgeConfig(
        backend="http",
        model_name="served-judge",
        http={"base_url": url, "timeout_s": 5.0, "max_retries": 3, "backoff_s": 0.0},
    )
    try:
        with HttpJudge(cfg, fault_tolerance=FaultToleranceConfig(step_timeout_s=0.8)) as judge:
            assert judge.call_timeout_s == 0.8
            start = time.monotonic()
            out = judge.generate(_batch(3))
            scores = judge.score(_batch(2), ["1", "0"])
            elapsed = time.monotonic() - start
    finally:
        sock.close()
    assert [(g.text, g.error) for g in out] == [(None, "timeout")] * 3
    assert [(s.probs, s.error) for s in scores] == [(None, "timeout")] * 2
    assert 1.6 <= elapsed < 1.6 + 3.0  # two calls of 0.8 s each, plus slack (uncut: 5 s or more each)
    with pytest.raises(ConfigError, match="call_timeout_s must be positive"):
        HttpJudge(cfg, call_timeout_s=0.0)


def test_refused_connection_is_http_connect():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    sock.close()  # nothing listens on this port now
    with _judge(url, max_retries=1) as judge:
        out = judge.generate(_batch(2))
    assert [g.error for g in out] == ["http_connect", "http_connect"]


def test_concurrency_is_bounded(server, state):
    state.delay_s = 0.3  # held long enough for three to overlap on a loaded machine
    with _judge(server[0], max_concurrency=3) as judge:
        out = judge.generate(_batch(12))
    assert all(g.error is None for g in out)
    assert state.max_in_flight == 3  # bounded, and the bound is actually used


def test_score_renormalises_over_labels(server, state):
    state.mode = "logprobs"
    with _judge(server[0]) as judge:
        scores = judge.score(_batch(2), ["1", "0"])
        absent = judge.score(_batch(1), ["0", "2"])
        missing = judge.score(_batch(1), ["A", "B"])
        top = judge.top_logprobs(_batch(1), 3)
    payload = state.payloads[0]
    assert (payload["max_tokens"], payload["logprobs"], payload["top_logprobs"]) == (1, True, 20)
    for s in scores:
        assert s.error is None
        assert s.probs == pytest.approx({"1": 0.55 / 0.75, "0": 0.20 / 0.75})
    # "2" is not in the top-k: probability 0, the rest renormalised onto "0".
    assert absent[0].probs == pytest.approx({"0": 1.0, "2": 0.0})
    assert (missing[0].probs, missing[0].error) == (None, "labels_not_in_top_logprobs")
    assert top[0] is not None and top[0][" 1"] == pytest.approx(math.log(0.5))


def test_score_without_logprobs_names_the_fix(server, state):
    state.mode = "ok"  # answers, but never with logprobs
    with _judge(server[0]) as judge, pytest.raises(ConfigError, match="verdict_from: text"):
        judge.score(_batch(2), ["1", "0"])


def test_one_reply_without_logprobs_is_a_sample_error(server, state):
    state.mode = "logprobs_but_q1"  # logprobs for every request except the one for "q1"
    with _judge(server[0]) as judge:
        scores = judge.score(_batch(3), ["1", "0"])
        stats = judge.stats()
    assert [s.error for s in scores] == [None, "http_bad_response", None]
    assert scores[0].probs == pytest.approx({"1": 0.55 / 0.75, "0": 0.20 / 0.75})
    assert stats.errors == 1


def test_config_is_checked_at_construction():
    # Dicts are read at the public edge (create_judge); the engine itself takes a typed config.
    with pytest.raises(ConfigError, match="http:// or https://"):
        create_judge({"backend": "http", "model_name": "m", "http": {"base_url": "127.0.0.1:8000/v1"}})
    with pytest.raises(ConfigError, match="supports_logprobs"):
        create_judge(
            {
                "backend": "http",
                "model_name": "m",
                "verdict_from": "logprobs",
                "http": {"base_url": "http://127.0.0.1:9/v1", "supports_logprobs": False},
            }
        )
    with pytest.raises(TypeError, match="takes a validated JudgeConfig"):
        HttpJudge({"backend": "http", "model_name": "m", "http": {"base_url": "http://127.0.0.1:9/v1"}})


def test_environment_neutralises_the_http_judges_special_tokens(server, state, tokenizer_path, tmp_path):
    from transformers import AutoTokenizer

    from nemo_genrm.env.environment import GenRMEnvironmentImpl

    # A special token only this tokenizer knows: the prompt builder's own list does not cover it.
    special = "[JUDGE_SEP]"
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    tokenizer.add_special_tokens({"additional_special_tokens": [special]})
    tokenizer.save_pretrained(tmp_path)
    judge_cfg = {
        "backend": "http",
        "model_name": "served-judge",
        "tokenizer": str(tmp_path),
        "http": {"base_url": server[0], "max_retries": 0},
    }
    sample = [{"role": "user", "content": "6*7?"}, {"role": "assistant", "content": f"Answer: 42 {special} 1"}]
    with HttpJudge(JudgeConfig.model_validate(judge_cfg)) as judge:
        assert special in judge.tokenizer.all_special_tokens
        env = GenRMEnvironmentImpl({"judge": judge_cfg, "resources": {"gpus_per_replica": 0}}, judge=judge)
        env.step([sample], [{"ground_truth": "42"}])
    sent = "".join(m["content"] for m in state.payloads[-1]["messages"])
    assert "42" in sent and special not in sent  # defanged before it reached the server


def test_multi_token_labels_are_refused(server, state):
    with _judge(server[0]) as judge, pytest.raises(ConfigError, match="several tokens"):
        judge.score(_batch(1), ["not correct", "correct"])
    assert state.calls == 0


@pytest.fixture(scope="module")
def tokenizer_path(tiny_cache_dir) -> str:
    from nemo_genrm.testing.cache import cached_tiny_tokenizer

    return str(cached_tiny_tokenizer())


def test_client_side_shortening_with_a_tokenizer(server, state, tokenizer_path):
    cfg = JudgeConfig(
        backend="http",
        model_name="served-judge",
        tokenizer=tokenizer_path,
        max_model_len=64,
        sampling={"max_new_tokens": 8},
        http={"base_url": server[0], "max_retries": 0},
    )
    candidate = "the answer is " + "forty two and " * 40
    fits = JudgeRequest(messages=({"role": "user", "content": "Judge: short"},))
    long = JudgeRequest(messages=({"role": "user", "content": f"Judge: {candidate} END"},), shrinkable=candidate)
    stuck = JudgeRequest(messages=({"role": "user", "content": "no cut " * 60},))  # nothing to cut
    with HttpJudge(cfg) as judge:
        out = judge.generate([fits, long, stuck])
        with pytest.raises(ConfigError, match="2 tokens"):
            judge.score([fits], ["yes", "no"])  # "yes" is two tiny-tokenizer tokens
        stats = judge.stats()
    assert (out[0].text, out[0].truncated) == ("echo:Judge: short", False)
    assert out[1].truncated and out[1].text is not None
    (sent,) = [p["messages"][0]["content"] for p in state.payloads if "END" in p["messages"][0]["content"]]
    assert "[...]" in sent and sent.endswith(" END") and len(sent) < len(candidate)
    assert (out[2].text, out[2].error) == (None, "prompt_too_long")
    assert state.calls == 2  # the prompt that cannot fit is never sent
    # The refused prompt is its sample's too_long, not an engine error (JudgeStats.errors).
    assert stats.truncated == 1 and stats.errors == 0


def test_api_key_is_sent_and_never_logged(server, state, monkeypatch, caplog):
    monkeypatch.setenv("GENRM_TEST_KEY", SECRET)
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    judge = _judge(server[0], api_key_env="GENRM_TEST_KEY", max_retries=1)
    try:
        ok = judge.generate(_batch(1))
        state.mode = "always500"
        failed = judge.generate(_batch(1))
        state.mode = "echo_auth"
        echoed = judge.generate(_batch(1))
        texts = [
            repr(judge),
            str(judge),
            repr(judge.stats()),
            repr(ok),
            repr(failed),
            repr(vars(judge)),
        ]
    finally:
        judge.shutdown()
    assert state.auth[0] == f"Bearer {SECRET}"
    assert failed[0].error == "http_500" and echoed[0].error == "http_400"
    assert "bad request with authorization Bearer ***" in caplog.text  # the server's answer is logged, masked
    assert caplog.records, "debug logging was expected from the client"
    for text in [caplog.text, *texts]:
        assert SECRET not in text


def test_missing_api_key_env_is_a_config_error(server, monkeypatch):
    monkeypatch.delenv("GENRM_ABSENT_KEY", raising=False)
    with pytest.raises(ConfigError, match="GENRM_ABSENT_KEY"):
        _judge(server[0], api_key_env="GENRM_ABSENT_KEY")


def test_generate_works_inside_a_running_loop_and_threads(server, state):
    with _judge(server[0]) as judge:

        async def caller():  # a synchronous call from a coroutine (e.g. inside an async actor)
            return judge.generate(_batch(2))

        inside = asyncio.run(caller())
        results: dict[int, list] = {}
        threads = [
            threading.Thread(target=lambda i=i: results.__setitem__(i, judge.generate(_batch(2)))) for i in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [g.text for g in inside] == ["echo:q0", "echo:q1"]
    assert all([g.text for g in r] == ["echo:q0", "echo:q1"] for r in results.values())


def test_shutdown_is_idempotent_and_final(server, state):
    judge = _judge(server[0])
    judge.shutdown()
    judge.shutdown()
    with pytest.raises(JudgeClosedError, match="shut down"):
        judge.generate(_batch(1))


# ------------------------------------------------------------------------ pure helpers
@pytest.mark.parametrize(
    "top, labels, expected",
    [
        (
            {"1": math.log(0.3), "0": math.log(0.1)},
            ["1", "0"],
            {"1": 0.75, "0": 0.25},
        ),  # renormalised
        (
            {" yes": math.log(0.2), "yes": math.log(0.2), "no": math.log(0.1)},
            ["yes", "no"],
            {"yes": 0.8, "no": 0.2},
        ),
        ({"x": 0.0}, ["1", "0"], None),  # no label present
    ],
)
def test_label_probs(top, labels, expected):
    got = label_probs(top, labels)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_retry_delay_and_retry_after():
    assert retry_delay(0, 0.5, 2.0) == 2.0  # Retry-After wins
    assert retry_delay(0, 0.5, 1e6) == 30.0  # but is capped
    delays = [retry_delay(3, 0.5, None) for _ in range(200)]
    assert all(0.0 <= d <= 4.0 for d in delays) and max(delays) > 1.0  # full jitter over [0, 0.5 * 2^3]
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


# ------------------------------------------------------------------ one bad reply, one sample
POISONS = ["usage_list", "usage_strings", "logprob_1000", "two_choices", "no_choices", "malformed_json", "deep_json"]


@pytest.mark.parametrize("kind", POISONS)
def test_one_unreadable_reply_fails_only_its_sample(server, state, kind):
    # 16 requests in one call; the reply to "q1" is broken in one way. Only sample 1 fails,
    # and the judge counts exactly one error (the environment's genrm/engine_errors).
    state.mode = f"poison:{kind}"
    with _judge(server[0], max_retries=0) as judge:
        if kind == "logprob_1000":  # a logprob of 1000 is no probability: scoring reads it
            scores = judge.score(_batch(16), ["1", "0"])
            assert [s.error for s in scores] == [None, "http_bad_response"] + [None] * 14
            assert scores[2].probs == pytest.approx({"1": 0.55 / 0.75, "0": 0.20 / 0.75})
            assert judge.stats().errors == 1
            return
        out = judge.generate(_batch(16))
        stats = judge.stats()
    assert [g.error for g in out] == [None, "http_bad_response"] + [None] * 14
    assert [g.text for g in out][2:] == [f"echo:q{i}" for i in range(2, 16)]
    assert out[0].prompt_tokens == 7 and out[1].prompt_tokens == 0
    assert stats.errors == 1


# ------------------------------------------------------------------ deadlines that hold
def _silent_listener() -> socket.socket:
    """A socket that listens and never accepts: connects succeed, no byte ever comes back."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def test_hung_server_stops_the_whole_call_after_the_first_requests_give_up():
    from nemo_genrm.judges.http_transport import hung_server_bound_s

    # 12 requests, 2 at a time, 3 attempts of 1 s each: one by one they would take 6 waves
    # of about 3 s. Once the first request gives up with nothing answered, the rest stop.
    sock = _silent_listener()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    http = {"timeout_s": 1.0, "max_retries": 2, "backoff_s": 0.05, "max_concurrency": 2}
    try:
        with _judge(url, **http) as judge:
            start = time.monotonic()
            out = judge.generate(_batch(12))
            elapsed = time.monotonic() - start
    finally:
        sock.close()
    assert [g.error for g in out] == ["http_timeout"] * 12
    bound = hung_server_bound_s(1.0, 2, 0.05, call_timeout_s=600.0)
    assert bound == pytest.approx(3 * 1.0 + 0.05 + 0.1)
    assert elapsed <= bound + 3.0  # wave after wave would need about 19 s


def _trickle_server(stop: threading.Event) -> socket.socket:
    """Accepts, sends a status line, then one header byte every 0.1 s (for at most 5 s)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)

    def serve() -> None:
        conns = []
        end = time.monotonic() + 5.0
        while not stop.is_set() and time.monotonic() < end:
            try:
                conn, _ = sock.accept()
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                conns.append(conn)
            except OSError:
                pass
            for conn in conns:
                try:
                    conn.sendall(b"a")
                except OSError:
                    pass
            time.sleep(0.1)
        for conn in conns:
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return sock


def test_trickling_server_is_cut_at_timeout_s():
    # Every read gets a byte within 0.1 s, so a per-read timeout of 0.5 s never fires;
    # timeout_s bounds the attempt whole.
    stop = threading.Event()
    sock = _trickle_server(stop)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    try:
        with _judge(url, timeout_s=0.5, max_retries=0) as judge:
            start = time.monotonic()
            out = judge.generate(_batch(2))
            elapsed = time.monotonic() - start
    finally:
        stop.set()
        sock.close()
    assert [g.error for g in out] == ["http_timeout"] * 2
    assert 0.5 <= elapsed < 4.0  # uncut, the attempt would last until the server stops at 5 s


def test_shipped_defaults_bound_a_step_against_a_hung_judge():
    from pathlib import Path

    from nemo_genrm.config import FaultToleranceConfig, HttpConfig
    from nemo_genrm.judges.http_transport import hung_server_bound_s

    http, ft = HttpConfig(), FaultToleranceConfig()
    bound = hung_server_bound_s(http.timeout_s, http.max_retries, http.backoff_s, ft.step_timeout_s)
    # (3 retries + 1) attempts of 30 s, plus backoff 0.5 + 1 + 2 s.
    assert bound == pytest.approx(123.5)
    docs = (Path(__file__).resolve().parents[3] / "docs" / "security.md").read_text()
    assert "124 s" in docs  # the figure the docs state is the one the defaults give


# ------------------------------------------------------------------ secrets never echoed
LONG_KEY = "sk-" + "".join(f"{i:03d}q" for i in range(99))  # 399 characters, no repeats of 8


def _leaked(text: str, key: str) -> list[str]:
    """Every 8-character piece of ``key`` found in ``text``."""
    return sorted({key[i : i + 8] for i in range(len(key) - 7) if key[i : i + 8] in text})


@pytest.mark.parametrize("key", [LONG_KEY, "k3y-short-9"])
def test_planted_key_never_leaves(server, state, monkeypatch, caplog, tmp_path, key):
    monkeypatch.setenv("GENRM_PLANTED_KEY", key)
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    log_file = tmp_path / "run.log"
    handler = logging.FileHandler(log_file)
    handler.setLevel(logging.DEBUG)
    logging.getLogger().addHandler(handler)
    texts: list[str] = []
    try:
        judge = _judge(server[0], api_key_env="GENRM_PLANTED_KEY", max_retries=1)
        with judge:
            for mode in ("straddle", "echo_auth", "always500", "poison:malformed_json", "ok"):
                state.mode = mode
                out = judge.generate(_batch(2))
                texts += [repr(out), repr(judge.stats())]
            texts += [repr(judge), str(judge), repr(vars(judge))]
        # The same key inside base_url, against a refusing port and the live server.
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()
        for url in (f"http://genrm:{key}@127.0.0.1:{port}/v1", server[0].replace("://", f"://genrm:{key}@")):
            with _judge(url, max_retries=0) as creds_judge:
                state.mode = "echo_auth"
                texts += [repr(creds_judge.generate(_batch(1))), repr(creds_judge), repr(vars(creds_judge))]
        for bad in (f"ftp://genrm:{key}@host/v1", f"genrm:{key}@host/v1", [f"http://genrm:{key}@h/v1"]):
            with pytest.raises(ConfigError) as info:  # through validate(), as configs are read
                create_judge({"backend": "http", "model_name": "m", "http": {"base_url": bad}})
            texts.append(str(info.value))
            with pytest.raises(ValueError) as raw:  # pydantic's own error, built directly
                JudgeConfig(backend="http", model_name="m", http={"base_url": bad})
            texts += [str(raw.value), repr(raw.value)]
        state.mode = "ok"
        with _judge(server[0].replace("://", f"://genrm:{key}@"), max_retries=0) as creds_judge:
            with pytest.raises(ConfigError) as info:  # the error names the server
                creds_judge.score(_batch(1), ["1", "0"])
            texts.append(str(info.value))
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    assert any("Basic " in (a or "") for a in state.auth)  # URL credentials were sent, as a header
    assert "the server said" in caplog.text  # the error bodies were logged, masked
    assert "authorization Basic ***" in caplog.text  # the quoted basic-auth header too
    files = [p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()]
    for text in [caplog.text, *texts, *files]:
        leaked = _leaked(text, key)
        where = text.find(leaked[0]) if leaked else 0
        assert not leaked, text[max(0, where - 200) : where + 50]
