"""A multi-node Ray cluster on one machine, for tests and benchmarks of the judge past one node.

:class:`SimulatedCluster` starts Ray's own multi-node test cluster (``ray.cluster_utils.Cluster``):
a head node that runs no work (0 CPUs: the driver, Ray Serve's controller and proxy live
there) and worker nodes added by name, each a separate raylet with its own resources and labels,
which can be removed (its processes killed, as when a machine dies) and added again. The driver
process connects to it.

Losing a node is noticed by Ray's control store after its health checks fail; the head is
started with checks every ``health_check_period_ms`` and ``health_check_failure_threshold`` misses
(0.5 s and 4 by default here, about 2 s; a real cluster's defaults are about 3 s and 5), so a
test sees in seconds what a real cluster sees in tens of seconds. Calls to actors on a lost node
fail at once either way (the connection drops).

The cluster's own processes carry its session directory on their command line and its
workers are their children: before a node is removed and before the cluster shuts down, every
such process is noted, and :meth:`SimulatedCluster.shutdown` checks that none of them is left
(a raylet, an agent, a worker orphaned by its node's loss), kills by process id any that is,
and reports them; it runs even when a test fails (use it as a context manager or in a
fixture's ``finally``).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SimNode", "SimulatedCluster", "kill_actor"]

logger = logging.getLogger(__name__)


def kill_actor(actor: Any, timeout_s: float = 30.0) -> None:
    """Kill a Ray actor for good and return once it is dead.

    ``ray.kill`` only sends the kill: a call made right after it can still be served by the
    actor, so a test that means "the next call finds it dead" must wait for the death first.

    Raises:
        TimeoutError: The actor still answers after ``timeout_s``.
    """
    import ray

    ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=max(0.1, deadline - time.monotonic()))
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise TimeoutError(f"actor still alive {timeout_s:g} s after ray.kill")


@dataclass
class SimNode:
    """A worker node of the simulated cluster.

    Attributes:
        name: The test's name for it (``n1``...).
        node: Ray's handle of the started node (its processes).
        cpus: CPUs it declares.
        labels: Its labels.
        resources: Its custom resources.
    """

    name: str
    node: Any
    cpus: float
    labels: dict[str, str] = field(default_factory=dict)
    resources: dict[str, float] = field(default_factory=dict)

    @property
    def node_id(self) -> str:
        """Ray's node id (hex)."""
        return self.node.node_id


class SimulatedCluster:
    """Several raylets on this machine, one Ray cluster (see the module docstring).

    Args:
        health_check_period_ms: How often the head checks each node.
        health_check_failure_threshold: Missed checks after which a node is dead.
    """

    def __init__(self, *, health_check_period_ms: int = 500, health_check_failure_threshold: int = 4):
        self._system_config = {
            "health_check_period_ms": health_check_period_ms,
            "health_check_timeout_ms": max(health_check_period_ms, 1000),
            "health_check_failure_threshold": health_check_failure_threshold,
        }
        self._cluster: Any = None
        self._session_dir: str | None = None
        self.nodes: dict[str, SimNode] = {}
        self.removed: list[str] = []
        self._seen: dict[int, float] = {}  # pid -> create time, of every process noted

    # ---------------------------------------------------------------------------- lifecycle
    def start(self, *, attempts: int = 3) -> SimulatedCluster:
        """Start the head node and connect this process to it.

        Ray waits a fixed 30 s for a new raylet to register; a loaded machine occasionally
        misses that, so a failed start is cleaned up (its processes killed) and tried again.

        Args:
            attempts: Starts tried before the error is raised.

        Raises:
            RuntimeError: Ray is already initialised in this process (shut it down first).
        """
        import ray
        from ray.cluster_utils import Cluster

        from nemo_genrm.ray_env import job_runtime_env

        if ray.is_initialized():
            raise RuntimeError("Ray is already initialised in this process: ray.shutdown() first")
        for attempt in range(1, attempts + 1):
            try:
                self._cluster = self._spawning(
                    Cluster,
                    initialize_head=True,
                    head_node_args={"num_cpus": 0, "include_dashboard": False, "_system_config": self._system_config},
                )
                self._session_dir = self._cluster.head_node.get_session_dir_path()
                # The job's folder used in place (nemo_genrm.ray_env.job_runtime_env): under `uv run`
                # Ray would otherwise upload it, and every `uv run` worker of the job (Ray Serve's
                # controller and proxy) would build a new environment of several GB from it, racing
                # Ray's 60 s worker registration timeout on a loaded machine.
                ray.init(
                    address=self._cluster.address,
                    log_to_driver=False,
                    configure_logging=False,
                    runtime_env=job_runtime_env(),
                )
                return self
            except BaseException as exc:
                self.shutdown()
                if attempt == attempts or not isinstance(exc, Exception):
                    raise
                logger.warning("simulated cluster start %d failed (%s); trying again", attempt, exc)
        return self

    def add_node(
        self,
        name: str,
        *,
        cpus: float = 1,
        labels: dict[str, str] | None = None,
        resources: dict[str, float] | None = None,
        env_vars: dict[str, str] | None = None,
        wait: bool = True,
    ) -> SimNode:
        """Start a worker node (a raylet) with these resources and labels.

        Args:
            name: The test's name for it; a removed node's name may be used again.
            cpus: CPUs it declares (several nodes share this machine's real cores).
            labels: Node labels (``ray start --labels``).
            resources: Custom resources (``ray start --resources``).
            env_vars: Environment of the node's raylet, which its agents and workers inherit
                (a node whose Python environment differs from the others').
            wait: Return once the node is registered (else call :meth:`wait_for_nodes`).
        """
        if name in self.nodes:
            raise ValueError(f"a node named {name!r} is already running")
        for attempt in (1, 2):  # Ray's 30 s registration wait, missed once on a loaded machine
            try:
                node = self._spawning(
                    self._cluster.add_node,
                    num_cpus=cpus,
                    labels=dict(labels or {}),
                    resources=dict(resources or {}),
                    wait=wait,
                    **({"env_vars": dict(env_vars)} if env_vars else {}),
                )
                break
            except Exception as exc:
                if attempt == 2:
                    raise
                logger.warning("starting node %s failed (%s); trying again", name, exc)
        self.nodes[name] = SimNode(name, node, cpus, dict(labels or {}), dict(resources or {}))
        return self.nodes[name]

    def wait_for_nodes(self, timeout_s: float = 120.0) -> None:
        """Wait until every node added so far has registered."""
        self._cluster.wait_for_nodes(timeout=timeout_s)

    def remove_node(self, name: str, *, graceful: bool = False) -> None:
        """Kill a worker node's processes, as when its machine dies (``graceful=False``)."""
        sim = self.nodes.pop(name)
        self._note()  # its workers become orphans: note them while they are the raylet's children
        self._cluster.remove_node(sim.node, allow_graceful=graceful)
        self.removed.append(name)

    def name_of(self, node_id: str | None) -> str | None:
        """The name of the running node with this id (``head`` for the head; ``None`` if unknown)."""
        if node_id is None:
            return None
        if self._cluster is not None and self._cluster.head_node is not None:
            if self._cluster.head_node.node_id == node_id:
                return "head"
        return next((n.name for n in self.nodes.values() if n.node_id == node_id), None)

    def actor_nodes(self, class_name_part: str) -> list[str | None]:
        """Node names of the alive actors whose class name contains ``class_name_part``.

        Read from Ray's control store (no dashboard needed), e.g. ``ServeReplica:<app>`` for the
        replicas of a Ray Serve application.
        """
        from ray._private.state import actors

        return sorted(
            (self.name_of(a["Address"]["NodeID"]) or "?")
            for a in actors().values()
            if class_name_part in a["ActorClassName"] and a["State"] == "ALIVE"
        )

    def actor_pids(self, node: str, class_name_part: str) -> list[int]:
        """Process ids of the alive actors on node ``node`` whose class name contains the part."""
        from ray._private.state import actors

        node_id = self.nodes[node].node_id
        return sorted(
            int(a["Pid"])
            for a in actors().values()
            if class_name_part in a["ActorClassName"] and a["State"] == "ALIVE" and a["Address"]["NodeID"] == node_id
        )

    def raylet_pid(self, node: str) -> int:
        """The process id of node ``node``'s raylet (kill it alone to lose the node but not its workers)."""
        from ray._private import ray_constants

        return self.nodes[node].node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid

    def wait_dead(self, node_id: str, timeout_s: float = 60.0) -> float:
        """Wait until Ray reports node ``node_id`` dead; the seconds it took.

        Raises:
            TimeoutError: Still alive after ``timeout_s``.
        """
        import ray

        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            if not any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes()):
                return time.monotonic() - start
            time.sleep(0.1)
        raise TimeoutError(f"node {node_id[:12]} still alive after {timeout_s:g} s")

    # ----------------------------------------------------------------------------- shutdown
    def processes(self) -> list[Any]:
        """Processes of this cluster running now: its own (by session directory) and their children."""
        import psutil

        if self._session_dir is None:
            return []
        mine: dict[int, Any] = {}
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                cmdline = " ".join(proc.info["cmdline"] or ())
                if self._session_dir in cmdline and proc.pid != os.getpid():
                    mine[proc.pid] = proc
                    mine.update({child.pid: child for child in proc.children(recursive=True)})
            except (psutil.Error, TypeError):
                continue
        return list(mine.values())

    def _spawning(self, start: Any, *args: Any, **kwargs: Any) -> Any:
        """``start(*args, **kwargs)``, killing the processes it spawned if it raises.

        A node that fails to start (Ray's 30 s registration wait, missed on a loaded machine)
        raises before its handle is returned, so neither :meth:`shutdown` nor Ray itself knows
        its processes: they are this process's children that were not there before the call.
        A raylet left running would join the cluster later as an unexpected node.
        """
        import psutil

        me = psutil.Process()
        before = {p.pid for p in me.children(recursive=True)}
        try:
            return start(*args, **kwargs)
        except BaseException:
            spawned = [p for p in me.children(recursive=True) if p.pid not in before]
            for proc in spawned:
                try:
                    proc.kill()
                except psutil.Error:
                    continue
            psutil.wait_procs(spawned, timeout=10)
            if spawned:
                logger.warning("killed %d process(es) of a node that failed to start", len(spawned))
            raise

    def _note(self) -> None:
        """Remember every process of the cluster running now."""
        import psutil

        for proc in self.processes():
            try:
                self._seen[proc.pid] = proc.create_time()
            except psutil.Error:
                continue

    def _left(self) -> list[Any]:
        """The noted processes still running (the same process: same pid and create time)."""
        import psutil

        left = []
        for pid, created in self._seen.items():
            try:
                proc = psutil.Process(pid)
                if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                    left.append(proc)
            except psutil.Error:
                continue
        return left

    def shutdown(self, *, wait_s: float = 15.0) -> list[str]:
        """Disconnect, stop every node, and make sure none of the cluster's processes is left.

        Safe to call twice and after a failed start.

        Args:
            wait_s: How long the processes get to exit before they are killed.

        Returns:
            ``"pid name"`` of each process that had to be killed (empty when all exited).
        """
        import ray

        self._note()
        try:
            ray.shutdown()
        finally:
            if self._cluster is not None:
                try:
                    self._cluster.shutdown()
                except Exception:  # noqa: BLE001 - a node already gone: the sweep below cleans up
                    logger.warning("simulated cluster shutdown raised", exc_info=True)
                self._cluster = None
        self.nodes.clear()
        deadline = time.monotonic() + wait_s
        left = self._left()
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = self._left()
        killed = []
        for proc in left:
            try:
                name = proc.name()
                os.kill(proc.pid, signal.SIGKILL)
            except Exception:  # noqa: BLE001 - it exited meanwhile
                continue
            killed.append(f"{proc.pid} {name}")
        self._seen.clear()
        if killed:
            logger.warning("killed %d process(es) the simulated cluster left: %s", len(killed), killed)
        return killed

    def __enter__(self) -> SimulatedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
