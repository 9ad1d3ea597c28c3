"""A Ray worker that dies before it connects is found in its node's logs, with its own error.

The logs are written here as a raylet writes them (``raylet.out`` names the node and each worker
process it starts; a worker's output goes to ``raylet.err`` until it connects, and a connected
worker writes ``python-core-worker-<id>_<pid>.log``), beside real processes: a live process
named ``raylet`` and workers that are alive or dead, so the watch's process checks run for real.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nemo_genrm.judges.worker_logs import WorkerStartWatch

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

NODE = "ab" * 28


def _line(pid: int, text: str) -> str:
    return f"[2026-11-27 03:23:10,168 I {pid} {pid}] (raylet) worker_pool.cc:564: {text}\n"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def node(tmp_path):
    """A logs folder with the raylet of one node running (a live process named ``raylet``)."""
    (tmp_path / "raylet").symlink_to("/bin/sleep")
    raylet = subprocess.Popen([str(tmp_path / "raylet"), "60"])
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "raylet.out").write_text(
        _line(raylet.pid, f"Setting node ID node_id={NODE}")
        + _line(raylet.pid, f"Started worker process with pid {_dead_pid()} worker_id=00")
    )
    (logs / "raylet.err").write_text("an error from before the watch\n")
    yield logs, raylet.pid
    raylet.kill()
    raylet.wait()


def _append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


def test_a_worker_dead_before_it_connected_is_reported_once_with_its_own_error(node):
    logs, raylet = node
    watch = WorkerStartWatch(logs)
    assert watch.node_ids == {NODE} and watch.failures() == []  # what came before the watch is not news
    dead = _dead_pid()
    _append(logs / "raylet.out", _line(raylet, f"Started worker process with pid {dead} worker_id=d1"))
    _append(logs / "raylet.err", "ModuleNotFoundError: No module named 'torch'\n")
    [failure] = watch.failures()
    assert (failure.node_id, failure.pid) == (NODE, dead)
    assert failure.error == "ModuleNotFoundError: No module named 'torch'"  # not the older line
    assert failure.log == str(logs / "raylet.err")
    assert watch.failures() == []  # once


def test_live_and_connected_workers_are_not_failures_but_rays_own_verdict_is(node):
    logs, raylet = node
    watch = WorkerStartWatch(logs)
    starting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    connected = _dead_pid()
    try:
        _append(
            logs / "raylet.out",
            _line(raylet, f"Started worker process with pid {starting.pid} worker_id=s1")
            + _line(raylet, f"Started worker process with pid {connected} worker_id=c1"),
        )
        (logs / f"python-core-worker-c1_{connected}.log").write_text("")  # it connected, then exited
        _append(logs / "raylet.out", "a line still being writ")  # read once it is whole
        assert watch.failures() == []
        # Ray's verdict at its registration timeout: the worker never connected, alive or not.
        _append(
            logs / "raylet.out",
            "ten\n"
            + _line(
                raylet, f"Some workers of the worker process({starting.pid}) have not registered within the timeout."
            ),
        )
        assert [f.pid for f in watch.failures()] == [starting.pid]
    finally:
        starting.kill()
        starting.wait()


def test_a_node_added_after_the_watch_is_read_from_its_start_and_a_gone_raylet_is_not_read(node, tmp_path):
    logs, raylet = node
    (logs / "raylet.1.out").write_text(_line(_dead_pid(), "Setting node ID node_id=" + "cd" * 28))
    watch = WorkerStartWatch(logs)
    assert watch.node_ids == {NODE}  # a removed node's logs stay; its raylet is gone
    (tmp_path / "later").mkdir()
    (tmp_path / "later" / "raylet").symlink_to("/bin/sleep")
    later = subprocess.Popen([str(tmp_path / "later" / "raylet"), "60"])
    try:
        dead = _dead_pid()
        (logs / "raylet.2.out").write_text(
            _line(later.pid, "Setting node ID node_id=" + "ef" * 28)
            + _line(later.pid, f"Started worker process with pid {dead} worker_id=e1")
        )
        (logs / "raylet.2.err").write_text("Fatal Python error: init_import_site\n")
        [failure] = watch.failures()
        assert (failure.node_id, failure.pid, failure.error) == (
            "ef" * 28,
            dead,
            "Fatal Python error: init_import_site",
        )
    finally:
        later.kill()
        later.wait()
