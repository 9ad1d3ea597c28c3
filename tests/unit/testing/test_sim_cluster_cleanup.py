"""A simulated-cluster node that fails to start leaves no process behind (no Ray needed).

Ray raises from a node's start before returning its handle (its 30 s registration wait, missed
on a loaded machine), so :class:`~nemo_genrm.testing.cluster.SimulatedCluster` kills what the
failed call spawned; the same cluster on Ray: tests/functional/judges/test_scale_out.py.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from nemo_genrm.testing.cluster import SimulatedCluster


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _start_then_fail(spawned: list[subprocess.Popen], grandchildren: list[int]) -> None:
    # A stand-in for a node start: two processes (one a grandchild), then the timeout.
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    spawned.append(subprocess.Popen([sys.executable, "-c", code]))
    deadline = time.monotonic() + 10
    while len(psutil.Process(spawned[0].pid).children()) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchildren += [p.pid for p in psutil.Process(spawned[0].pid).children()]
    raise RuntimeError("The current node timed out during startup.")


def test_a_failed_node_start_kills_the_processes_it_spawned():
    unrelated = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    spawned: list[subprocess.Popen] = []
    grandchildren: list[int] = []
    try:
        with pytest.raises(RuntimeError, match="timed out during startup"):
            SimulatedCluster()._spawning(_start_then_fail, spawned, grandchildren)
        assert spawned[0].poll() is not None and len(grandchildren) == 1
        assert _gone(grandchildren[0])
        assert unrelated.poll() is None  # a process started before the call is left alone
    finally:
        unrelated.kill()
        unrelated.wait()
        for proc in spawned:
            proc.wait(timeout=10)


def test_a_start_that_succeeds_keeps_its_processes():
    started = SimulatedCluster()._spawning(subprocess.Popen, [sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert started.poll() is None
    finally:
        started.kill()
        started.wait()
