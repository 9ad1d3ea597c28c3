"""Shared by the drop-in tests: a stand-in judge whose verdict is a known function of its prompt.

The verdict reads the judge prompt's user message: ``0`` when it holds ``WRONG``, an unparseable
reply when it holds ``CONFUSE``, an engine error when it holds ``CRASH``, and otherwise ``1``
when it holds ``RIGHT``, or the parity of its count of ``a`` characters (so a random tiny policy
gets rewards of both values). The tests compute the expected reward from the same rule.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from nemo_genrm.judges.base import Generation, JudgeRequest, RequestLike
from nemo_genrm.testing.stand_ins import GenerateOnlyJudge

GENRM_SECTION: dict[str, Any] = {
    # The stand-in replaces the engine; the section still names one, as a user's config would.
    "judge": {"backend": "http", "model_name": "stand-in", "http": {"base_url": "http://127.0.0.1:9/v1"}},
    "resources": {"gpus_per_replica": 0},
    "coalesce": {"max_wait_ms": 0},
}


def user_text(request: RequestLike) -> str:
    """The last user message of a judge request."""
    messages = JudgeRequest.of(request).messages
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def verdict_text(prompt_text: str) -> str | None:
    """The stand-in's reply to a prompt whose user message is ``prompt_text`` (``None``: error)."""
    if "CRASH" in prompt_text:
        return None
    if "CONFUSE" in prompt_text:
        return "maybe"
    if "WRONG" in prompt_text:
        return "0"
    if "RIGHT" in prompt_text:
        return "1"
    return "1" if prompt_text.count("a") % 2 == 0 else "0"


class RuleJudge(GenerateOnlyJudge):
    """The stand-in judge of this module; records every prompt it was shown."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self._lock = threading.Lock()

    def generate(self, batch: Sequence[RequestLike]) -> list[Generation]:
        texts = [user_text(item) for item in batch]
        with self._lock:
            self.prompts.extend(texts)
        replies = [verdict_text(text) for text in texts]
        return [Generation(reply) if reply is not None else Generation(None, error="stand_in_crash") for reply in replies]


class RuleServer:
    """An OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1 replying by the rule.

    It plays the judge service (or verl's reward model router) for the HTTP engine: the reply to
    each request is :func:`verdict_text` of its last user message (a 500 where that is an error).
    Use as a context manager; ``address`` is ``host:port`` and ``base_url`` ends in ``/v1``.
    """

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.models: list[str] = []

    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            text = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
            self.prompts.append(text)
            self.models.append(body.get("model"))
            reply = verdict_text(text)
            if reply is None:
                return JSONResponse({"error": {"message": "stand-in crash"}}, status_code=500)
            choice = {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
            usage = {"prompt_tokens": len(text.split()), "completion_tokens": 1, "total_tokens": len(text.split()) + 1}
            return JSONResponse({"id": "c", "object": "chat.completion", "choices": [choice], "usage": usage})

        return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])

    def __enter__(self) -> RuleServer:
        import socket

        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{sock.getsockname()[1]}"
        self.base_url = f"http://{self.address}/v1"
        self._server = uvicorn.Server(uvicorn.Config(self._app(), log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the stand-in OpenAI server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def http_section(base_url: str | None, **judge: Any) -> dict[str, Any]:
    """An ``env.genrm`` section whose judge is the HTTP engine at ``base_url``."""
    http = {"base_url": base_url, "max_retries": 0, "timeout_s": 10}
    return {
        "judge": {"backend": "http", "model_name": "judge", "http": http, **judge},
        "resources": {"gpus_per_replica": 0},
    }
