"""What stands between the network and the judge service's engine: keys, bodies, health.

Everything a request can get wrong is found here, before the request joins an engine batch, so
a request that cannot be served is answered alone (401, 408, 413 or 400) and never fails the
requests batched with it:

- :func:`check_bearer`: the ``Authorization: Bearer`` key, compared in constant time with the
  SHA-256 digest the replica was given (the key itself never reaches Ray);
- :func:`read_body`: at most ``serve.max_body_bytes``, within ``serve.body_timeout_s``;
- :func:`decode_json`: JSON whose nesting stays within ``serve.max_json_depth`` and whose
  strings hold no NUL and no lone surrogate (neither survives a tokenizer);
- :class:`FairShare`: each client (its key and address) holds at most its fair share of the
  replica's open requests (never less than ``serve.max_requests_per_key``), counted from the
  moment the headers arrive, so one client's slow bodies cannot take the replica from the
  others, and a client alone is not capped below what the replica holds;
- :class:`EngineHealth`: what ``/health`` reports (``ready``, ``degraded`` or ``dead``), and
  :func:`engine_gone`: the failures that mean the engine is gone, not one request bad.

Kept free of Ray Serve and FastAPI imports so it is unit-tested without a cluster.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "EngineHealth",
    "FairShare",
    "RequestError",
    "check_bearer",
    "client_identity",
    "engine_gone",
    "decode_json",
    "is_loopback",
    "key_digest",
    "load_api_key",
    "read_body",
]


class RequestError(Exception):
    """A request the service will not run; carries the HTTP status and an OpenAI error body."""

    def __init__(self, status: int, message: str, code: str, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.body = {
            "error": {
                "message": message,
                "type": "invalid_request_error" if status < 500 else "server_error",
                "param": param,
                "code": code,
            }
        }


# --------------------------------------------------------------------------------------- keys
def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the service on this machine (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def load_api_key(env_name: str | None, file_path: str | None) -> str | None:
    """The service's API key from an environment variable or a file (its first line).

    Args:
        env_name: ``serve.api_key_env``.
        file_path: ``serve.api_key_file``.

    Returns:
        The key, or ``None`` when neither is configured.

    Raises:
        ValueError: The variable is unset or empty, or the file is missing, unreadable or empty
            (the message names the variable or file, never the key).
    """
    if env_name:
        value = os.environ.get(env_name, "").strip()
        if not value:
            raise ValueError(f"serve.api_key_env names {env_name!r}, which is not set or empty")
        return value
    if file_path:
        try:
            lines = Path(file_path).expanduser().read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"serve.api_key_file {file_path!r} cannot be read ({type(exc).__name__})") from None
        value = lines[0].strip() if lines else ""
        if not value:
            raise ValueError(f"serve.api_key_file {file_path!r} is empty")
        return value
    return None


def key_digest(key: str) -> str:
    """SHA-256 hex digest of a key: what the replicas hold instead of the key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def check_bearer(authorization: str | None, digest: str | None) -> bool:
    """Whether an ``Authorization`` header carries the key; always true when no key is set.

    The digests of the sent and the expected key are compared with :func:`hmac.compare_digest`,
    so the time taken says nothing about how much of the key was right.
    """
    if digest is None:
        return True
    scheme, _, sent = (authorization or "").partition(" ")
    if scheme.lower() != "bearer":
        sent = ""
    return hmac.compare_digest(key_digest(sent.strip()), digest)


def client_identity(authorization: str | None, host: str | None) -> str:
    """Who holds a request, for :class:`FairShare`: its key's digest and its client's address.

    A service has one key, which every trainer sharing it sends: the key alone would make all
    of them one client. The address tells the machines apart.
    """
    scheme, _, sent = (authorization or "").partition(" ")
    key = "key:" + key_digest(sent.strip()) if scheme.lower() == "bearer" and sent.strip() else "no-key"
    return f"{key}|host:{host or 'unknown'}"


@dataclass
class FairShare:
    """Open requests per client, each within its fair share (one replica's count; asyncio, no lock).

    A client (a key and an address: :func:`client_identity`) may always hold ``floor`` open
    requests, and up to its fair share of the replica's ``capacity`` when that is more:
    ``capacity`` divided by the clients holding requests. A client alone may use the whole
    replica (its slow bodies included); as others arrive its share shrinks to make room for them.
    On HTTP/1.1 a connection holds one request at a time, so within a client every connection
    gets its turn.

    Args:
        capacity: Requests the replica holds open at once (``serve.max_open_requests``).
        floor: Requests every client may hold whatever the others do (``serve.max_requests_per_key``).
    """

    capacity: int
    floor: int
    open: dict[str, int] = field(default_factory=dict)

    @property
    def holding(self) -> int:
        """Open requests of every client together."""
        return sum(self.open.values())

    def share(self, who: str) -> int:
        """How many open requests ``who`` may hold now."""
        clients = len(self.open) + (who not in self.open)
        return max(self.floor, self.capacity // clients)

    def enter(self, who: str) -> bool:
        """Count a new request of ``who``; ``False`` (and nothing counted) past its share."""
        held = self.open.get(who, 0)
        if held >= self.share(who):
            return False
        self.open[who] = held + 1
        return True

    def leave(self, who: str) -> None:
        """A request of ``who`` has finished."""
        held = self.open.get(who, 0) - 1
        if held > 0:
            self.open[who] = held
        else:
            self.open.pop(who, None)


# --------------------------------------------------------------------------------------- bodies
async def read_body(
    stream: AsyncIterator[bytes], content_length: str | None, max_bytes: int, timeout_s: float
) -> bytes:
    """Read a request body, refusing one that is too large or too slow.

    Args:
        stream: The body's chunks (Starlette's ``request.stream()``).
        content_length: The ``Content-Length`` header, when sent (checked before reading).
        max_bytes: Largest body accepted.
        timeout_s: Longest time for the whole body to arrive.

    Raises:
        RequestError: 413 past ``max_bytes``; 408 when the body is not in within ``timeout_s``;
            400 for an unreadable ``Content-Length``.
    """
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            raise RequestError(400, "Content-Length is not a number", "invalid_request") from None
        if declared > max_bytes:
            raise _too_large(max_bytes)

    async def collect() -> bytes:
        chunks, size = [], 0
        async for chunk in stream:
            size += len(chunk)
            if size > max_bytes:
                raise _too_large(max_bytes)
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        return await asyncio.wait_for(collect(), timeout_s)
    except TimeoutError:
        raise RequestError(408, f"the request body did not arrive within {timeout_s:g} s", "body_timeout") from None


def _too_large(max_bytes: int) -> RequestError:
    return RequestError(
        413,
        f"the request body is larger than {max_bytes} bytes (serve.max_body_bytes)",
        "body_too_large",
    )


def decode_json(raw: bytes, max_depth: int) -> Any:
    """Decode a JSON body and check what the engine cannot take.

    Raises:
        RequestError: 400 (``invalid_json``) for a body that is not UTF-8 JSON (where it breaks)
            or nests deeper than ``max_depth``; 400 (``invalid_text``) for a string holding NUL or a lone
            surrogate (JSON escapes such as ``\\u0000`` or ``\\ud800`` decode to them).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(400, f"the body is not UTF-8 (byte {exc.start})", "invalid_json") from None
    try:
        # A number is kept whole only when a field could take it: Python refuses to read an
        # integer of more than 4,300 digits (the body would be "not JSON"), so a longer one
        # becomes a value no field accepts and the field it was sent for is named.
        body = json.loads(text, parse_int=_bounded_int)
    except RecursionError:
        raise _too_deep(max_depth) from None
    except json.JSONDecodeError as exc:
        raise RequestError(
            400, f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", "invalid_json"
        ) from None
    stack: list[tuple[Any, int]] = [(body, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            _check_text(value)
        elif isinstance(value, (list, dict)):
            if depth > max_depth:
                raise _too_deep(max_depth)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    _check_text(key)
                stack.append((item, depth + 1))
    return body


MAX_INT_DIGITS = 40
"""Digits past which a JSON integer is not read as a number (int64 needs 19)."""


class OversizedNumber:
    """A JSON integer too long for any field (its digit count); every typed field refuses it."""

    def __init__(self, digits: int):
        self.digits = digits

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


def _bounded_int(text: str) -> int | OversizedNumber:
    digits = len(text.lstrip("-"))
    return int(text) if digits <= MAX_INT_DIGITS else OversizedNumber(digits)


def _too_deep(max_depth: int) -> RequestError:
    return RequestError(400, f"the body nests deeper than {max_depth} levels (serve.max_json_depth)", "invalid_json")


def _check_text(text: str) -> None:
    if "\x00" in text:
        raise RequestError(400, "a string in the body contains NUL (\\u0000)", "invalid_text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError(400, "a string in the body contains a lone UTF-16 surrogate", "invalid_text") from None


# --------------------------------------------------------------------------------------- health
_GONE_ERRORS = frozenset({"http_connect"})
"""Per-sample engine errors that say the engine cannot be reached at all."""


def engine_gone(exc: BaseException | None = None, errors: list[str | None] | None = None) -> bool:
    """Whether a failure means the engine is gone (dead at once), not that one request was bad.

    An exception of a connection or a dead worker (``ConnectionError``, any ``OSError``, Ray's
    actor errors, :class:`~nemo_genrm.errors.JudgeUnavailableError`,
    :class:`~nemo_genrm.errors.JudgeClosedError`), or a batch whose every sample failed to
    connect.
    """
    from nemo_genrm.errors import JudgeClosedError, JudgeUnavailableError

    if exc is not None:
        gone: tuple[type[BaseException], ...] = (OSError, JudgeUnavailableError, JudgeClosedError)
        try:
            from ray.exceptions import ActorUnavailableError, RayActorError

            gone += (RayActorError, ActorUnavailableError)
        except ImportError:  # pragma: no cover - Ray is a dependency
            pass
        return isinstance(exc, gone)
    return bool(errors) and all(e in _GONE_ERRORS for e in errors)


@dataclass
class EngineHealth:
    """The engine's state from its recent calls, and from a probe when it has been idle.

    ``ready``: the last engine call (or probe) worked. ``degraded``: the last call failed (it
    raised, or every sample of it came back with an engine error), fewer than ``dead_after``
    times in a row. ``dead``: ``dead_after`` failed calls in a row, or the probe raised.

    Args:
        probe_interval_s: An engine idle this long is probed before ``/health`` answers.
        dead_after: Failed calls in a row that make the engine ``dead``.
    """

    probe_interval_s: float = 10.0
    dead_after: int = 3
    failures_in_a_row: int = 0
    last_ok: bool | None = None
    last_seen: float = field(default=0.0)
    reason: str = ""

    def record(self, ok: bool, reason: str = "") -> None:
        """Count one engine call (or probe) and what came of it."""
        self.last_seen = time.monotonic()
        self.last_ok = ok
        self.failures_in_a_row = 0 if ok else self.failures_in_a_row + 1
        self.reason = "" if ok else reason

    def mark_dead(self, reason: str) -> None:
        """The engine raised where it should have answered (e.g. its workers are gone)."""
        self.record(False, reason)
        self.failures_in_a_row = max(self.failures_in_a_row, self.dead_after)

    def needs_probe(self) -> bool:
        """Whether the last word on the engine is too old (or there is none)."""
        return self.last_ok is None or time.monotonic() - self.last_seen > self.probe_interval_s

    @property
    def state(self) -> str:
        """``ready``, ``degraded`` or ``dead``."""
        if self.failures_in_a_row >= self.dead_after:
            return "dead"
        if self.last_ok is False or self.reason:
            return "degraded"
        return "ready"

    def report(self, model: str) -> tuple[int, dict[str, Any]]:
        """The status code (503 when dead) and body of ``/health``."""
        body: dict[str, Any] = {"status": self.state, "model": model}
        if self.reason:
            body["reason"] = self.reason
        return (503 if self.state == "dead" else 200), body
