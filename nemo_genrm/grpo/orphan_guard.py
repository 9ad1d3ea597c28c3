"""A guard process that stops a run's own Ray cluster when its driver dies without cleaning up.

A driver that started a local Ray cluster (``ray.init()`` without an address) is the parent of
the cluster's GCS, raylet and agents, and the raylet is the parent of every worker. A SIGTERM
or SIGINT tears that down (:mod:`nemo_genrm.grpo.runner`); a SIGKILL (or the kernel's OOM
killer) gives the driver no chance, and Ray's own processes would only notice their driver is
gone much later. So a driver that starts its own cluster also starts this guard, in a session
of its own so that a terminal's Ctrl-C does not reach it:

- while the driver lives, the guard notes every Ray process among the driver's descendants
  (raylet, GCS, agents, ``ray::`` workers), each with its start time, so a recycled PID is
  never mistaken for one of them;
- when the driver is gone (no such process, or a zombie), it sends SIGTERM to those processes
  and to the Ray processes below them, then SIGKILL to what is left after a short grace, and
  exits.

After a clean shutdown nothing of the cluster is left and the guard simply exits; the driver
also stops it at the end of its own teardown. Linux only (it reads ``/proc``); elsewhere the
driver does not start it.

Run as ``python -m nemo_genrm.grpo.orphan_guard <driver_pid>``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL_S = 0.25
"""How often the guard checks that the driver lives."""
SNAPSHOT_S = 2.0
"""How often it notes the driver's Ray processes (new workers are found below the raylet)."""
GRACE_S = 2.0
"""How long Ray's processes get to exit on SIGTERM before SIGKILL."""

_RAY_NAMES = ("raylet", "gcs_server")

Proc = tuple[int, int]  # (pid, start time in clock ticks): one process, never a recycled PID


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


def ray_descendants(pid: int) -> set[Proc]:
    """The Ray processes below ``pid`` (at any depth), excluding zombies."""
    table, found, todo = _children(), set(), [pid]
    while todo:
        for child in table.get(todo.pop(), []):
            stat = _stat(child)
            if stat is None:
                continue
            todo.append(child)
            if stat[1] != "Z" and _is_ray(child, stat[0]):
                found.add((child, stat[3]))
    return found


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


def stop_orphans(known: set[Proc]) -> set[Proc]:
    """SIGTERM ``known`` and the Ray processes below them, SIGKILL what is left after the grace.

    Returns:
        The processes that were still alive and got a signal.
    """
    targets = {p for p in known if _alive(p)}
    for proc in list(targets):
        targets |= ray_descendants(proc[0])
    _signal(targets, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(_alive(p) for p in targets):
        time.sleep(0.1)
    _signal(targets, signal.SIGKILL)
    return targets


def watch(driver_pid: int) -> int:
    """Guard ``driver_pid`` until it is gone, then stop the Ray processes it left (exit code 0)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the driver's end, or SIGTERM, stops it
    stat = _stat(driver_pid)
    if stat is None:
        return 0
    driver, known, last = (driver_pid, stat[3]), set(), None
    while _alive(driver):
        now = time.monotonic()
        if last is None or now - last >= SNAPSHOT_S:
            known = {p for p in known if _alive(p)} | ray_descendants(driver_pid)
            if last is None:
                print(f"orphan guard: watching driver {driver_pid} ({len(known)} Ray process(es))",
                      file=sys.stderr, flush=True)
            last = now
        time.sleep(POLL_S)
    stopped = stop_orphans(known)
    if stopped:
        print(f"orphan guard: driver {driver_pid} is gone; stopped {len(stopped)} Ray process(es)",
              file=sys.stderr, flush=True)
    return 0


def start_guard() -> subprocess.Popen | None:
    """Start a guard over this process (the driver); ``None`` where ``/proc`` is missing."""
    if not Path("/proc/self/stat").exists():
        return None
    return subprocess.Popen(
        [sys.executable, "-m", "nemo_genrm.grpo.orphan_guard", str(os.getpid())],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


if __name__ == "__main__":  # pragma: no cover - exercised in a subprocess by the tests
    sys.exit(watch(int(sys.argv[1])))
