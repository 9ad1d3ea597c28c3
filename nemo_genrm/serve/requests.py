"""The judge service's requests and replies: OpenAI chat-completion shapes and the service's rules.

:func:`parse_chat` validates a request body against the rules in :mod:`nemo_genrm.serve.app`'s
docstring; the other helpers shape the OpenAI-style replies. Kept free of Ray Serve so it is
unit-tested without a cluster.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nemo_genrm.judges.base import JudgeRequest
from nemo_genrm.samples.inputs import content_text
from nemo_genrm.serve.config import ServiceConfig
from nemo_genrm.serve.guard import RequestError

__all__ = ["MAX_TOP_LOGPROBS", "ChatCall", "ChatCompletionRequest", "completion_body", "error_response",
           "logprobs_content", "parse_chat"]  # fmt: skip

MAX_TOP_LOGPROBS = 20


# ------------------------------------------------------------------------------------ requests
class _ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "user", "assistant"]
    content: str | list[dict[str, Any]]

    def text(self, index: int) -> str:
        """The content's text (content parts: their text parts, as the environment reads them).

        Raises:
            RequestError: The content holds no text part, or a malformed part.
        """
        text, why = content_text(self.content)
        if text is None:
            where = f"messages.{index}.content"
            raise RequestError(
                400,
                f"invalid request: {where}: no text to read ({why}); send a string or "
                '[{"type": "text", "text": ...}] parts: the judge reads text only',
                "invalid_request",
                where,
            )
        return text


class ChatCompletionRequest(BaseModel):
    """The fields of an OpenAI chat-completion request this service reads (others are ignored)."""

    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    messages: list[_ChatMessage] = Field(..., min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0)
    n: int = 1
    stream: bool = False
    stop: str | list[str] | None = None


@dataclass(frozen=True)
class ChatCall:
    """A validated request: what to ask the engine."""

    request: JudgeRequest
    top_k: int | None  # None: generate; else the first-token top-k log-probabilities


def parse_chat(body: Any, cfg: ServiceConfig) -> ChatCall:
    """Validate a chat-completion body against the service's rules (see the module docstring).

    Raises:
        RequestError: The body is malformed or asks for something the engine does not do.
    """
    try:
        req = ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RequestError(
            400, f"invalid request: {where}: {first['msg']}", "invalid_request", where
        ) from None
    if req.model is not None and req.model != cfg.model_id:
        raise RequestError(
            404,
            f"model {req.model!r} is not served here; use {cfg.model_id!r}",
            "model_not_found",
            "model",
        )
    if req.n != 1:
        raise RequestError(
            400,
            f"n must be 1 (got {req.n}): the judge writes one reply per request",
            "unsupported",
            "n",
        )
    if req.stream:
        raise RequestError(
            400, "stream is not supported: send stream: false", "unsupported", "stream"
        )
    if req.stop:
        raise RequestError(
            400,
            "stop is not supported: the judge stops at its end-of-turn token",
            "unsupported",
            "stop",
        )
    max_tokens = req.max_completion_tokens or req.max_tokens
    judge_request = JudgeRequest(
        messages=tuple({"role": m.role, "content": m.text(i)} for i, m in enumerate(req.messages))
    )
    if req.logprobs:
        if max_tokens != 1:
            raise RequestError(
                400,
                f"logprobs needs max_tokens: 1 (got {max_tokens}): the service gives the first "
                "token's distribution only",
                "unsupported",
                "max_tokens",
            )
        k = req.top_logprobs or 1
        if k > MAX_TOP_LOGPROBS:
            raise RequestError(
                400,
                f"top_logprobs must be at most {MAX_TOP_LOGPROBS} (got {k})",
                "unsupported",
                "top_logprobs",
            )
        return ChatCall(request=judge_request, top_k=k)
    if req.top_logprobs:
        raise RequestError(
            400, "top_logprobs needs logprobs: true", "invalid_request", "top_logprobs"
        )
    _check_sampling(req, max_tokens, cfg)
    return ChatCall(request=judge_request, top_k=None)


def _check_sampling(req: ChatCompletionRequest, max_tokens: int | None, cfg: ServiceConfig) -> None:
    sampling = cfg.judge.sampling
    for name, sent, served in (
        ("temperature", req.temperature, sampling.temperature),
        ("top_p", req.top_p, sampling.top_p),
        ("seed", req.seed, sampling.seed),
    ):
        if sent is not None and abs(float(sent) - float(served)) > 1e-6:
            raise RequestError(
                400,
                f"this service samples with {name}={served} (judge.sampling in its config); "
                f"omit {name} or send {served} (got {sent})",
                "sampling_mismatch",
                name,
            )
    if max_tokens is not None and max_tokens < sampling.max_new_tokens:
        raise RequestError(
            400,
            f"this service writes up to {sampling.max_new_tokens} tokens (judge.sampling."
            f"max_new_tokens); send max_tokens >= {sampling.max_new_tokens} or omit it "
            f"(got {max_tokens})",
            "sampling_mismatch",
            "max_tokens",
        )


def error_response(status: int, message: str, code: str) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": code}},
        status_code=status,
    )


def completion_body(
    model: str, content: str, finish: str, usage: tuple[int, int], logprobs: Any = None
) -> dict[str, Any]:
    prompt_tokens, completion_tokens = usage
    return {
        "id": f"chatcmpl-genrm-{time.time_ns():x}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "logprobs": logprobs,
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def logprobs_content(top: dict[str, float], k: int) -> tuple[str, dict[str, Any]]:
    """The most likely token and OpenAI's ``logprobs`` object for one position."""
    ranked = sorted(top.items(), key=lambda item: item[1], reverse=True)[:k]
    entries = [{"token": t, "logprob": lp, "bytes": list(t.encode("utf-8"))} for t, lp in ranked]
    return ranked[0][0], {"content": [{**entries[0], "top_logprobs": entries}]}
