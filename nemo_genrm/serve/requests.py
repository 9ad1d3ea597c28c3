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
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from nemo_genrm.judges.base import JudgeRequest
from nemo_genrm.samples.inputs import content_text
from nemo_genrm.serve.config import ServiceConfig
from nemo_genrm.serve.guard import RequestError

__all__ = [
    "MAX_TOP_LOGPROBS",
    "UNSUPPORTED",
    "ChatCall",
    "ChatCompletionRequest",
    "completion_body",
    "error_response",
    "logprobs_content",
    "parse_chat",
]

MAX_TOP_LOGPROBS = 20


# ------------------------------------------------------------------------------------ requests
_INT64 = 2**63 - 1  # the largest integer any field takes (OpenAI's seed is an int64)
_STRICT = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)  # no "1" for 1, no NaN

UNSUPPORTED: dict[str, Any] = {
    "presence_penalty": 0,
    "frequency_penalty": 0,
    "logit_bias": {},
    "tools": [],
    "tool_choice": "none",
    "functions": [],
    "function_call": "none",
    "stream_options": {},
    "prediction": {},
    "audio": {},
    "modalities": ["text"],
}
"""OpenAI fields that change the reply, which the service does not do: accepted only absent,
null or at this default value (else a 400 naming the field). Fields not named here or in
:class:`ChatCompletionRequest` (``user``, ``metadata``, ``store`` ...) do not change the reply and
are ignored, as vLLM's server does."""


class _ChatMessage(BaseModel):
    model_config = _STRICT
    role: Literal["system", "user", "assistant"]
    content: Any  # a string or a list of text parts (one type, so an error names the field alone)

    @field_validator("content")
    @classmethod
    def _text_parts(cls, content: Any) -> str | list[Any]:
        """A string, or content parts holding text, read as the environment reads them
        (:func:`~nemo_genrm.samples.inputs.content_text`: text parts joined by newlines, other
        parts such as images left out); content with no text to read is refused."""
        text, why = content_text(content)
        if text is None:
            raise ValueError(
                f"no text to read ({why}); send a string or [{{'type': 'text', 'text': ...}}] parts: "
                "the judge reads text only"
            )
        return content

    def text(self) -> str:
        """The content's text (validated to hold some)."""
        return content_text(self.content)[0]


class ChatCompletionRequest(BaseModel):
    """The fields of an OpenAI chat-completion request this service reads (see :data:`UNSUPPORTED`)."""

    model_config = _STRICT
    model: str | None = None
    messages: list[_ChatMessage] = Field(..., min_length=1)
    max_tokens: int | None = Field(None, ge=1, le=_INT64)
    max_completion_tokens: int | None = Field(None, ge=1, le=_INT64)
    temperature: float | None = Field(None, ge=0.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = Field(None, ge=-_INT64 - 1, le=_INT64)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=_INT64)
    n: int | None = Field(None, ge=1, le=_INT64)
    stream: bool | None = None
    stop: Any = None  # a string or a list of them; any non-empty one is refused

    @field_validator("stop")
    @classmethod
    def _stop(cls, stop: Any) -> Any:
        if (
            stop is not None
            and not isinstance(stop, str)
            and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
        ):
            raise ValueError("must be a string or a list of strings")
        return stop


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
    if not isinstance(body, dict):
        raise RequestError(400, f"the body must be a JSON object, not {type(body).__name__}", "invalid_request")
    for name, default in UNSUPPORTED.items():
        if body.get(name) is not None and body[name] != default:
            raise RequestError(
                400, f"{name} is not supported by the judge service: omit it (or send {default!r})", "unsupported", name
            )
    try:
        req = ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RequestError(400, f"invalid request: {where}: {first['msg']}", "invalid_request", where) from None
    if req.model is not None and req.model != cfg.model_id:
        raise RequestError(
            404,
            f"model {req.model!r} is not served here; use {cfg.model_id!r}",
            "model_not_found",
            "model",
        )
    if req.n not in (None, 1):
        raise RequestError(
            400,
            f"n must be 1 (got {req.n}): the judge writes one reply per request",
            "unsupported",
            "n",
        )
    if req.stream:
        raise RequestError(400, "stream is not supported: send stream: false", "unsupported", "stream")
    if req.stop:
        raise RequestError(
            400,
            "stop is not supported: the judge stops at its end-of-turn token",
            "unsupported",
            "stop",
        )
    max_tokens = req.max_completion_tokens or req.max_tokens
    judge_request = JudgeRequest(messages=tuple({"role": m.role, "content": m.text()} for m in req.messages))
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
        raise RequestError(400, "top_logprobs needs logprobs: true", "invalid_request", "top_logprobs")
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
