"""When a crashed judge replica may be restarted, and when the judge counts as gone.

:class:`RestartBudget` is a token bucket: it holds up to ``max_restarts`` restarts, each
restart of a crashed replica takes one, and one comes back every ``restart_budget_refill_s``
(never when 0). A replica that crashes again and again waits longer each time before its
restart (``restart_backoff_s`` doubled per crash in a row, up to ``restart_backoff_max_s``);
finishing work resets its count. Replacing a replica that was only stuck past the step
deadline is not a crash and takes nothing from the bucket.

:class:`Availability` tracks since when no replica has been alive; past
``unavailable_grace_s`` the judge is taken as gone and the caller raises
:class:`~nemo_genrm.errors.JudgeUnavailableError`.

Both take the clock as an argument (``time.monotonic()`` values), so they are tested without
waiting.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RestartBudget:
    """Restarts left, refilled over time (see the module docstring).

    Args:
        max_restarts: Bucket size (and the restarts available at start).
        refill_s: Seconds per restart given back; 0 never gives any back.
        backoff_s: Wait before the first restart of a replica that crashed.
        backoff_max_s: Cap of the doubling wait.
        now: The clock at creation.
    """

    max_restarts: int
    refill_s: float
    backoff_s: float
    backoff_max_s: float
    now: float

    def __post_init__(self) -> None:
        self._tokens = float(self.max_restarts)
        self._at = self.now

    def available(self, now: float) -> float:
        """Restarts in the bucket at ``now`` (fractions are restarts refilling)."""
        if self.refill_s > 0:
            self._tokens = min(float(self.max_restarts), self._tokens + (now - self._at) / self.refill_s)
        self._at = max(self._at, now)
        return self._tokens

    def take(self, now: float) -> bool:
        """Take one restart if the bucket holds one."""
        if self.available(now) < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def next_refill(self, now: float) -> float | None:
        """When the next whole restart will be in the bucket; ``None`` if never."""
        missing = 1.0 - self.available(now)
        if missing <= 0:
            return now
        return None if self.refill_s <= 0 else now + missing * self.refill_s

    def backoff(self, crashes_in_a_row: int) -> float:
        """Wait before restarting a replica after its ``crashes_in_a_row``-th crash (from 1)."""
        if crashes_in_a_row < 1 or self.backoff_s <= 0:
            return 0.0
        return min(self.backoff_max_s, self.backoff_s * 2.0 ** (crashes_in_a_row - 1))


@dataclass
class Availability:
    """Since when no replica has been alive, and whether that is past the grace period."""

    grace_s: float
    down_since: float | None = None
    why: str = ""

    def update(self, alive: int, now: float, why: str = "") -> None:
        """Record the number of live replicas at ``now`` (``why``: the last reason one went down)."""
        if alive > 0:
            self.down_since, self.why = None, ""
        elif self.down_since is None:
            self.down_since, self.why = now, why or "no judge replica is alive"
        elif why:
            self.why = why

    def down_for(self, now: float) -> float:
        """Seconds without a live replica (0 while one is alive)."""
        return 0.0 if self.down_since is None else now - self.down_since

    def gone(self, now: float) -> bool:
        """Whether the judge has been down longer than the grace period."""
        return self.down_since is not None and self.down_for(now) > self.grace_s
