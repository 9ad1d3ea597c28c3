"""A pool of judge replicas on Ray, with restarts of dead replicas and a per-call deadline.

Each replica is ``ranks_per_replica`` Ray actors (its tensor-parallel ranks). An actor is a
:class:`WorkerHost`, a thin shell that builds a plain engine worker class (the logic lives there
and stays testable without Ray) and forwards method calls to it. Every rank of a replica gets
the same call in the same order, and rank 0's result is the replica's.

:meth:`ReplicaPool.run` hands chunks of work to replicas from a shared queue, largest first,
with at most ``max_inflight`` chunks queued per replica, so the work is balanced by tokens and a
slow replica simply takes fewer chunks. ``ray.wait`` with the remaining time drives the loop:

- an actor that dies during a call (``RayActorError``, ``WorkerCrashedError``) takes its whole
  replica down: every rank is killed, its unfinished chunks go back to the queue for the other
  replicas, and the replica is recreated after a back-off, when the restart budget allows
  (:mod:`nemo_genrm.judges.restart_budget`: ``max_restarts`` at once, refilled over time,
  counted in ``restarts``). With no replica alive and none due back before the deadline, the
  remaining chunks end as ``judge_error``;
- at the deadline (``step_timeout_s`` from the start of the call, or the step's own deadline
  when it is earlier: :mod:`nemo_genrm.deadline`) the unfinished chunks end as ``timeout`` and
  every replica still busy is killed and replaced at once (its start runs in the background
  and the next call queues behind it), so its stuck work is cancelled and the next step does
  not wait on it. A replacement is not a crash: it spends no restart
  (``deadline_exceeded`` and ``replacements`` count them);
- a worker that raises ends its chunk as ``judge_error`` (logged); no exception leaves ``run``
  for a failed worker;
- when no replica has been alive for longer than ``unavailable_grace_s``, ``run`` raises
  :class:`~nemo_genrm.errors.JudgeUnavailableError`: the judge is gone, and training stops
  instead of training on zero rewards.

At start-up every actor must be up within ``fault_tolerance.startup_timeout_s`` (an actor that
cannot be scheduled, or whose worker process cannot start, would otherwise keep Ray retrying for
many minutes); :class:`JudgeStartupError` then names each late actor and what Ray reports.
Actors run on the driver's interpreter (:mod:`nemo_genrm.ray_env`).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import RayActorError, WorkerCrashedError

from nemo_genrm.config import FaultToleranceConfig
from nemo_genrm.deadline import deadline_within
from nemo_genrm.errors import TIMEOUT, JudgeUnavailableError
from nemo_genrm.judges.base import Placement, ReplicaPlacement
from nemo_genrm.judges.ray_hosts import (
    JudgeStartupError,
    RemoteWorkerHost,
    WorkerSpec,
    check_placement,
    describe_pending_actor,
)
from nemo_genrm.judges.restart_budget import Availability, RestartBudget
from nemo_genrm.judges.results import JUDGE_ERROR
from nemo_genrm.ray_env import actor_options

logger = logging.getLogger(__name__)

_DEATH = (RayActorError, WorkerCrashedError)


@dataclass
class _Replica:
    index: int
    placement: ReplicaPlacement
    hosts: list = field(default_factory=list)
    started: list = field(default_factory=list)
    starting: set = field(default_factory=set)  # start refs not finished yet
    alive: bool = True
    inflight: int = 0
    chunks_done: int = 0
    crashes: int = 0  # in a row, for the back-off; reset when it finishes a chunk
    up_since: float | None = None  # when its start finished
    relaunch_at: float | None = None  # down, to be restarted then (budget allowing)
    budget_logged: bool = False


@dataclass
class _Call:
    chunk: int
    replica: _Replica
    refs: list
    waiting: set
    value: Any = None


class ReplicaPool:
    """Judge replicas on Ray (see the module docstring).

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
        check_placement(placement, spec.bundles_per_replica or spec.ranks_per_replica)
        self.spec = spec
        self.fault_tolerance = fault_tolerance
        self.max_inflight = max_inflight
        self.restarts = 0  # crashed replicas restarted (spends the budget)
        self.replacements = 0  # replicas replaced after a deadline (spends nothing)
        self.deadline_exceeded = 0  # calls that passed their deadline
        self.unavailable_calls = 0  # calls that found no replica alive
        self.asleep = False
        self._events: Any = None  # the counters of the run under way (``run(events=...)``)
        ft = fault_tolerance
        self.budget = RestartBudget(ft.max_restarts, ft.restart_budget_refill_s, ft.restart_backoff_s,
                                    ft.restart_backoff_max_s, time.monotonic())
        self.availability = Availability(ft.unavailable_grace_s)
        self._replicas = [_Replica(i, rep) for i, rep in enumerate(placement.replicas)]
        for replica in self._replicas:
            self._launch(replica)
        try:
            self._await_actors(fault_tolerance.startup_timeout_s)
            ray.get([ref for replica in self._replicas for ref in replica.started])
        except Exception as exc:
            self.shutdown()
            if isinstance(exc, JudgeStartupError):
                raise
            raise RuntimeError(f"judge workers failed to start: {exc}") from exc
        for replica in self._replicas:
            replica.starting.clear()
            replica.up_since = time.monotonic()
        logger.info("Started %d judge replica(s) x %d rank(s)", len(self._replicas),
                    spec.ranks_per_replica)

    def _await_actors(self, timeout_s: float) -> None:
        """Wait until every rank's actor process is up (model loading not included).

        Raises:
            JudgeStartupError: An actor failed to start, or was not up within ``timeout_s``
                (not schedulable, or its worker process cannot start); says which and why.
        """
        ready = {
            host.__ray_ready__.remote(): (replica, rank, host)
            for replica in self._replicas
            for rank, host in enumerate(replica.hosts)
        }
        done, pending = ray.wait(list(ready), num_returns=len(ready), timeout=timeout_s)
        problems = []
        for ref in done:
            try:
                ray.get(ref)
            except Exception as exc:
                replica, rank, _ = ready[ref]
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                problems.append(f"replica {replica.index} rank {rank}: Ray reported {type(exc).__name__}: {first}")
        for ref in pending:
            replica, rank, host = ready[ref]
            problems.append(
                f"replica {replica.index} rank {rank}: not up after {timeout_s:.0f} s "
                f"(fault_tolerance.startup_timeout_s): {describe_pending_actor(host, self._options(replica, rank))}"
            )
        if problems:
            raise JudgeStartupError(problems)

    def _options(self, replica: _Replica, rank: int) -> dict[str, Any]:
        return actor_options(self.spec.options_for(rank, replica.placement))

    # --------------------------------------------------------------------- replica lifecycle
    def _launch(self, replica: _Replica) -> None:
        """Create the replica's actors; their start runs in the background."""
        spec, rep = self.spec, replica.placement
        hosts = []
        for rank in range(spec.ranks_per_replica):
            threads = max(1, int(rep.num_cpus))
            hosts.append(RemoteWorkerHost.options(**self._options(replica, rank)).remote(threads))
        address = hosts[0].address.remote() if spec.needs_address else None
        replica.hosts = hosts
        replica.started = [
            host.start.remote(spec.worker_cls, spec.kwargs_for(rank, rep), address)
            for rank, host in enumerate(hosts)
        ]
        replica.starting = set(replica.started)
        if self.asleep:  # a judge asleep stays asleep after a restart
            for host in hosts:
                host.call.remote("sleep")
        replica.alive, replica.inflight, replica.relaunch_at, replica.up_since = True, 0, None, None

    def _kill(self, replica: _Replica) -> None:
        for host in replica.hosts:
            try:
                ray.kill(host, no_restart=True)
            except Exception:  # already gone
                pass
        replica.hosts, replica.started, replica.starting, replica.alive = [], [], set(), False

    def _restart(self, replica: _Replica, why: str, *, crash: bool = True) -> None:
        """Kill every rank of ``replica`` and bring it back.

        A replica stuck past a deadline (``crash=False``) is replaced at once and spends no
        restart; a crashed one comes back after its back-off, when the budget holds a restart.
        """
        self._kill(replica)
        now = time.monotonic()
        if not crash:
            self.replacements += 1  # a pool fact, not a call's: no per-run counter
            logger.warning("Replacing judge replica %d (%s)", replica.index, why)
            self._launch(replica)
            return
        replica.crashes += 1
        replica.relaunch_at = now + self.budget.backoff(replica.crashes)
        replica.budget_logged = False
        logger.warning("Judge replica %d is down (%s, crash %d in a row); restart in %.1f s",
                       replica.index, why, replica.crashes, replica.relaunch_at - now)
        self._revive(now, why)

    def _revive(self, now: float, why: str = "") -> None:
        """Restart the down replicas whose back-off is over, as far as the budget allows."""
        for replica in self._replicas:
            if replica.alive or replica.relaunch_at is None or replica.relaunch_at > now:
                continue
            if self.budget.take(now):
                self._count("restarts")
                logger.warning("Restarting judge replica %d; restart %d (%.1f left in the budget)",
                               replica.index, self.restarts, self.budget.available(now))
                self._launch(replica)
                continue
            replica.relaunch_at = self.budget.next_refill(now)
            if not replica.budget_logged:
                replica.budget_logged = True
                when = ("never (restart_budget_refill_s is 0)" if replica.relaunch_at is None
                        else f"in {replica.relaunch_at - now:.0f} s")
                logger.error("Judge replica %d stays down: the restart budget (%d) is spent; next restart %s",
                             replica.index, self.fault_tolerance.max_restarts, when)
        self.availability.update(self.num_alive, now, why)

    def _next_relaunch(self) -> float | None:
        """The earliest time a down replica is due back, if any."""
        due = [r.relaunch_at for r in self._replicas if not r.alive and r.relaunch_at is not None]
        return min(due) if due else None

    def check_available(self) -> None:
        """Restart what is due, then raise if the judge has been down past its grace period.

        Raises:
            JudgeUnavailableError: No replica has been alive for longer than
                ``fault_tolerance.unavailable_grace_s``.
        """
        now = time.monotonic()
        self._revive(now)
        if self.availability.gone(now):
            avail = self.availability
            raise JudgeUnavailableError(
                f"{avail.why}; no judge replica alive past fault_tolerance.unavailable_grace_s "
                f"({avail.grace_s:g} s), {self.restarts} restart(s) spent", avail.down_for(now))

    def actors(self) -> list[list[Any]]:
        """The actor handles of each replica, rank order (for inspection and tests)."""
        return [list(replica.hosts) for replica in self._replicas]

    def chunks_done(self) -> list[int]:
        """Chunks each replica has finished so far (how the work was spread)."""
        return [replica.chunks_done for replica in self._replicas]

    def _poll_start(self, replica: _Replica) -> str | None:
        """Move finished start calls out of ``replica.starting``; a reason if one failed."""
        if not replica.starting:
            return None
        refs = list(replica.starting)
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in done:
            replica.starting.discard(ref)
            try:
                ray.get(ref)
            except Exception as exc:
                return f"start failed: {type(exc).__name__}"
        if not replica.starting:
            replica.up_since = time.monotonic()
        return None

    @property
    def num_alive(self) -> int:
        """Replicas currently able to take work."""
        return sum(replica.alive for replica in self._replicas)

    # ------------------------------------------------------------------------------- calling
    def _count(self, name: str) -> None:
        """Add one to the pool's counter ``name`` and to the run's own, during a run."""
        setattr(self, name, getattr(self, name) + 1)
        if self._events is not None:
            setattr(self._events, name, getattr(self._events, name) + 1)

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
                self._restart(replica, failure)
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
        except _DEATH as exc:
            self._replica_failed(call.replica, type(exc).__name__, pending, active, by_ref)
            return
        except Exception as exc:
            logger.error("Judge replica %d failed on a chunk: %s", call.replica.index, exc)
            self._drop(call, active, by_ref)
            results[call.chunk] = (None, JUDGE_ERROR)
            if len(call.replica.hosts) > 1:  # ranks may now be out of step in their collectives
                self._replica_failed(call.replica, "a rank raised", pending, active, by_ref)
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

    def _replica_failed(self, replica: _Replica, why: str, pending, active, by_ref) -> None:
        """Requeue the replica's unfinished chunks (front of the queue) and restart it."""
        lost = [call for call in active.values() if call.replica is replica]
        for call in lost:
            self._drop(call, active, by_ref)
            pending.appendleft(call.chunk)
        logger.warning("Judge replica %d failed (%s); retrying %d chunk(s)", replica.index, why,
                       len(lost))
        self._restart(replica, why)

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
        logger.error("Judge call passed its deadline (step_timeout_s %.1f s): %d chunk(s) timed out",
                     self.fault_tolerance.step_timeout_s, len(active) + len(pending))
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
                self._restart(replica, f"{method} failed: {type(exc).__name__}")

    def shutdown(self) -> None:
        """Kill every actor; safe to call twice."""
        for replica in self._replicas:
            self._kill(replica)
