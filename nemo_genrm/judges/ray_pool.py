"""Judge calls over the replicas on Ray: dispatch, order, and a per-call deadline.

:meth:`ReplicaPool.run` hands chunks of work to replicas from a shared queue, largest first,
with at most ``max_inflight`` chunks queued per replica, so the work is balanced by tokens and a
slow replica simply takes fewer chunks. Every rank of a replica gets the same call in the same
order, and rank 0's result is the replica's. ``ray.wait`` with the remaining time drives the
loop (the replicas' own lifecycle, restarts and node losses are :mod:`nemo_genrm.judges.replica_set`'s):

- an actor that dies during a call takes its whole replica down: its unfinished chunks go back
  to the queue for the other replicas, and the replica is brought back (a crash spends a
  restart, a node lost with it does not). With no replica alive and none due back before the
  deadline, the remaining chunks end as ``judge_error``;
- at the deadline (``step_timeout_s`` from the start of the call, or the step's own deadline
  when it is earlier: :mod:`nemo_genrm.judges.deadline`) the unfinished chunks end as ``timeout`` and
  every replica still busy is killed and replaced at once (its start runs in the background
  and the next call queues behind it), so its stuck work is cancelled and the next step does
  not wait on it. A replacement is not a crash: it spends no restart
  (``deadline_exceeded`` and ``replacements`` count them);
- a worker that raises ends its chunk as ``judge_error`` (logged); no exception leaves ``run``
  for a failed worker;
- when no replica has been alive for longer than ``unavailable_grace_s``, ``run`` raises
  :class:`~nemo_genrm.errors.JudgeUnavailableError`: the judge is gone, and training stops
  instead of training on zero rewards.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ray

from nemo_genrm.config import FaultToleranceConfig
from nemo_genrm.errors import TIMEOUT
from nemo_genrm.judges.base import Placement
from nemo_genrm.judges.deadline import deadline_within
from nemo_genrm.judges.ray_hosts import JudgeStartupError, WorkerSpec
from nemo_genrm.judges.replica_set import DEATH, Failure, Replica, ReplicaSet
from nemo_genrm.judges.results import JUDGE_ERROR

__all__ = ["JudgeStartupError", "ReplicaPool"]

logger = logging.getLogger(__name__)


@dataclass
class _Call:
    chunk: int
    replica: Replica
    refs: list
    waiting: set
    value: Any = None


class ReplicaPool(ReplicaSet):
    """Judge replicas on Ray that take calls (see the module docstring).

    Args:
        spec: What to start per rank.
        placement: Where each replica runs.
        fault_tolerance: Restart budget and call deadline.
        max_inflight: Chunks queued per replica at once (2 hides the round trip).

    Raises:
        ConfigError: If the placement does not match the ranks.
        JudgeStartupError: If an actor is not up within ``fault_tolerance.startup_timeout_s``
            (cannot be scheduled, or its worker process cannot start) or Ray failed to create it.
        RuntimeError: If a worker fails to build its engine (bad model path, out of memory...).
    """

    def __init__(
        self,
        spec: WorkerSpec,
        placement: Placement,
        fault_tolerance: FaultToleranceConfig,
        *,
        max_inflight: int = 2,
    ):
        self.max_inflight = max_inflight
        super().__init__(spec, placement, fault_tolerance)

    def run(
        self, method: str, payloads: Sequence[tuple], costs: Sequence[int], events: Any = None
    ) -> list[tuple[Any, str | None]]:
        """Run ``worker.method(*payload)`` for every chunk over the replicas.

        Args:
            method: Worker method name.
            payloads: One argument tuple per chunk.
            costs: Work estimate per chunk (tokens); big chunks are handed out first.
            events: An object with ``restarts``, ``deadline_exceeded`` and ``unavailable_calls``
                counters (a ``JudgeStats``) this run adds its own to.

        Returns:
            ``(value, None)`` or ``(None, error)`` per chunk, in chunk order; ``error`` is
            ``judge_error`` or ``timeout``.
        """
        with self.lock:
            self.take_between_calls(events)
            self._events = events
            try:
                return self._run(method, payloads, costs)
            finally:
                self._events = None

    def _run(self, method: str, payloads: Sequence[tuple], costs: Sequence[int]) -> list[tuple[Any, str | None]]:
        deadline = deadline_within(self.fault_tolerance.step_timeout_s)
        for replica in self._replicas:  # starts that finished since the last call
            failure = self._poll_start(replica) if replica.alive else None
            if failure:
                self._restart(replica, failure.why, node_lost=failure.node_lost)
        self.check_available()
        began = time.monotonic()
        results: list[tuple[Any, str | None]] = [(None, JUDGE_ERROR)] * len(payloads)
        pending = deque(sorted(range(len(payloads)), key=lambda c: -costs[c]))
        active: dict[int, _Call] = {}
        by_ref: dict[Any, _Call] = {}
        while pending or active:
            now = time.monotonic()
            if now >= deadline:
                self._expire(pending, active, results, began)
                break
            self._revive(now)
            self._dispatch(method, payloads, pending, active, by_ref)
            relaunch = self._next_relaunch()
            starting = {ref: r for r in self._replicas if r.alive for ref in r.starting}
            if not active and not starting:
                if relaunch is not None and relaunch < deadline:  # a replica is due back in time
                    time.sleep(max(0.0, relaunch - now))
                    continue
                self._count("unavailable_calls")
                logger.error("No judge replica is alive: %d chunk(s) end as %s", len(pending), JUDGE_ERROR)
                self.check_available()
                break
            wake = deadline if relaunch is None else min(deadline, relaunch)
            ready, _ = ray.wait([*by_ref, *starting], num_returns=1, timeout=max(0.0, wake - now))
            for ref in ready:
                if ref in starting:  # a (re)started replica finished loading, or failed to
                    failure = self._poll_start(starting[ref])
                    if failure:
                        self._replica_failed(starting[ref], failure, pending, active, by_ref)
                    continue
                call = by_ref.pop(ref, None)
                if call is not None:
                    self._collect(ref, call, pending, active, by_ref, results)
        return results

    def _dispatch(self, method, payloads, pending, active, by_ref) -> None:
        """Hand queued chunks to started replicas, least loaded first.

        A replica still (re)starting gets no work: the chunks wait here until it is up, so a
        call that times out meanwhile leaves nothing queued on it to run later (Ray cannot
        cancel a task queued on an actor that is still being created without stalling the
        actor's later tasks).
        """
        usable = [r for r in self._replicas if r.alive and not r.starting]
        for level in range(1, self.max_inflight + 1):
            for replica in usable:
                if not pending:
                    return
                if replica.inflight < level:
                    chunk = pending.popleft()
                    args = ray.put(payloads[chunk]) if len(replica.hosts) > 1 else payloads[chunk]
                    refs = [host.call.remote(method, args) for host in replica.hosts]
                    call = _Call(chunk, replica, refs, set(refs))
                    active[chunk] = call
                    by_ref.update({ref: call for ref in refs})
                    replica.inflight += 1

    def _collect(self, ref, call: _Call, pending, active, by_ref, results) -> None:
        """Take one finished rank result; finish the chunk when every rank is done."""
        try:
            value = ray.get(ref)
        except DEATH as exc:
            failure = Failure(type(exc).__name__, self._lost_with_node(call.replica, exc))
            self._replica_failed(call.replica, failure, pending, active, by_ref)
            return
        except Exception as exc:
            logger.error("Judge replica %d failed on a chunk: %s", call.replica.index, exc)
            self._drop(call, active, by_ref)
            results[call.chunk] = (None, JUDGE_ERROR)
            if len(call.replica.hosts) > 1:  # ranks may now be out of step in their collectives
                self._replica_failed(call.replica, Failure("a rank raised"), pending, active, by_ref)
            return
        if ref is call.refs[0]:
            call.value = value
        call.waiting.discard(ref)
        if not call.waiting:
            self._drop(call, active, by_ref)
            results[call.chunk] = (call.value, None)
            call.replica.chunks_done += 1
            call.replica.crashes = 0

    def _drop(self, call: _Call, active, by_ref) -> None:
        for ref in call.refs:
            by_ref.pop(ref, None)
        if active.pop(call.chunk, None) is not None:
            call.replica.inflight -= 1

    def _replica_failed(self, replica: Replica, failure: Failure, pending, active, by_ref) -> None:
        """Requeue the replica's unfinished chunks (front of the queue) and restart it."""
        lost = [call for call in active.values() if call.replica is replica]
        for call in lost:
            self._drop(call, active, by_ref)
            pending.appendleft(call.chunk)
        logger.warning("Judge replica %d failed (%s); retrying %d chunk(s)", replica.index, failure.why, len(lost))
        self._restart(replica, failure.why, node_lost=failure.node_lost)

    def _expire(self, pending, active, results, began: float) -> None:
        """Deadline: unfinished chunks end as ``timeout``; their work is cancelled.

        A replica that was up when the call began and is still busy is stuck or too slow: it is
        killed and replaced (not a crash, no restart spent), which ends its work. A replica that
        came up during the call had less than the whole deadline for its chunks: it is left to
        finish them (the next call replaces it if it is still busy then), so a deadline shorter
        than a start plus one chunk cannot keep a replica from ever coming up.
        """
        busy = {
            id(call.replica): call.replica
            for call in active.values()
            if call.replica.up_since is not None and call.replica.up_since <= began
        }
        for chunk in [*active, *pending]:
            results[chunk] = (None, TIMEOUT)
        self._count("deadline_exceeded")
        logger.error(
            "Judge call passed its deadline (step_timeout_s %.1f s): %d chunk(s) timed out",
            self.fault_tolerance.step_timeout_s,
            len(active) + len(pending),
        )
        for call in list(active.values()):
            call.replica.inflight -= 1
        active.clear()
        pending.clear()
        for replica in busy.values():
            self._restart(replica, "deadline passed", crash=False)

    def broadcast(self, method: str, args: tuple = ()) -> None:
        """Run ``method`` on every rank of every live replica and wait (sleep, wake).

        A replica that dies is restarted, one that misses the deadline replaced, as in :meth:`run`.
        """
        with self.lock:
            self._broadcast(method, args)

    def _broadcast(self, method: str, args: tuple) -> None:
        deadline = deadline_within(self.fault_tolerance.step_timeout_s)
        calls = {
            ref: replica
            for replica in self._replicas
            if replica.alive
            for ref in [host.call.remote(method, args) for host in replica.hosts]
        }
        while calls:
            remaining = deadline - time.monotonic()
            ready, _ = ray.wait(list(calls), num_returns=1, timeout=max(remaining, 0))
            if not ready:  # a replica still loading runs the call once it is up
                for replica in {id(r): r for r in calls.values()}.values():
                    if self._poll_start(replica) is None and not replica.starting:
                        self._restart(replica, f"{method} passed the deadline", crash=False)
                return
            replica = calls.pop(ready[0])
            try:
                ray.get(ready[0])
            except Exception as exc:
                for ref in [r for r, rep in calls.items() if rep is replica]:
                    calls.pop(ref)
                self._restart(
                    replica, f"{method} failed: {type(exc).__name__}", node_lost=self._lost_with_node(replica, exc)
                )
