"""The judge service's Ray Serve deployment: an OpenAI-style API in front of any judge engine.

Endpoints:

- ``POST /v1/chat/completions``: ``messages`` are judged with the engine's own sampling. Without
  ``logprobs`` the reply is the engine's generation. With ``logprobs: true`` (and
  ``max_tokens: 1``) the reply is the most likely first token and ``logprobs.content[0]`` holds
  its ``top_logprobs`` (at most 20) as OpenAI shapes them; the judge's
  ``verdict_from: logprobs`` uses this. Concurrent requests are merged into one engine call
  (``@serve.batch``).
- ``GET /v1/models``, ``GET /health`` (``ready``, ``degraded`` or ``dead``: the engine's real
  state, 503 when dead; ``degraded`` too while fewer replicas run than ``serve.num_replicas``,
  with their counts under ``replicas``: :mod:`nemo_genrm.serve.fleet`), ``GET /metrics``
  (Prometheus text; ``?format=json`` for JSON), ``GET /openapi.json``, ``/docs`` and ``/redoc``
  (the API's description).

Every route but ``/health`` needs ``Authorization: Bearer <key>`` when the service has a key
(401 otherwise), the API's description included. A request is checked whole before it joins an
engine batch (:mod:`nemo_genrm.serve.guard`): a client (key and address) already holding its
fair share of the replica's open requests gets a 429, a body past ``serve.max_body_bytes`` a
413, one slower than ``serve.body_timeout_s`` a 408, JSON that is invalid, nested past
``serve.max_json_depth`` or holding NUL or a lone surrogate a 400. Only then does the request
take one of the replica's ``serve.max_ongoing_requests`` engine slots, so slow bodies hold no
engine slot (Ray Serve itself admits up to ``serve.max_open_requests``). Should the engine still
raise on a batch, each request of it is run alone, so only the one that cannot be served fails;
an engine that cannot be reached (a connection error, a dead worker) is ``dead`` at once.

Request rules (each broken rule is a 400 with an OpenAI-style error body): ``n`` must be 1,
``stream`` false, no ``stop``; ``temperature``, ``top_p`` and ``seed``, when sent, must equal the
engine's (``judge.sampling``; ignored for logprobs requests, whose distribution does not depend
on them); ``max_tokens`` may not be below the engine's ``max_new_tokens`` (a reply is never
longer than asked), except 1 with ``logprobs``. An unknown ``model`` is a 404. A prompt longer
than the judge's context is a 400 (``prompt_too_long``); any other engine failure is a 500.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import ray
from fastapi import FastAPI, Query, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from ray import serve
from starlette.requests import ClientDisconnect

from nemo_genrm.errors import ENGINE_ERROR, PROMPT_TOO_LONG
from nemo_genrm.judges.base import Generation, JudgeRequest
from nemo_genrm.serve.config import ServiceConfig
from nemo_genrm.serve.edge import CLIENT_HEADER
from nemo_genrm.serve.fleet import FleetWatch, with_fleet
from nemo_genrm.serve.guard import (
    EngineHealth,
    FairShare,
    RequestError,
    check_bearer,
    client_identity,
    decode_json,
    engine_gone,
    read_body,
)
from nemo_genrm.serve.metrics import prometheus_text
from nemo_genrm.serve.requests import ChatCall, completion_body, error_response, logprobs_content, parse_chat

logger = logging.getLogger(__name__)

_PROBE = JudgeRequest(messages=({"role": "user", "content": "ping"},))


def _root(request: Request) -> str:
    """The service's route prefix as the client sees it (Ray Serve's root path)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _build_engine(cfg: ServiceConfig) -> Any:
    """The replica's judge: in this process (dtensor, TP 1) or on its own Ray workers."""
    if cfg.in_replica:
        from nemo_genrm.judges.transformers import LocalTransformersJudge

        return LocalTransformersJudge(cfg.judge)
    from nemo_genrm.judges import create_judge

    return create_judge(cfg.judge)


def _load_tokenizer(cfg: ServiceConfig) -> Any:
    """The judge's tokenizer for counting prompt tokens of logprobs requests; None for http."""
    if cfg.judge.backend == "http" and not cfg.judge.tokenizer:
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(cfg.judge.tokenizer_name)


# ---------------------------------------------------------------------------------- deployment
# Ray Serve pickles the ingress class by value when it is decorated, so everything the class
# uses must be defined above it.
# FastAPI's own description routes answer anyone; the deployment serves them behind the key.
app = FastAPI(title="nemo-genrm judge service", docs_url=None, redoc_url=None, openapi_url=None)


@serve.deployment
@serve.ingress(app)
class JudgeDeployment:
    """One replica: a judge engine behind the OpenAI-style routes."""

    def __init__(self, config: dict[str, Any], metrics: Any, api_key_sha256: str | None = None):
        from nemo_genrm.config import validate

        self.cfg = validate(ServiceConfig, config)
        self.metrics = metrics
        self.key_digest = api_key_sha256
        self.health_state = EngineHealth(probe_interval_s=self.cfg.serve.health_probe_interval_s)
        self.fleet = FleetWatch(self.cfg.serve.num_replicas)
        self.judge = _build_engine(self.cfg)
        self.tokenizer = getattr(self.judge, "tokenizer", None) or _load_tokenizer(self.cfg)
        self.engine_lock = asyncio.Lock()  # generate and top-logprobs batches share one engine
        # Engine slots are taken once a request's body is in and checked; a client's open
        # requests (bodies still arriving included) are capped per key.
        self.engine_slots = asyncio.Semaphore(self.cfg.serve.max_ongoing_requests)
        self.client_share = FairShare(self.cfg.serve.max_open_requests, self.cfg.serve.max_requests_per_key)
        self.replica_id = serve.get_replica_context().replica_id.unique_id
        for batcher in (self.generate_batch, self.top_logprobs_batch):
            batcher.set_max_batch_size(self.cfg.serve.max_batch_size)
            batcher.set_batch_wait_timeout_s(self.cfg.serve.batch_wait_timeout_s)

    def __del__(self) -> None:
        judge = getattr(self, "judge", None)
        if judge is not None:
            judge.shutdown()

    @app.get("/health")
    async def health(self) -> JSONResponse:
        # Probe an idle engine only: a busy one reports through its batches.
        if self.health_state.needs_probe() and not self.engine_lock.locked():
            await self._probe()
        status, body = self.health_state.report(self.cfg.model_id)
        status, body = with_fleet(status, body, await self.fleet.current())
        return JSONResponse(body, status_code=status)

    async def _probe(self) -> None:
        async with self.engine_lock:
            try:
                gen = await asyncio.to_thread(self.judge.generate, [_PROBE])
            except Exception as exc:
                logger.exception("health probe failed")
                self.health_state.mark_dead(f"engine raised {type(exc).__name__}")
                return
        ok = gen[0].text is not None
        if not ok and engine_gone(errors=[gen[0].error]):
            self.health_state.mark_dead(f"probe failed: {gen[0].error}")
            return
        self.health_state.record(ok, "" if ok else f"probe failed: {gen[0].error}")

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(self, request: Request) -> Response:
        if (denied := self._unauthorized(request)) is not None:
            return denied
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    async def docs(self, request: Request) -> Response:
        if (denied := self._unauthorized(request)) is not None:
            return denied
        return get_swagger_ui_html(openapi_url=_root(request) + "/openapi.json", title=app.title)

    @app.get("/redoc", include_in_schema=False)
    async def redoc(self, request: Request) -> Response:
        if (denied := self._unauthorized(request)) is not None:
            return denied
        return get_redoc_html(openapi_url=_root(request) + "/openapi.json", title=app.title)

    def _unauthorized(self, request: Request) -> JSONResponse | None:
        if check_bearer(request.headers.get("authorization"), self.key_digest):
            return None
        self.metrics.record.remote(False, 0.0, 0, 0, "unauthorized")
        response = error_response(401, "a valid API key is required: send Authorization: Bearer <key>", "unauthorized")
        response.headers["WWW-Authenticate"] = "Bearer"
        return response

    @app.get("/v1/models")
    async def models(self, request: Request) -> Response:
        if (denied := self._unauthorized(request)) is not None:
            return denied
        card = {
            "id": self.cfg.model_id,
            "object": "model",
            "created": 0,
            "owned_by": "nemo-genrm",
            "max_model_len": self.cfg.judge.max_model_len,
        }
        return {"object": "list", "data": [card]}

    @app.get("/metrics")
    async def metrics_route(self, request: Request, fmt: str = Query("prometheus", alias="format")) -> Response:
        if (denied := self._unauthorized(request)) is not None:
            return denied
        try:
            snapshot = await self.metrics.snapshot.remote()
        except ray.exceptions.RayError as exc:
            return error_response(503, f"metrics unavailable: {type(exc).__name__}", "metrics_unavailable")
        # The counters are the service's; the open requests are this replica's own (an operator
        # sees slow bodies and clients held here; a test waits on them instead of on a sleep).
        snapshot["replica"] = {
            "id": self.replica_id,
            "open_requests": self.client_share.holding,
            "open_clients": len(self.client_share.open),
        }
        if fmt == "json":
            return JSONResponse(snapshot)
        return PlainTextResponse(prometheus_text(snapshot), media_type="text/plain; version=0.0.4")

    @app.post("/v1/chat/completions")
    async def chat_completions(self, request: Request) -> Response:
        if (denied := self._unauthorized(request)) is not None:
            return denied
        # The client's address as the edge saw it (the replica sees the edge's own).
        address = request.headers.get(CLIENT_HEADER) or (request.client.host if request.client else None)
        who = client_identity(request.headers.get("authorization"), address)
        if not self.client_share.enter(who):
            self.metrics.record.remote(False, 0.0, 0, 0, "too_many_requests")
            response = error_response(
                429,
                f"this client (its key and address) already holds its share of this replica's open "
                f"requests ({self.client_share.share(who)} of serve.max_open_requests "
                f"{self.cfg.serve.max_open_requests}, shared with {len(self.client_share.open) - 1} other "
                "client(s)): wait for one to finish",
                "too_many_requests",
            )
            response.headers["Retry-After"] = "1"
            return response
        try:
            return await self._chat(request)
        finally:
            self.client_share.leave(who)

    async def _chat(self, request: Request) -> Response:
        start = time.perf_counter()
        usage, rejected = (0, 0), None
        try:
            try:  # everything about the request is checked before it joins a batch
                serve_cfg = self.cfg.serve
                raw = await read_body(
                    request.stream(),
                    request.headers.get("content-length"),
                    serve_cfg.max_body_bytes,
                    serve_cfg.body_timeout_s,
                )
                call = parse_chat(decode_json(raw, serve_cfg.max_json_depth), self.cfg)
            except RequestError as exc:
                rejected = exc.code
                raise
            async with self.engine_slots:  # only a request that is whole and valid takes one
                response, usage = await self._run(call)
        except RequestError as exc:
            response = JSONResponse(exc.body, status_code=exc.status)
        except ClientDisconnect:  # the client left before its body was in: nobody to answer
            rejected = "client_disconnected"
            response = error_response(400, "the client disconnected before its body arrived", rejected)
        except Exception as exc:  # an engine failure must not drop the connection
            logger.exception("engine call failed")
            response = error_response(500, f"engine failure: {type(exc).__name__}", "engine_failure")
        latency = time.perf_counter() - start
        self.metrics.record.remote(response.status_code == 200, latency, *usage, rejected)
        return response

    async def _run(self, call: ChatCall) -> tuple[JSONResponse, tuple[int, int]]:
        model = self.cfg.model_id
        if call.top_k is not None:
            top = await self.top_logprobs_batch((call.request, call.top_k))
            prompt_tokens = self._count_prompt_tokens(call.request)
            if top is None:  # the engine gives no reason; a prompt over budget is the usual one
                too_long = prompt_tokens > self.cfg.judge.max_prompt_tokens
                error = PROMPT_TOO_LONG if too_long else ENGINE_ERROR
                return self._generation_error(error), (0, 0)
            token, logprobs = logprobs_content(top, call.top_k)
            usage = (prompt_tokens, 1)
            return JSONResponse(completion_body(model, token, "length", usage, logprobs)), usage
        gen: Generation = await self.generate_batch(call.request)
        if gen.text is None:
            return self._generation_error(gen.error or ENGINE_ERROR), (gen.prompt_tokens, 0)
        usage = (gen.prompt_tokens, gen.output_tokens)
        # The reply's whole budget: a reasoning judge's thought and its verdict_tokens.
        finish = "length" if gen.output_tokens >= self.cfg.judge.sampling.reply_tokens else "stop"
        return JSONResponse(completion_body(model, gen.text, finish, usage)), usage

    def _generation_error(self, error: str) -> JSONResponse:
        if error == PROMPT_TOO_LONG:
            judge = self.cfg.judge
            message = (
                f"{PROMPT_TOO_LONG}: the prompt exceeds the judge's maximum context length "
                f"({judge.max_model_len} tokens minus {judge.sampling.reply_tokens} for the "
                f"reply: {judge.max_prompt_tokens} for the prompt)"
            )
            return error_response(400, message, PROMPT_TOO_LONG)
        return error_response(500, f"the engine failed on this request: {error}", error)

    def _count_prompt_tokens(self, request: JudgeRequest) -> int:
        if self.tokenizer is None:
            return 0
        text = self.tokenizer.apply_chat_template(
            [dict(m) for m in request.messages], add_generation_prompt=True, tokenize=False
        )
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.01)
    async def generate_batch(self, requests: list[JudgeRequest]) -> list[Generation]:
        async with self.engine_lock:
            self.metrics.record_batch.remote(len(requests))
            failed = Generation(text=None, error=ENGINE_ERROR)
            results = await self._isolated(self.judge.generate, requests, failed)
        errors = [g.error for g in results if g.text is None and g.error != PROMPT_TOO_LONG]
        all_failed = len(errors) == len(results)
        if all_failed and engine_gone(errors=errors):  # unreachable: dead now, not after three batches
            self.health_state.mark_dead(f"every sample failed ({errors[0]})")
        else:
            self.health_state.record(not all_failed, f"every sample failed ({errors[0]})" if all_failed else "")
        return results

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.01)
    async def top_logprobs_batch(self, items: list[tuple[JudgeRequest, int]]) -> list[dict[str, float] | None]:
        k = max(top_k for _, top_k in items)
        async with self.engine_lock:
            self.metrics.record_batch.remote(len(items))

            def top(requests: list[JudgeRequest]) -> list[dict[str, float] | None]:
                return self.judge.top_logprobs(requests, k)

            results = await self._isolated(top, [req for req, _ in items], None)
        self.health_state.record(True)
        return results

    async def _isolated(self, run: Any, requests: list[JudgeRequest], failed: Any) -> list[Any]:
        """``run(requests)``; if it raises, each request alone, so only the bad ones fail."""
        try:
            return await asyncio.to_thread(run, requests)
        except Exception as exc:
            if engine_gone(exc):  # a connection or a worker is gone: no request alone would fare better
                self.health_state.mark_dead(f"engine raised {type(exc).__name__}")
                raise
            if len(requests) == 1:
                self.health_state.record(False, f"engine raised {type(exc).__name__}")
                raise
            logger.warning(
                "engine call over %d requests raised %s; running them one by one",
                len(requests),
                type(exc).__name__,
            )
        results, raised = [], 0
        for request in requests:
            try:
                results.append((await asyncio.to_thread(run, [request]))[0])
            except Exception as exc:
                logger.warning("a request failed alone in the engine: %s", type(exc).__name__)
                results.append(failed)
                raised += 1
        if raised == len(requests):  # every request raised alone too: the engine is broken
            self.health_state.mark_dead(f"engine raised on each of {raised} requests alone")
        return results
