"""The orphan guard stops every process of a run once its driver, or the `uv run` that started it, is gone.

Real processes, killed by their real pid: a stand-in driver with a child that looks like a Ray
process (its command line names a file under a ray/ folder, as Ray's agents and workers do) and
one that does not, both sleeping, under a real ``uv run`` where one is on the PATH.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nemo_genrm.orphan_guard import launchers, ray_descendants, run_descendants

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

GONE_WITHIN_S = 10.0  # what the issue asks of every process of a killed run

# The driver starts its guard as ensure_ray does, then prints its own, its children's and the
# guard's pids. SIGTERM ends it at once (a driver that tears down on SIGTERM).
DRIVER = """
import os, subprocess, sys, time
from nemo_genrm.orphan_guard import start_guard
sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
ray_like = subprocess.Popen(sleep + ["/site-packages/ray/_private/log_monitor.py"])
other = subprocess.Popen(sleep + ["--not-ray"])
guard = start_guard()
print(os.getpid(), ray_like.pid, other.pid, guard.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _gone_within(pids: list[int], limit_s: float) -> float:
    start = time.monotonic()
    while any(_alive(p) for p in pids) and time.monotonic() - start < limit_s:
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    assert not left, f"still running {limit_s:g} s after the kill: {left}"
    return time.monotonic() - start


def _start(command: list[str]) -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)
    pids = [int(x) for x in proc.stdout.readline().split()]
    assert len(pids) == 4, pids
    _wait_until_watching(pids[3])
    return proc, pids


def _wait_until_watching(guard: int, limit_s: float = 60.0) -> None:
    """Until the guard catches SIGTERM (``watch`` sets that just before its first look at the
    run), then a little more for that look: a fresh process starts slowly on a loaded machine."""
    deadline = time.monotonic() + limit_s
    while True:
        status = Path(f"/proc/{guard}/status").read_text()
        caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
        if caught & (1 << (signal.SIGTERM - 1)):
            break
        assert time.monotonic() < deadline, f"the guard {guard} did not start watching within {limit_s:g} s"
        time.sleep(0.05)
    time.sleep(0.5)


def _cleanup(proc: subprocess.Popen, pids: list[int]) -> None:
    for pid in [proc.pid, *pids]:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_a_killed_driver_takes_every_process_of_its_run_with_it():
    proc, pids = _start([sys.executable, "-c", DRIVER])
    driver, ray_like, other, guard = pids
    try:
        assert {pid for pid, _ in ray_descendants(driver)} == {ray_like}
        assert {ray_like, other, guard} <= {pid for pid, _ in run_descendants(driver)} | {guard}
        assert all(_alive(p) for p in pids)  # nothing happens while the driver lives
        os.kill(driver, signal.SIGKILL)
        took = _gone_within([ray_like, other, guard], GONE_WITHIN_S)
        print(f"the run's processes were gone {took:.2f} s after its driver was killed")
    finally:
        _cleanup(proc, pids)


@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv on the PATH")
def test_killing_uv_run_itself_stops_the_driver_and_every_process_of_its_run():
    # The user's `uv run` (a real one, killed by its real pid): the driver under it would run on.
    command = [shutil.which("uv"), "run", "--no-project", "--python", sys.executable, "python", "-c", DRIVER]
    proc, pids = _start(command)
    driver, ray_like, other, guard = pids
    try:
        assert [pid for pid, _ in launchers(driver)] == [proc.pid]  # the guard watches uv too
        os.kill(proc.pid, signal.SIGKILL)
        took = _gone_within([driver, ray_like, other, guard], GONE_WITHIN_S)
        print(f"driver and run gone {took:.2f} s after `uv run` was killed")
    finally:
        _cleanup(proc, pids)


def test_a_guard_told_to_stop_sweeps_rays_leftovers_and_nothing_else():
    # The driver shut Ray down and stops its guard: Ray's leftovers go; the driver and its
    # other children live on (a notebook, a test session: not the guard's).
    proc, pids = _start([sys.executable, "-c", DRIVER])
    driver, ray_like, other, guard = pids
    try:
        os.kill(guard, signal.SIGTERM)
        _gone_within([ray_like, guard], GONE_WITHIN_S)
        assert _alive(driver) and _alive(other)
    finally:
        _cleanup(proc, pids)
