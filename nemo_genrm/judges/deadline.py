"""The deadline of the step being served, visible to the judge engines it calls.

The environment opens :func:`step_deadline` around its judge call with the time its earliest
step call must be answered by (``fault_tolerance.step_timeout_s`` after that call entered
``step``), so the waits before the judge call (coalescing, prompt building, fitting) come out of
the same budget as the call itself. An engine asks :func:`remaining_s` for the time it may
still spend: the smaller of its own per-call limit and what the step has left. Outside a step
(an engine called directly) only the engine's own limit applies.

The deadline lives in a :class:`~contextvars.ContextVar`, so concurrent steps on other threads
each see their own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_DEADLINE: ContextVar[float | None] = ContextVar("genrm_step_deadline", default=None)


@contextmanager
def step_deadline(deadline: float | None) -> Iterator[None]:
    """Make ``deadline`` (a ``time.monotonic()`` value) the step's deadline inside the block.

    A deadline already set by an enclosing block is kept when it is earlier.
    """
    current = _DEADLINE.get()
    if deadline is None or (current is not None and current <= deadline):
        yield
        return
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def current_deadline() -> float | None:
    """The step's deadline (``time.monotonic()`` value), or ``None`` outside a step."""
    return _DEADLINE.get()


def deadline_within(limit_s: float, start: float | None = None) -> float:
    """The earlier of ``start + limit_s`` and the step's deadline, as a ``time.monotonic()`` value.

    Args:
        limit_s: The caller's own limit in seconds.
        start: When that limit started (default: now).
    """
    own = (time.monotonic() if start is None else start) + limit_s
    step = _DEADLINE.get()
    return own if step is None else min(own, step)


def remaining_s(limit_s: float) -> float:
    """Seconds left before :func:`deadline_within` ``(limit_s)``; never negative."""
    return max(0.0, deadline_within(limit_s) - time.monotonic())
