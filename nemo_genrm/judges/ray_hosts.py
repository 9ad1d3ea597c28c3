"""What a judge replica is made of on Ray: the actor shell, its options, and start-up checks.

:class:`WorkerHost` is the body of every judge worker actor: a thin shell that builds a plain
engine worker class (the logic lives there and stays testable without Ray) and forwards method
calls to it. :class:`WorkerSpec` says what a :class:`~nemo_genrm.judges.replica_pool.ReplicaPool`
starts per rank; :func:`check_placement` and :class:`~nemo_genrm.errors.JudgeStartupError` (defined
with the package's other errors, importable from here too) reject layouts and actors that cannot
start, saying why (:func:`describe_pending_actor`).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from nemo_genrm.errors import ConfigError, JudgeStartupError  # noqa: F401 - JudgeStartupError: its old import path
from nemo_genrm.judges.base import Placement, ReplicaPlacement
from nemo_genrm.ray_runtime import actor_runtime_env


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
        exit_with_raylet()
        if num_threads > 0:
            import torch

            torch.set_num_threads(num_threads)

    def address(self) -> tuple[str, int]:
        """This node's IP and a free port on it (rank 0 of a tensor-parallel replica)."""
        return ray.util.get_node_ip_address(), free_port()

    def start(self, worker_cls: type, kwargs: dict, address: tuple[str, int] | None = None) -> str:
        """Build the worker; ``address`` (from rank 0) fills ``master_addr``/``master_port``.

        Returns:
            The id (hex) of the node this actor runs on, so the pool knows where its replicas are.
        """
        if address is not None:
            kwargs = {**kwargs, "master_addr": address[0], "master_port": address[1]}
        self._worker = worker_cls(**kwargs)
        return ray.get_runtime_context().get_node_id()

    def call(self, method: str, args: tuple = ()) -> Any:
        """Run ``worker.method(*args)``."""
        if self._worker is None:
            raise RuntimeError("the judge worker of this actor was not started")
        return getattr(self._worker, method)(*args)


RemoteWorkerHost = ray.remote(runtime_env=actor_runtime_env())(WorkerHost)

RAYLET_POLL_S = 0.5
"""How often a judge worker checks that its node's raylet lives."""


def exit_with_raylet(poll_s: float = RAYLET_POLL_S) -> threading.Thread | None:
    """End this worker process within ``poll_s`` of its raylet's death.

    Ray's own check lets a worker whose raylet was killed (its node lost, the raylet alone
    crashed) run on for about ten seconds, holding its GPU and answering calls already sent; a
    judge worker's memory and its calls belong to a node that is gone. A daemon thread checks
    the raylet (``RAY_RAYLET_PID``, which Ray sets for its workers) and exits the process when it
    is gone or a zombie. Nothing happens outside a Ray worker or without ``/proc``.

    Returns:
        The watching thread, or ``None`` when there is nothing to watch.
    """
    raylet = int(os.environ.get("RAY_RAYLET_PID", "0") or 0)
    if raylet <= 0 or not Path(f"/proc/{raylet}/stat").exists():
        return None

    def watch() -> None:
        while _process_alive(raylet):
            time.sleep(poll_s)
        os._exit(1)

    thread = threading.Thread(target=watch, name="exit-with-raylet", daemon=True)
    thread.start()
    return thread


def _process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


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
        torch_threads: Whether each actor sets torch's CPU threads to its CPU share (engines on
            torch); a worker that does not use torch skips importing it.
    """

    worker_cls: type
    ranks_per_replica: int
    kwargs_for: Callable[[int, ReplicaPlacement], dict]
    options_for: Callable[[int, ReplicaPlacement], dict] = default_actor_options
    needs_address: bool = False
    bundles_per_replica: int | None = None
    torch_threads: bool = True


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


def node_alive(node_id: str) -> bool:
    """Whether Ray's control store still reports node ``node_id`` (hex) alive."""
    return any(n.get("NodeID") == node_id and n.get("Alive") for n in ray.nodes())


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
