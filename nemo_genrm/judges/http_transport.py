"""Transport pieces of the HTTP judge: its event-loop thread, retry timing and response checks.

Kept apart from :mod:`nemo_genrm.judges.http` so each module stays small; nothing here knows
about judge requests or verdicts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from nemo_genrm.errors import TIMEOUT, JudgeUnavailableError
from nemo_genrm.judges.restart_budget import Availability

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_RETRY_DELAY_S = 30.0
"""Longest wait before one retry, whatever the backoff or ``Retry-After`` says."""
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_TOO_LONG_HINTS = ("context length", "maximum context", "too long", "prompt_too_long")
_HUNG_ERRORS = frozenset({"http_timeout", "http_connect"})
UNREACHABLE_ERRORS = frozenset({*_HUNG_ERRORS, TIMEOUT})
"""Request errors that say the server was not reached: refused or dropped connections, timeouts."""


def is_unavailable(error: str | None) -> bool:
    """Whether a request's final error says the judge cannot serve: not reached
    (:data:`UNREACHABLE_ERRORS`), or a 5xx after every retry (a proxy whose engine is down
    answers each request, but no judge stands behind it). A 4xx is the request's own fault."""
    if error is None:
        return False
    return error in UNREACHABLE_ERRORS or (error.startswith("http_5") and error[5:].isdigit())


class Secret(Generic[T]):
    """Holds a credential (the API key, a URL's user and password); its repr and str never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: T):
        self._value = value

    def reveal(self) -> T:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


class LoopThread:
    """An asyncio event loop running forever on a daemon thread."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and block the calling thread until it finishes.

        Args:
            coro: The coroutine to run.
            timeout_s: Longest wait; ``None`` waits as long as it takes.

        Returns:
            What the coroutine returned.

        Raises:
            RuntimeError: Called from the loop's own thread.
            TimeoutError: ``coro`` did not finish within ``timeout_s`` (it is then cancelled).
        """
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("HttpJudge methods cannot be called from the judge's own event loop")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise TimeoutError(f"the judge's HTTP calls did not finish within {timeout_s} s") from exc

    def stop(self) -> None:
        """Stop the loop, join the thread and close the loop; safe to call twice."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10.0)
        if not self._thread.is_alive():
            self.loop.close()


@dataclass
class RequestOutcome:
    """What one request came to after its retries: a JSON body or an error code."""

    body: dict[str, Any] | None
    error: str | None = None
    retries: int = 0
    detail: str = ""  # the start of the server's error body, for the log


@dataclass
class CallBreaker:
    """Shared by the requests of one call: notices a hung server and stops the waiting.

    Once a request has used up its retries on a timeout or a dropped connection while no
    request of the call has succeeded, :attr:`tripped` holds that error code and the call's
    other requests stop before their next attempt.
    """

    tripped: str | None = None
    succeeded: bool = False
    skipped: int = 0

    def gave_up(self, error: str) -> None:
        """Record that one request failed for good with ``error``."""
        if error in _HUNG_ERRORS and not self.succeeded and self.tripped is None:
            self.tripped = error


class Reachability:
    """Whether a judge server is gone for good, from the outcomes of the calls sent to it.

    A call in which every request sent failed to connect, timed out, or was answered with a 5xx
    after its retries (:func:`is_unavailable`) marks the server down, from that call's start
    unless it was down already; a call with any other outcome (a reply, a 4xx) marks it up. Once
    it has been down for longer than ``grace_s`` (``fault_tolerance.unavailable_grace_s``),
    :meth:`record` raises :class:`~nemo_genrm.errors.JudgeUnavailableError`, as the Ray judge
    pool does when no replica is alive.

    Args:
        grace_s: How long the server may be unreachable before it is taken as gone.
        where: The server, as named in the error (credentials masked).
    """

    def __init__(self, grace_s: float, where: str):
        self._availability = Availability(grace_s)
        self._where = where
        self._lock = threading.Lock()

    def record(self, errors: Sequence[str | None], began: float) -> bool:
        """Record one call: the error code of each request sent (``None``: answered).

        Args:
            errors: Per request sent, its error code or ``None``.
            began: ``time.monotonic()`` when the call started.

        Returns:
            Whether no request of the call was served (a call that sent nothing: False).

        Raises:
            JudgeUnavailableError: The server has been unavailable for longer than the grace.
        """
        if not errors:
            return False
        unreachable = all(is_unavailable(error) for error in errors)
        now = time.monotonic()
        with self._lock:
            availability = self._availability
            if not unreachable:
                availability.update(1, now)
                return False
            codes = ", ".join(sorted({str(e) for e in errors}))
            if availability.down_since is None:
                availability.update(0, began, f"every request to {self._where} failed ({codes})")
            if availability.gone(now):
                raise JudgeUnavailableError(
                    f"every request to {self._where} failed to connect, timed out or got a server error "
                    f"({codes}), past fault_tolerance.unavailable_grace_s ({availability.grace_s:g} s)",
                    availability.down_for(now),
                )
        return True


def hung_server_bound_s(timeout_s: float, max_retries: int, backoff_s: float, call_timeout_s: float) -> float:
    """Longest a call waits on a server that accepts connections but never answers.

    The requests holding the concurrency slots use up their attempts (``max_retries + 1`` of
    ``timeout_s`` each, with backoff between, keeping their slots); then the call's breaker
    stops the queued ones before they start. The call's deadline caps it all.

    Args:
        timeout_s: ``http.timeout_s``, the bound of one attempt.
        max_retries: ``http.max_retries``.
        backoff_s: ``http.backoff_s``.
        call_timeout_s: The call's deadline (``fault_tolerance.step_timeout_s``).

    Returns:
        The bound in seconds.
    """
    backoff = sum(min(MAX_RETRY_DELAY_S, backoff_s * 2.0**a) for a in range(max_retries))
    return min(call_timeout_s, (max_retries + 1) * timeout_s + backoff)


async def failed_request(error: str) -> RequestOutcome:
    return RequestOutcome(body=None, error=error)


def json_object(response: httpx.Response) -> dict[str, Any] | None:
    """The response's JSON object, or None (then ``http_bad_response``) when it is not one."""
    try:
        body = response.json()
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return None
    return body if isinstance(body, dict) else None


def status_error(response: httpx.Response) -> str:
    """``prompt_too_long`` for a context-length refusal, else ``http_<status>``."""
    if response.status_code in (400, 413, 422):
        text = response.text.lower()
        if any(hint in text for hint in _TOO_LONG_HINTS):
            return "prompt_too_long"
    return f"http_{response.status_code}"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), else None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def retry_delay(attempt: int, backoff_s: float, retry_after: float | None) -> float:
    """Full-jitter exponential backoff, or the server's ``Retry-After``; capped."""
    if retry_after is not None:
        return min(retry_after, MAX_RETRY_DELAY_S)
    return random.uniform(0.0, min(MAX_RETRY_DELAY_S, backoff_s * 2.0**attempt))


async def gather_until(
    jobs: Sequence[Callable[[], Awaitable[RequestOutcome]]], timeout_s: float | None
) -> list[RequestOutcome]:
    """Run every job concurrently; the ones unfinished after ``timeout_s`` become ``timeout``.

    Args:
        jobs: Zero-argument callables returning the coroutine of one request.
        timeout_s: Deadline for the whole batch in seconds; ``None`` waits for every job.

    Returns:
        One outcome per job, in order; a job cut off at the deadline is cancelled and gets
        ``RequestOutcome(body=None, error="timeout")``.
    """
    tasks = [asyncio.ensure_future(job()) for job in jobs]
    if not tasks:
        return []
    _, pending = await asyncio.wait(tasks, timeout=timeout_s)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)  # let the cancelled requests release their connections
    return [RequestOutcome(body=None, error="timeout") if task in pending else _result(task) for task in tasks]


def _result(task: asyncio.Future[RequestOutcome]) -> RequestOutcome:
    """A finished job's outcome; a job that raised fails alone, never its siblings."""
    exc = task.exception()
    if exc is None:
        return task.result()
    logger.warning("a judge request failed unexpectedly: %s", type(exc).__name__)
    return RequestOutcome(body=None, error="http_error")
