"""How many of the service's replicas are running, for ``/health``.

A replica answers ``/health`` for its own engine (:class:`~nemo_genrm.serve.guard.EngineHealth`),
but a service whose replicas are spread over nodes is also short of capacity while one of them
is missing (its node lost, Ray Serve starting its replacement, perhaps waiting for a node with
room). :class:`FleetWatch` asks Ray Serve's controller for the deployment's replica states (at
most once per ``refresh_s``) and :func:`with_fleet` adds them to the answer: a ``ready`` engine
in a service with fewer running replicas than ``serve.num_replicas`` reports ``degraded``
(still 200: the service answers), with the counts and the reason.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FleetState", "FleetWatch", "with_fleet"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FleetState:
    """The deployment's replicas as Ray Serve's controller reports them.

    Attributes:
        target: Replicas the service should have (``serve.num_replicas``).
        states: Ray Serve replica state (``RUNNING``, ``STARTING``...) -> count.
    """

    target: int
    states: Mapping[str, int] = field(default_factory=dict)

    @property
    def running(self) -> int:
        """Replicas running."""
        return int(self.states.get("RUNNING", 0))

    @property
    def missing(self) -> int:
        """Replicas short of the target."""
        return max(0, self.target - self.running)


def with_fleet(status: int, body: dict[str, Any], fleet: FleetState | None) -> tuple[int, dict[str, Any]]:
    """``/health``'s status and body with the fleet's counts (unchanged when unknown).

    A ``ready`` engine with replicas missing becomes ``degraded`` with the reason; ``degraded``
    and ``dead`` engines keep their state and reason.
    """
    if fleet is None:
        return status, body
    body = {
        **body,
        "replicas": {
            "target": fleet.target,
            "running": fleet.running,
            **{k.lower(): v for k, v in sorted(fleet.states.items()) if k != "RUNNING"},
        },
    }
    if fleet.missing and body.get("status") == "ready":
        others = ", ".join(f"{v} {k.lower()}" for k, v in sorted(fleet.states.items()) if k != "RUNNING" and v)
        body["status"] = "degraded"
        body["reason"] = f"{fleet.running} of {fleet.target} replicas running" + (f" ({others})" if others else "")
    return status, body


def read_fleet(app_name: str, deployment: str, target: int) -> FleetState | None:
    """The deployment's replica states from Ray Serve's controller; ``None`` when it cannot say."""
    from ray import serve

    try:
        app = serve.status().applications.get(app_name)
        states = app.deployments[deployment].replica_states if app is not None else None
    except Exception:  # noqa: BLE001 - the controller is restarting: report the engine alone
        logger.debug("serve.status() failed", exc_info=True)
        return None
    if states is None:
        return None
    return FleetState(target, {str(getattr(k, "value", k)): int(v) for k, v in states.items()})


class FleetWatch:
    """The fleet of the replica this runs in, read at most once per ``refresh_s``.

    Args:
        target: ``serve.num_replicas``.
        refresh_s: How long a reading is reused.
    """

    def __init__(self, target: int, refresh_s: float = 1.0):
        self.target = target
        self.refresh_s = refresh_s
        self._last: FleetState | None = None
        self._at = float("-inf")

    async def current(self) -> FleetState | None:
        """The fleet now (from the controller, or a reading younger than ``refresh_s``)."""
        if time.monotonic() - self._at < self.refresh_s:
            return self._last
        from ray import serve

        context = serve.get_replica_context()
        self._last = await asyncio.to_thread(read_fleet, context.app_name, context.deployment, self.target)
        self._at = time.monotonic()
        return self._last
