"""Why a Ray worker process did not start: its own error, read from its node's Ray logs.

A Ray worker process that dies before it connects (an interpreter missing or broken on its node,
a ``uv run`` that cannot build its environment, an import that fails at start) leaves its actor
``PENDING_CREATION``: Ray notices the death only when its worker registration timeout (60 s)
passes, starts another, and gives up minutes later with "worker startup repeatedly failed ...
errors in the worker's Python environment setup", naming no cause. The cause is on the node: a
worker writes to its raylet's stderr (``raylet.err``) until it connects, and ``raylet.out``
says which worker process (pid, worker id) the raylet started.

:class:`WorkerStartWatch` reads the logs of the nodes whose raylet runs on this machine (the
driver's node; every node of a simulated cluster). It notes where each raylet's logs end when
it is created, and :meth:`WorkerStartWatch.failures` reports each worker process started since
then that exited without connecting (no ``python-core-worker-<worker id>_*.log``: a worker
writes it when it connects), or that Ray itself found dead at its registration timeout, with
the lines its raylet's ``raylet.err`` gained meanwhile. Nodes on other machines are read
through Ray's state API where the cluster runs its dashboard (:func:`remote_raylet_errors`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["WorkerStartFailure", "WorkerStartWatch", "remote_raylet_errors", "session_logs_dir"]

logger = logging.getLogger(__name__)

_STARTED = re.compile(r"Started worker process with pid (\d+) worker_id=([0-9a-f]+)")
_NOT_REGISTERED = re.compile(r"worker process\((\d+)\) have not registered within the timeout")
_NODE_ID = re.compile(r"Setting node ID node_id=([0-9a-f]+)")
_RAYLET_PID = re.compile(r"^\[[^\]]* [IWEF] (\d+) \d+\] \(raylet\)", re.MULTILINE)
_ERROR_LINES = 20  # of a worker's stderr, in a message
_HEAD_BYTES = 256 * 1024  # where a raylet.out names its node id and its own pid
_TAIL_BYTES = 64 * 1024  # most of a raylet.err read at once


@dataclass(frozen=True)
class WorkerStartFailure:
    """A worker process that exited before it connected to its raylet.

    Attributes:
        node_id: The Ray node (hex) whose raylet started it.
        pid: The worker process's pid.
        error: The last lines its raylet's stderr gained since the watch began (the worker's own
            output before it connected), or ``""`` when there were none.
        log: Where ``error`` was read.
    """

    node_id: str
    pid: int
    error: str
    log: str


@dataclass
class _Raylet:
    out: Path
    err: Path
    node_id: str
    out_at: int
    err_at: int
    started: dict[int, str] = field(default_factory=dict)  # pid -> worker id, not yet connected


def session_logs_dir() -> Path | None:
    """The logs folder of the Ray session this process is connected to (``None`` if none)."""
    try:
        import ray

        node = ray._private.worker._global_node
        return Path(node.get_logs_dir_path()) if node is not None else None
    except Exception:  # noqa: BLE001 - not connected, or a Ray without the attribute
        return None


class WorkerStartWatch:
    """Worker processes that die before they connect, on this machine's nodes (module docstring).

    Args:
        logs_dir: The Ray session's logs folder (default: the connected session's).
    """

    def __init__(self, logs_dir: Path | None = None):
        self.logs_dir = logs_dir or session_logs_dir()
        self._raylets: dict[Path, _Raylet] = {}
        self._reported: set[tuple[str, int]] = set()
        self._scan(from_start=False)

    def _scan(self, *, from_start: bool = True) -> None:
        """Note the raylets running on this machine whose logs are in the folder.

        Those running when the watch begins are read from where their logs end then; a raylet
        noticed later (a node added since) from the start of its logs.
        """
        if self.logs_dir is None or not self.logs_dir.is_dir():
            return
        for out in sorted(self.logs_dir.glob("raylet*.out")):
            if out in self._raylets:
                continue
            head = _read(out, 0, _HEAD_BYTES)
            node, pid = _NODE_ID.search(head), _RAYLET_PID.search(head)
            if node is None or pid is None or not _running(int(pid.group(1)), "raylet"):
                continue  # not registered yet (seen next time), or a raylet gone (a removed node)
            err = out.with_suffix(".err")
            at = (0, 0) if from_start else (_size(out), _size(err))
            self._raylets[out] = _Raylet(out, err, node.group(1), *at)

    @property
    def node_ids(self) -> set[str]:
        """The nodes whose logs this watch reads (their raylets run on this machine)."""
        return {raylet.node_id for raylet in self._raylets.values()}

    def failures(self) -> list[WorkerStartFailure]:
        """Worker processes started since the watch began that exited without connecting.

        Each is reported once.
        """
        self._scan()
        found = []
        for raylet in self._raylets.values():
            dead = set()
            for line in self._new_lines(raylet):
                if started := _STARTED.search(line):
                    raylet.started[int(started.group(1))] = started.group(2)
                elif late := _NOT_REGISTERED.search(line):
                    dead.add(int(late.group(1)))  # Ray's own verdict, at its registration timeout
            for pid, worker_id in list(raylet.started.items()):
                if next(self.logs_dir.glob(f"python-core-worker-{worker_id}_*.log"), None) is not None:
                    del raylet.started[pid]  # it connected
                elif pid in dead or not _running(pid):
                    del raylet.started[pid]
                    dead.add(pid)
            for pid in sorted(dead):
                if (raylet.node_id, pid) not in self._reported:
                    self._reported.add((raylet.node_id, pid))
                    found.append(WorkerStartFailure(raylet.node_id, pid, self._new_errors(raylet), str(raylet.err)))
        return found

    @staticmethod
    def _new_lines(raylet: _Raylet) -> list[str]:
        """The whole lines ``raylet.out`` gained since the last read."""
        try:
            with raylet.out.open("rb") as handle:
                handle.seek(raylet.out_at)
                data = handle.read()
        except OSError:
            return []
        whole = data[: data.rfind(b"\n") + 1]  # a line still being written is read next time
        raylet.out_at += len(whole)
        return whole.decode("utf-8", "replace").splitlines()

    def _new_errors(self, raylet: _Raylet) -> str:
        size = _size(raylet.err)
        start = max(raylet.err_at, size - _TAIL_BYTES)
        lines = [line for line in _read(raylet.err, start, None).splitlines() if line.strip()]
        return "\n".join(lines[-_ERROR_LINES:])


def remote_raylet_errors(node_id: str, lines: int = _ERROR_LINES) -> str:
    """The last lines of a node's ``raylet.err`` through Ray's state API; ``""`` when unavailable.

    The state API answers only where the cluster runs Ray's dashboard (``ray start --head``
    does by default).
    """
    try:
        from ray.util.state import get_log

        text = "".join(get_log(node_id=node_id, filename="raylet.err", tail=lines, timeout=10))
    except Exception as exc:  # noqa: BLE001 - no dashboard, or the node is gone
        logger.debug("raylet.err of node %s not readable: %s", node_id[:12], exc)
        return ""
    return "\n".join(line for line in text.splitlines() if line.strip())


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read(path: Path, start: int, limit: int | None) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(start)
            data = handle.read() if limit is None else handle.read(limit)
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def _running(pid: int, name: str | None = None) -> bool:
    """Whether ``pid`` is a live process on this machine (and named ``name``, when given)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and (name is None or proc.name() == name)
    except psutil.Error:
        return False
