"""The replicas of a judge on Ray: start-up, restarts, node losses and availability.

Each replica is ``ranks_per_replica`` Ray actors (its tensor-parallel ranks). An actor is a
:class:`~nemo_genrm.judges.ray_hosts.WorkerHost`, a thin shell that builds a plain engine worker
class (the logic lives there and stays testable without Ray) and forwards method calls to it.
:class:`ReplicaSet` starts them and brings them back; :class:`~nemo_genrm.judges.ray_pool.ReplicaPool`
hands them work.

- At start-up every actor must be up within ``fault_tolerance.startup_timeout_s`` (an actor that
  cannot be scheduled, or whose worker process cannot start, would otherwise keep Ray retrying
  for many minutes); :class:`~nemo_genrm.judges.ray_hosts.JudgeStartupError` then names each late
  actor and what Ray reports. Each replica's node is recorded when it starts
  (:meth:`ReplicaSet.replica_nodes`).
- A crashed replica (an actor died: ``RayActorError``, ``WorkerCrashedError``) has every rank
  killed and is recreated after a back-off, when the restart budget allows
  (:mod:`nemo_genrm.judges.restart_budget`: ``max_restarts`` at once, refilled over time,
  counted in ``restarts``).
- A replica lost with its node (its actor unreachable, or on a node Ray reports dead: a machine
  gone from a multi-node cluster) is counted in ``node_losses`` (once per replica and node) and
  relaunched after its back-off without spending a restart: the replica did not fail, its
  machine did. Its actors go back into its placement-group bundle, which Ray reschedules on a
  live node that has room (a node that joins later included); until then the replica waits to
  start and gets no work.
- A replica stuck past a deadline is replaced at once; that is not a crash and spends nothing
  (``replacements``).
- None of this waits for a call: between calls a background thread
  (:meth:`ReplicaSet.maintain`, every :data:`MAINTAIN_S`) notices a replica whose node is gone
  or whose actor died, finishes starts, and relaunches replicas when their back-off is over, so a
  replica lost while training is idle (validation, checkpointing, a paused run) is running
  again, on a node that joined meanwhile, before the next step. Calls hold the replicas while
  they run; the thread waits for them. What it counts between calls is added to the next call's
  counters.
- When no replica has been alive for longer than ``unavailable_grace_s``,
  :meth:`ReplicaSet.check_available` raises :class:`~nemo_genrm.errors.JudgeUnavailableError`: the
  judge is gone, and training stops instead of training on zero rewards.

Actors run on the driver's interpreter (:mod:`nemo_genrm.ray_env`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, RayActorError, WorkerCrashedError

from nemo_genrm.config import FaultToleranceConfig
from nemo_genrm.errors import JudgeUnavailableError
from nemo_genrm.judges.base import Placement, ReplicaPlacement
from nemo_genrm.judges.ray_hosts import (
    JudgeStartupError,
    RemoteWorkerHost,
    WorkerSpec,
    check_placement,
    describe_pending_actor,
    node_alive,
)
from nemo_genrm.judges.restart_budget import Availability, RestartBudget
from nemo_genrm.ray_env import actor_options

logger = logging.getLogger(__name__)

DEATH = (RayActorError, WorkerCrashedError)
"""What Ray raises when an actor died (or became unreachable) under a call."""

MAINTAIN_S = 1.0
"""How often the replicas are looked after between calls."""


@dataclass
class Replica:
    """One replica's actors and state (the pool's bookkeeping)."""

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
    node_id: str | None = None  # where its rank 0 last started
    free_relaunch: bool = False  # lost with its node: its relaunch spends no restart
    lost_on: str | None = None  # the node it was last counted lost with


@dataclass(frozen=True)
class Failure:
    """Why a replica went down, and whether its node went with it."""

    why: str
    node_lost: bool = False


class ReplicaSet:
    """A judge's replicas on Ray and their lifecycle (see the module docstring).

    Args:
        spec: What to start per rank.
        placement: Where each replica runs.
        fault_tolerance: Restart budget, back-off and grace period.

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
    ):
        check_placement(placement, spec.bundles_per_replica or spec.ranks_per_replica)
        self.spec = spec
        self.fault_tolerance = fault_tolerance
        self.restarts = 0  # crashed replicas restarted (spends the budget)
        self.replacements = 0  # replicas replaced after a deadline (spends nothing)
        self.deadline_exceeded = 0  # calls that passed their deadline
        self.unavailable_calls = 0  # calls that found no replica alive
        self.node_losses = 0  # replicas lost with their node (relaunched without spending restarts)
        self.asleep = False
        self._events: Any = None  # the counters of the run under way (``run(events=...)``)
        self._between_calls: Counter[str] = Counter()  # counted by maintain(), for the next run
        self.lock = threading.RLock()  # a call, or one round of maintain(), holds the replicas
        self._stopping = threading.Event()
        ft = fault_tolerance
        self.budget = RestartBudget(
            ft.max_restarts,
            ft.restart_budget_refill_s,
            ft.restart_backoff_s,
            ft.restart_backoff_max_s,
            time.monotonic(),
        )
        self.availability = Availability(ft.unavailable_grace_s)
        self._replicas = [Replica(i, rep) for i, rep in enumerate(placement.replicas)]
        for replica in self._replicas:
            self._launch(replica)
        try:
            self._await_actors(fault_tolerance.startup_timeout_s)
            nodes = ray.get([replica.started[0] for replica in self._replicas])
            ray.get([ref for replica in self._replicas for ref in replica.started])
        except Exception as exc:
            self.shutdown()
            if isinstance(exc, JudgeStartupError):
                raise
            raise RuntimeError(f"judge workers failed to start: {exc}") from exc
        for replica, node in zip(self._replicas, nodes, strict=True):
            replica.starting.clear()
            replica.up_since = time.monotonic()
            replica.node_id = node
        logger.info("Started %d judge replica(s) x %d rank(s)", len(self._replicas), spec.ranks_per_replica)
        self._maintainer = threading.Thread(target=self._maintain_loop, name="judge-replicas", daemon=True)
        self._maintainer.start()

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

    def _options(self, replica: Replica, rank: int) -> dict[str, Any]:
        return actor_options(self.spec.options_for(rank, replica.placement))

    # --------------------------------------------------------------------- replica lifecycle
    def _launch(self, replica: Replica) -> None:
        """Create the replica's actors; their start runs in the background."""
        spec, rep = self.spec, replica.placement
        hosts = []
        for rank in range(spec.ranks_per_replica):
            threads = max(1, int(rep.num_cpus)) if spec.torch_threads else 0
            hosts.append(RemoteWorkerHost.options(**self._options(replica, rank)).remote(threads))
        address = hosts[0].address.remote() if spec.needs_address else None
        replica.hosts = hosts
        replica.started = [
            host.start.remote(spec.worker_cls, spec.kwargs_for(rank, rep), address) for rank, host in enumerate(hosts)
        ]
        replica.starting = set(replica.started)
        if self.asleep:  # a judge asleep stays asleep after a restart
            for host in hosts:
                host.call.remote("sleep")
        replica.alive, replica.inflight, replica.relaunch_at, replica.up_since = True, 0, None, None

    def _kill(self, replica: Replica) -> None:
        for host in replica.hosts:
            try:
                ray.kill(host, no_restart=True)
            except Exception:  # already gone
                pass
        replica.hosts, replica.started, replica.starting, replica.alive = [], [], set(), False

    def _restart(self, replica: Replica, why: str, *, crash: bool = True, node_lost: bool = False) -> None:
        """Kill every rank of ``replica`` and bring it back.

        A replica stuck past a deadline (``crash=False``) is replaced at once and spends no
        restart; a crashed one comes back after its back-off, when the budget holds a restart;
        one lost with its node (``node_lost``) comes back after its back-off without spending one.
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
        replica.free_relaunch = node_lost
        if node_lost and replica.lost_on != replica.node_id:
            replica.lost_on = replica.node_id
            self._count("node_losses")
            logger.warning(
                "Judge replica %d was lost with its node %s (%s); its work goes to the other "
                "replicas, and it is relaunched where Ray reschedules its placement",
                replica.index,
                (replica.node_id or "?")[:12],
                why,
            )
        logger.warning(
            "Judge replica %d is down (%s, crash %d in a row); restart in %.1f s",
            replica.index,
            why,
            replica.crashes,
            replica.relaunch_at - now,
        )
        self._revive(now, why)

    def _lost_with_node(self, replica: Replica, exc: BaseException) -> bool:
        """Whether ``replica`` died with its node rather than by itself.

        Unreachable actors (the node or its network is gone; Ray has not decided yet) and actors
        on a node Ray reports dead count as lost with the node.
        """
        if isinstance(exc, ActorUnavailableError):
            return True
        if not isinstance(exc, DEATH) or replica.node_id is None:
            return False
        try:
            return not node_alive(replica.node_id)
        except Exception:  # noqa: BLE001 - the control store is unreachable: say nothing
            return False

    def _revive(self, now: float, why: str = "") -> None:
        """Restart the down replicas whose back-off is over, as far as the budget allows."""
        for replica in self._replicas:
            if replica.alive or replica.relaunch_at is None or replica.relaunch_at > now:
                continue
            if replica.free_relaunch:
                logger.warning("Relaunching judge replica %d after its node was lost", replica.index)
                self._launch(replica)
                continue
            if self.budget.take(now):
                self._count("restarts")
                logger.warning(
                    "Restarting judge replica %d; restart %d (%.1f left in the budget)",
                    replica.index,
                    self.restarts,
                    self.budget.available(now),
                )
                self._launch(replica)
                continue
            replica.relaunch_at = self.budget.next_refill(now)
            if not replica.budget_logged:
                replica.budget_logged = True
                when = (
                    "never (restart_budget_refill_s is 0)"
                    if replica.relaunch_at is None
                    else f"in {replica.relaunch_at - now:.0f} s"
                )
                logger.error(
                    "Judge replica %d stays down: the restart budget (%d) is spent; next restart %s",
                    replica.index,
                    self.fault_tolerance.max_restarts,
                    when,
                )
        self.availability.update(self.num_alive, now, why)

    def _next_relaunch(self) -> float | None:
        """The earliest time a down replica is due back, if any."""
        due = [r.relaunch_at for r in self._replicas if not r.alive and r.relaunch_at is not None]
        return min(due) if due else None

    # ------------------------------------------------------------------------- between calls
    def _maintain_loop(self) -> None:
        while not self._stopping.wait(MAINTAIN_S):
            if not self.lock.acquire(blocking=False):
                continue  # a call holds the replicas and looks after them itself
            try:
                if not self._stopping.is_set():
                    self.maintain()
            except Exception:  # noqa: BLE001 - the control store briefly unreachable: next round
                logger.debug("looking after the judge replicas failed", exc_info=True)
            finally:
                self.lock.release()

    def maintain(self) -> None:
        """Look after the replicas without a call (the caller holds :attr:`lock`).

        Finishes starts, takes down a replica whose node Ray reports dead (lost with its node:
        no restart spent) or whose actor died (a crash), and relaunches the replicas whose
        back-off is over.
        """
        alive_nodes = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        for replica in self._replicas:
            if not replica.alive:
                continue
            failure = self._poll_start(replica) or (
                None if replica.starting else self._idle_failure(replica, alive_nodes)
            )
            if failure is not None:
                self._restart(replica, failure.why, node_lost=failure.node_lost)
        self._revive(time.monotonic())

    def _idle_failure(self, replica: Replica, alive_nodes: set[str]) -> Failure | None:
        """Why a started replica is gone though no call found out: its node, or a dead actor."""
        if replica.node_id is not None and replica.node_id not in alive_nodes:
            return Failure("its node is gone", node_lost=True)
        for host in replica.hosts:
            record = ray._private.state.actors(host._actor_id.hex())  # the GCS record, no dashboard
            if record and record.get("State") == "DEAD":
                return Failure("its actor died", node_lost=replica.node_id not in alive_nodes)
        return None

    def take_between_calls(self, events: Any) -> None:
        """Add what :meth:`maintain` counted since the last call to this call's ``events``."""
        if events is not None:
            for name, count in self._between_calls.items():
                setattr(events, name, getattr(events, name) + count)
        self._between_calls.clear()

    def check_available(self) -> None:
        """Restart what is due, then raise if the judge has been down past its grace period.

        Raises:
            JudgeUnavailableError: No replica has been alive for longer than
                ``fault_tolerance.unavailable_grace_s``.
        """
        with self.lock:
            now = time.monotonic()
            self._revive(now)
        if self.availability.gone(now):
            avail = self.availability
            raise JudgeUnavailableError(
                f"{avail.why}; no judge replica alive past fault_tolerance.unavailable_grace_s "
                f"({avail.grace_s:g} s), {self.restarts} restart(s) spent",
                avail.down_for(now),
            )

    def actors(self) -> list[list[Any]]:
        """The actor handles of each replica, rank order (for inspection and tests)."""
        return [list(replica.hosts) for replica in self._replicas]

    def chunks_done(self) -> list[int]:
        """Chunks each replica has finished so far (how the work was spread)."""
        return [replica.chunks_done for replica in self._replicas]

    def _poll_start(self, replica: Replica) -> Failure | None:
        """Move finished start calls out of ``replica.starting``; why, if one failed."""
        if not replica.starting:
            return None
        refs = list(replica.starting)
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in done:
            replica.starting.discard(ref)
            try:
                node = ray.get(ref)
            except Exception as exc:
                return Failure(f"start failed: {type(exc).__name__}", self._lost_with_node(replica, exc))
            if replica.started and ref == replica.started[0]:
                replica.node_id = node
        if not replica.starting:
            replica.up_since = time.monotonic()
        return None

    @property
    def num_alive(self) -> int:
        """Replicas currently able to take work, or starting to."""
        return sum(replica.alive for replica in self._replicas)

    @property
    def num_starting(self) -> int:
        """Replicas (re)starting: waiting for a node, or loading their engine."""
        return sum(replica.alive and bool(replica.starting) for replica in self._replicas)

    def replica_nodes(self) -> list[str | None]:
        """The node (hex id) of each replica that is up; ``None`` for one down or starting."""
        return [r.node_id if r.alive and not r.starting else None for r in self._replicas]

    def _count(self, name: str) -> None:
        """Add one to the pool's counter ``name`` and to the run's own, during a run."""
        setattr(self, name, getattr(self, name) + 1)
        if self._events is not None:
            setattr(self._events, name, getattr(self._events, name) + 1)
        else:
            self._between_calls[name] += 1

    def shutdown(self) -> None:
        """Stop looking after the replicas and kill every actor; safe to call twice."""
        self._stopping.set()
        maintainer = getattr(self, "_maintainer", None)
        if maintainer is not None and maintainer is not threading.current_thread():
            maintainer.join(timeout=30)
        for replica in self._replicas:
            self._kill(replica)
