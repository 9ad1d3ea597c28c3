"""A pool of judge replicas on Ray, with restarts of dead replicas and a per-call deadline.

Each replica is ``ranks_per_replica`` Ray actors (its tensor-parallel ranks). An actor is a
:class:`WorkerHost`, a thin shell that builds a plain engine worker class (the logic lives there
and stays testable without Ray) and forwards method calls to it. Every rank of a replica gets
the same call in the same order, and rank 0's result is the replica's.

:meth:`ReplicaPool.run` hands chunks of work to replicas from a shared queue, largest first,
with at most ``max_inflight`` chunks queued per replica, so the work is balanced by tokens and a
slow replica simply takes fewer chunks. ``ray.wait`` with the remaining time drives the loop:

- an actor that dies during a call (``RayActorError``, ``WorkerCrashedError``) takes its whole
  replica down: every rank is killed and the replica is recreated (counted in ``restarts``, up to
  ``max_restarts`` over the pool's life), and its unfinished chunks go back to the queue for the
  new replica or the others. With no replica left, the remaining chunks end as ``judge_error``;
- at the deadline (``step_timeout_s``) the unfinished chunks end as ``timeout``, and every
  replica still busy is killed and recreated (its start runs in the background and the next call
  queues behind it), so the next step does not wait on a stuck one;
- a worker that raises ends its chunk as ``judge_error`` (logged); no exception leaves ``run``
  for a failed worker.

At start-up every actor must be up within ``fault_tolerance.startup_timeout_s`` (an actor that
cannot be scheduled, or whose worker process cannot start, would otherwise keep Ray retrying for
many minutes); :class:`JudgeStartupError` then names each late actor and what Ray reports.
Actors run on the driver's interpreter (:mod:`nemo_genrm.ray_env`).
"""

from __future__ import annotations

import logging
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import RayActorError, WorkerCrashedError
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from nemo_genrm.config import FaultToleranceConfig
from nemo_genrm.judges.base import Placement, ReplicaPlacement
from nemo_genrm.errors import TIMEOUT, ConfigError
from nemo_genrm.judges.results import JUDGE_ERROR
from nemo_genrm.ray_env import actor_options, actor_runtime_env

logger = logging.getLogger(__name__)

_DEATH = (RayActorError, WorkerCrashedError)


def free_port() -> int:
    """A TCP port that is free on this node right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


class WorkerHost:
    """Body of one Ray actor: builds an engine worker and forwards calls to it.

    Args:
        num_threads: Torch CPU threads for this process (its CPU share); 0 leaves the default.
    """

    def __init__(self, num_threads: int = 0):
        self._worker: Any = None
        if num_threads > 0:
            import torch

            torch.set_num_threads(num_threads)

    def address(self) -> tuple[str, int]:
        """This node's IP and a free port on it (rank 0 of a tensor-parallel replica)."""
        return ray.util.get_node_ip_address(), free_port()

    def start(self, worker_cls: type, kwargs: dict, address: tuple[str, int] | None = None) -> bool:
        """Build the worker; ``address`` (from rank 0) fills ``master_addr``/``master_port``."""
        if address is not None:
            kwargs = {**kwargs, "master_addr": address[0], "master_port": address[1]}
        self._worker = worker_cls(**kwargs)
        return True

    def call(self, method: str, args: tuple = ()) -> Any:
        """Run ``worker.method(*args)``."""
        if self._worker is None:
            raise RuntimeError("the judge worker of this actor was not started")
        return getattr(self._worker, method)(*args)


_RemoteHost = ray.remote(runtime_env=actor_runtime_env())(WorkerHost)


def default_actor_options(rank: int, replica: ReplicaPlacement) -> dict[str, Any]:
    """Ray options of rank ``rank``: its resources and, with a placement group, its bundle."""
    options: dict[str, Any] = {"num_cpus": replica.num_cpus, "num_gpus": replica.num_gpus}
    if replica.placement_group is not None:
        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            placement_group=replica.placement_group,
            placement_group_bundle_index=replica.bundle_indices[rank],
            placement_group_capture_child_tasks=True,
        )
    return options


@dataclass(frozen=True)
class WorkerSpec:
    """What the pool starts for each rank of each replica.

    Attributes:
        worker_cls: The plain engine worker class (built inside the actor).
        ranks_per_replica: Actors per replica (tensor parallel ranks; 1 when the engine
            shards by itself, as vLLM does).
        kwargs_for: ``(rank, replica placement) -> worker constructor kwargs``.
        options_for: ``(rank, replica placement) -> Ray actor options``.
        needs_address: Whether ranks get rank 0's ``master_addr``/``master_port``.
        bundles_per_replica: Bundle indices a replica with a placement group must name
            (default: one per rank; vLLM with tensor parallelism names one per GPU).
    """

    worker_cls: type
    ranks_per_replica: int
    kwargs_for: Callable[[int, ReplicaPlacement], dict]
    options_for: Callable[[int, ReplicaPlacement], dict] = default_actor_options
    needs_address: bool = False
    bundles_per_replica: int | None = None


class JudgeStartupError(RuntimeError):
    """Judge worker actors that did not start; ``problems`` says which and why."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("judge workers did not start:\n  - " + "\n  - ".join(self.problems))


def describe_pending_actor(handle: Any, options: dict[str, Any]) -> str:
    """Why an actor may still be pending: Ray's state for it and what it asks of the cluster.

    Args:
        handle: The actor handle.
        options: The options it was created with.

    Returns:
        One line for an error message.
    """
    state = "unknown"
    try:  # the GCS record; the state API would need the dashboard
        record = ray._private.state.actors(handle._actor_id.hex())
        state = record.get("State", state)
    except Exception:  # noqa: BLE001 - diagnostics only
        pass
    wanted = {"CPU": options.get("num_cpus") or 0, "GPU": options.get("num_gpus") or 0}
    total, free = ray.cluster_resources(), ray.available_resources()
    short = [k for k, v in wanted.items() if v and total.get(k, 0.0) < v]
    where = "in its placement group bundle" if options.get("scheduling_strategy") is not None else "on the cluster"
    if short:
        why = f"the cluster has only {', '.join(f'{total.get(k, 0.0):g} {k}' for k in short)}, it never fits"
    elif state == "PENDING_CREATION":
        why = (
            "its resources fit, so its worker process may be failing to start: check its runtime_env "
            f"(py_executable {options.get('runtime_env', {}).get('py_executable')!r}) and the raylet log, "
            "or resources held by other actors"
        )
    else:
        why = "see the Ray logs"
    return (
        f"Ray state {state}; asks for {wanted} {where} (available now: CPU {free.get('CPU', 0.0):g}, "
        f"GPU {free.get('GPU', 0.0):g}); {why}"
    )


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


@dataclass
class _Call:
    chunk: int
    replica: _Replica
    refs: list
    waiting: set
    value: Any = None


def check_placement(placement: Placement, bundles_per_replica: int) -> None:
    """Reject a placement whose bundles do not match the ranks.

    Raises:
        ConfigError: If there is no replica or a replica with a placement group does not name
            one bundle per rank.
    """
    problems = []
    if placement.num_replicas < 1:
        problems.append("the placement has no replica")
    for i, rep in enumerate(placement.replicas):
        if rep.placement_group is not None and len(rep.bundle_indices) != bundles_per_replica:
            problems.append(
                f"replica {i} names {len(rep.bundle_indices)} bundle(s) but needs "
                f"{bundles_per_replica}: give one bundle index per tensor-parallel rank"
            )
    if problems:
        raise ConfigError(problems)


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
        self.restarts = 0
        self.asleep = False
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
            hosts.append(_RemoteHost.options(**self._options(replica, rank)).remote(threads))
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
        replica.alive, replica.inflight = True, 0

    def _kill(self, replica: _Replica) -> None:
        for host in replica.hosts:
            try:
                ray.kill(host, no_restart=True)
            except Exception:  # already gone
                pass
        replica.hosts, replica.started, replica.starting, replica.alive = [], [], set(), False

    def _restart(self, replica: _Replica, why: str) -> None:
        """Kill every rank of ``replica``; recreate it if the restart budget allows."""
        self._kill(replica)
        if self.restarts >= self.fault_tolerance.max_restarts:
            logger.error("Judge replica %d is down (%s) and the %d restart(s) are spent",
                         replica.index, why, self.fault_tolerance.max_restarts)
            return
        self.restarts += 1
        logger.warning("Restarting judge replica %d (%s); restart %d of %d", replica.index, why,
                       self.restarts, self.fault_tolerance.max_restarts)
        self._launch(replica)

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
        return None

    @property
    def num_alive(self) -> int:
        """Replicas currently able to take work."""
        return sum(replica.alive for replica in self._replicas)

    # ------------------------------------------------------------------------------- calling
    def run(
        self, method: str, payloads: Sequence[tuple], costs: Sequence[int]
    ) -> list[tuple[Any, str | None]]:
        """Run ``worker.method(*payload)`` for every chunk over the replicas.

        Args:
            method: Worker method name.
            payloads: One argument tuple per chunk.
            costs: Work estimate per chunk (tokens); big chunks are handed out first.

        Returns:
            ``(value, None)`` or ``(None, error)`` per chunk, in chunk order; ``error`` is
            ``judge_error`` or ``timeout``.
        """
        deadline = time.monotonic() + self.fault_tolerance.step_timeout_s
        results: list[tuple[Any, str | None]] = [(None, JUDGE_ERROR)] * len(payloads)
        pending = deque(sorted(range(len(payloads)), key=lambda c: -costs[c]))
        active: dict[int, _Call] = {}
        by_ref: dict[Any, _Call] = {}
        while pending or active:
            self._dispatch(method, payloads, pending, active, by_ref)
            if not active:
                logger.error("No judge replica is alive: %d chunk(s) end as %s", len(pending),
                             JUDGE_ERROR)
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._expire(pending, active, results)
                break
            starting = {ref: r for r in self._replicas if r.alive for ref in r.starting}
            ready, _ = ray.wait([*by_ref, *starting], num_returns=1, timeout=remaining)
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
        """Hand queued chunks to live replicas, least loaded first.

        A replica still (re)starting gets work only when no started one can take it, so a
        restart does not hold chunks back while the other replicas are free.
        """
        usable = [r for r in self._replicas if r.alive and not r.starting]
        if not usable and not active:
            usable = [r for r in self._replicas if r.alive]  # queue behind the start
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

    def _expire(self, pending, active, results) -> None:
        """Deadline: unfinished chunks end as ``timeout``; busy replicas are recreated."""
        busy = {id(call.replica): call.replica for call in active.values()}
        for chunk in [*active, *pending]:
            results[chunk] = (None, TIMEOUT)
        logger.error("Judge call passed its %.1f s deadline: %d chunk(s) timed out",
                     self.fault_tolerance.step_timeout_s, len(active) + len(pending))
        active.clear()
        pending.clear()
        for replica in busy.values():
            self._restart(replica, "deadline passed")

    def broadcast(self, method: str, args: tuple = ()) -> None:
        """Run ``method`` on every rank of every live replica and wait (sleep, wake).

        A replica that dies or misses the deadline is restarted, as in :meth:`run`.
        """
        deadline = time.monotonic() + self.fault_tolerance.step_timeout_s
        calls = {
            ref: replica
            for replica in self._replicas
            if replica.alive
            for ref in [host.call.remote(method, args) for host in replica.hosts]
        }
        while calls:
            remaining = deadline - time.monotonic()
            ready, _ = ray.wait(list(calls), num_returns=1, timeout=max(remaining, 0))
            if not ready:
                for replica in {id(r): r for r in calls.values()}.values():
                    self._restart(replica, f"{method} passed the deadline")
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
