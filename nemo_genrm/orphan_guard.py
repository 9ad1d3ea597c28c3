"""A guard process that stops every process of a run whose driver, or whoever started it, is gone.

A driver that starts a local Ray cluster (``ray.init()`` without an address) is the parent of
the cluster's GCS, raylet and agents, and the raylet is the parent of every worker. A SIGTERM
or SIGINT lets the driver tear that down; a SIGKILL (or the kernel's OOM killer) gives it no
chance: Ray's GCS and raylet die with the driver, but its agents notice only tens of seconds
later and a worker may run on. And the process the user started is often not the driver: under
``uv run``, ``uv`` is the driver's parent, and a ``kill -9`` of ``uv`` leaves the driver (and its
training) running with nobody to stop it.

So :func:`nemo_genrm.ray_env.ensure_ray` starts this guard when it starts a local cluster, in a
session of its own so that a terminal's Ctrl-C or a signal to the process group does not reach it:

- it watches the driver and the launcher that started it: the chain of ``uv`` processes above
  the driver (``uv run``), each known by pid and start time, so a recycled pid is never taken
  for one of them;
- while they live, it notes every process below the driver (Ray's GCS, raylet, agents and
  workers, and anything else the run started) every :data:`SNAPSHOT_S`;
- when any of them is gone (no such process, or a zombie), it sends the driver SIGTERM (so a
  driver that tears down on SIGTERM does), waits :data:`DRIVER_GRACE_S`, then sends SIGTERM to
  every noted process and the processes below them, SIGKILL to what is left after
  :data:`GRACE_S`, and exits: nothing of the run outlives it by more than a few seconds;
- a SIGTERM to the guard itself means the driver shut Ray down and lives on: it stops what is
  left of Ray's processes below the driver (Ray's agents exit only seconds after their raylet),
  nothing else, and exits.

Linux only (it reads ``/proc``); elsewhere no guard is started.

Run as ``python -m nemo_genrm.orphan_guard <driver_pid>``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["launchers", "ray_descendants", "run_descendants", "start_guard", "stop_guard", "watch"]

POLL_S = 0.25
"""How often the guard checks that the driver and its launcher live."""
SNAPSHOT_S = 2.0
"""How often it notes the run's processes (new workers are found below the raylet)."""
DRIVER_GRACE_S = 3.0
"""How long a driver whose launcher is gone gets to tear down on SIGTERM before it is killed."""
GRACE_S = 2.0
"""How long the run's processes get to exit on SIGTERM before SIGKILL."""

_RAY_NAMES = ("raylet", "gcs_server")
_LAUNCHERS = ("uv",)  # process names that start a driver and stay its parent (`uv run`)

Proc = tuple[int, int]  # (pid, start time in clock ticks): one process, never a recycled PID

_guard: subprocess.Popen | None = None  # this process's guard, when one was started


def _stat(pid: int) -> tuple[str, str, int, int] | None:
    """``(name, state, ppid, start time)`` of a process from ``/proc``, or ``None`` if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    rest = text[text.rindex(")") + 2 :].split()
    return name, rest[0], int(rest[1]), int(rest[19])


def _is_ray(pid: int, name: str) -> bool:
    if name in _RAY_NAMES or name.startswith("ray::"):
        return True
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return b"/ray/" in cmdline or cmdline.startswith(b"ray::")


def _children() -> dict[int, list[int]]:
    table: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                table.setdefault(stat[2], []).append(int(entry.name))
    return table


def run_descendants(pid: int, *, ray_only: bool = False) -> set[Proc]:
    """The live processes below ``pid`` (at any depth), excluding zombies and this process.

    Args:
        pid: The root (the driver).
        ray_only: Only Ray's own processes (GCS, raylet, agents, ``ray::`` workers).
    """
    table, found, todo = _children(), set(), [pid]
    while todo:
        for child in table.get(todo.pop(), []):
            stat = _stat(child)
            if stat is None:
                continue
            todo.append(child)
            if stat[1] != "Z" and child != os.getpid() and (not ray_only or _is_ray(child, stat[0])):
                found.add((child, stat[3]))
    return found


def ray_descendants(pid: int) -> set[Proc]:
    """The Ray processes below ``pid`` (at any depth), excluding zombies."""
    return run_descendants(pid, ray_only=True)


def launchers(pid: int) -> list[Proc]:
    """The launchers that started ``pid`` and wait for it: its chain of ``uv`` parents, nearest first."""
    chain = []
    stat = _stat(pid)
    while stat is not None and stat[2] > 1:
        parent = _stat(stat[2])
        if parent is None or parent[0] not in _LAUNCHERS:
            break
        chain.append((stat[2], parent[3]))
        stat = parent
    return chain


def _alive(proc: Proc) -> bool:
    stat = _stat(proc[0])
    return stat is not None and stat[3] == proc[1] and stat[1] != "Z"


def _signal(procs: set[Proc], signum: int) -> None:
    for proc in procs:
        if _alive(proc):
            try:
                os.kill(proc[0], signum)
            except OSError:  # exited meanwhile
                pass


def stop_orphans(known: set[Proc], *, ray_only: bool = False) -> set[Proc]:
    """SIGTERM ``known`` and the processes below them, SIGKILL what is left after the grace.

    Args:
        known: The processes to stop.
        ray_only: Of the processes below them, only Ray's.

    Returns:
        The processes that were still alive and got a signal.
    """
    targets = {p for p in known if _alive(p)}
    for proc in list(targets):
        targets |= run_descendants(proc[0], ray_only=ray_only)
    _signal(targets, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(_alive(p) for p in targets):
        time.sleep(0.1)
    _signal(targets, signal.SIGKILL)
    return targets


def _say(text: str) -> None:
    print(f"orphan guard: {text}", file=sys.stderr, flush=True)


def watch(driver_pid: int) -> int:
    """Guard ``driver_pid`` and its launcher until one is gone, then stop the run (exit code 0)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the run's end, or SIGTERM, stops it
    stat = _stat(driver_pid)
    if stat is None:
        return 0
    driver = (driver_pid, stat[3])
    watched = [driver, *launchers(driver_pid)]
    known: set[Proc] = set()

    def sweep(signum: int, frame: object) -> None:  # the driver shut Ray down: stop what is left of it
        ray_known = {p for p in known if _alive(p) and _is_ray(p[0], (_stat(p[0]) or ("",))[0])}
        stop_orphans({p for p in ray_known | ray_descendants(driver_pid) if p not in watched}, ray_only=True)
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, sweep)
    last = None
    while all(_alive(p) for p in watched):
        now = time.monotonic()
        if last is None or now - last >= SNAPSHOT_S:
            known = {p for p in known if _alive(p)} | run_descendants(driver_pid)
            if last is None:
                _say(
                    f"watching driver {driver_pid} ({len(known)} process(es) below it; launcher(s) "
                    f"{[pid for pid, _ in watched[1:]]})"
                )
            last = now
        time.sleep(POLL_S)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stopping the run now: nothing interrupts it
    gone = next(p for p in watched if not _alive(p))[0]
    known |= run_descendants(driver_pid) if _alive(driver) else set()
    if _alive(driver):  # its launcher went first: let the driver tear down, then stop it
        _signal({driver}, signal.SIGTERM)
        deadline = time.monotonic() + DRIVER_GRACE_S
        while _alive(driver) and time.monotonic() < deadline:
            time.sleep(0.1)
    stopped = stop_orphans(known | {driver})
    _say(f"{'driver' if gone == driver_pid else 'launcher'} {gone} is gone; stopped {len(stopped)} process(es)")
    return 0


def start_guard() -> subprocess.Popen | None:
    """Start a guard over this process (the driver), once; ``None`` where ``/proc`` is missing.

    Later calls return the running guard.
    """
    global _guard
    if not Path("/proc/self/stat").exists():
        return None
    if _guard is not None and _guard.poll() is None:
        return _guard
    _guard = subprocess.Popen(
        [sys.executable, "-m", "nemo_genrm.orphan_guard", str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return _guard


def stop_guard(timeout_s: float = 10.0) -> None:
    """This process shut Ray down: the guard stops what is left of the cluster and exits."""
    global _guard
    guard, _guard = _guard, None
    if guard is not None and guard.poll() is None:
        guard.terminate()
        try:
            guard.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            guard.kill()
            guard.wait(timeout=timeout_s)


if __name__ == "__main__":  # pragma: no cover - exercised in a subprocess by the tests
    sys.exit(watch(int(sys.argv[1])))
