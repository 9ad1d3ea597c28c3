"""The orphan guard stops the Ray processes of a driver that died, and nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nemo_genrm.grpo.orphan_guard import ray_descendants

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

# A stand-in driver: one child that looks like a Ray process (its command line names a file under
# a ray/ folder, as Ray's agents and workers do) and one that does not, both sleeping.
DRIVER = """
import subprocess, sys, time
sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
ray_like = subprocess.Popen(sleep + ["/site-packages/ray/_private/log_monitor.py"])
other = subprocess.Popen(sleep + ["--not-ray"])
print(ray_like.pid, other.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_guard_stops_the_ray_processes_of_a_killed_driver_within_seconds():
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True)
    ray_like, other = (int(x) for x in driver.stdout.readline().split())
    guard = None
    try:
        assert {pid for pid, _ in ray_descendants(driver.pid)} == {ray_like}
        guard = subprocess.Popen([sys.executable, "-m", "nemo_genrm.grpo.orphan_guard", str(driver.pid)],
                                 stderr=subprocess.PIPE, text=True, start_new_session=True)
        # Its first look at the driver's processes (the first line it writes).
        assert guard.stderr.readline().strip() == f"orphan guard: watching driver {driver.pid} (1 Ray process(es))"
        time.sleep(0.5)
        assert _alive(ray_like) and guard.poll() is None  # nothing happens while the driver lives
        driver.kill()
        driver.wait(timeout=10)
        killed = time.monotonic()
        while _alive(ray_like) and time.monotonic() - killed < 5.0:
            time.sleep(0.05)
        took = time.monotonic() - killed
        assert not _alive(ray_like), "the Ray-like orphan outlived its driver by 5 s"
        assert guard.wait(timeout=10) == 0
        assert "stopped 1 Ray process(es)" in guard.stderr.read()
        assert _alive(other)  # not a Ray process: not the guard's to stop
        print(f"orphan stopped {took:.2f} s after its driver was killed")
    finally:
        for pid in (ray_like, other):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        for proc in (driver, guard):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
