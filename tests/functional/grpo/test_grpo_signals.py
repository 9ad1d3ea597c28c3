"""A GRPO driver told to stop (SIGTERM) tears down its own Ray cluster: nothing is left running.

The real entry point runs in a subprocess with its own Ray cluster (no ``RAY_ADDRESS``), trains
until its first metrics record is written, and gets SIGTERM. Every process it had started
(raylet, GCS, workers, the policy and the judge) must be gone within a few seconds of its exit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# The default run's models (tiny://demo-judge, tiny://demo-policy): run last (tests/conftest.py).
pytestmark = pytest.mark.demo_models
SCRIPT = ROOT / "examples" / "run_grpo_genrm.py"
LEFT_BEHIND_S = 5.0  # what "a few seconds" means here


def _descendants(pid: int) -> dict[int, str]:
    """Live descendants of ``pid`` (pid -> command name), read from /proc."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if state != "Z":
            children.setdefault(int(ppid), []).append(int(entry.name))
            names[int(entry.name)] = name
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = names[child]
            todo.append(child)
    return found


def _alive(pids: dict[int, str]) -> dict[int, str]:
    alive = {}
    for pid, name in pids.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] != "Z" and name in stat:
            alive[pid] = name
    return alive


def _start_driver(tmp_path: Path, cache_dir: str, launcher: tuple[str, ...] = ()) -> subprocess.Popen:
    """The real entry point with its own Ray cluster, once it has written a metrics record.

    ``launcher``: what runs it (``uv run ...``); the driver is its child then.
    """
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["NEMO_GENRM_CACHE"] = cache_dir
    overrides = [
        "grpo.max_num_steps=1000",
        "grpo.val_period=0",
        "checkpointing.enabled=false",
        f"logger.log_dir={tmp_path / 'logs'}",
        "policy.generation.max_new_tokens=8",
        "++cluster.num_cpus=4",
    ]
    metrics = tmp_path / "logs" / "exp_001" / "metrics.jsonl"  # the run's own folder
    proc = subprocess.Popen(
        [*launcher, *(["python"] if launcher else [sys.executable]), str(SCRIPT), *overrides],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=bool(launcher),
    )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            if metrics.exists() and metrics.read_text().strip():
                break
            time.sleep(0.5)
        if proc.poll() is not None or not (metrics.exists() and metrics.read_text().strip()):
            raise AssertionError("the driver wrote no metrics record in 600 s")
    except BaseException as exc:  # a failed wait (or pytest's timeout) leaves nothing running
        for pid in _descendants(proc.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
        if isinstance(exc, AssertionError):
            raise AssertionError(f"{exc}:\n" + proc.communicate(timeout=30)[0][-4000:]) from None
        raise
    return proc


def _gone_within(started: dict[int, str], since: float, limit_s: float) -> float:
    """Seconds from ``since`` until none of ``started`` is alive; fails past ``limit_s``."""
    left = _alive(started)
    while left and time.monotonic() - since < limit_s:
        time.sleep(0.1)
        left = _alive(started)
    assert not left, f"still running {limit_s} s after the driver exited: {left}"
    return time.monotonic() - since


@pytest.mark.slow
def test_sigterm_leaves_no_ray_process_behind(tmp_path, tiny_cache_dir):
    proc = _start_driver(tmp_path, tiny_cache_dir)
    try:
        started = _descendants(proc.pid)
        assert any("raylet" in name for name in started.values()), started
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
        exited = time.monotonic()
        # 128 + SIGTERM where the signal lands in Python code. Once in CI (2 loaded cores) the
        # driver exited 1 instead, the signal having landed inside a blocking Ray call; what this
        # test guards, a stopped run that leaves no process behind, is asserted below either way.
        assert proc.returncode in (128 + signal.SIGTERM, 1), output[-4000:]
        _gone_within(started, exited, LEFT_BEHIND_S)
        assert "stopping the run and its Ray cluster" in output
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


@pytest.mark.slow
def test_sigkill_leaves_no_ray_process_behind(tmp_path, tiny_cache_dir):
    # A SIGKILLed driver cannot clean up: its orphan guard stops the cluster it had started.
    proc = _start_driver(tmp_path, tiny_cache_dir)
    try:
        started = _descendants(proc.pid)
        ray_procs = {
            pid: name for pid, name in started.items() if name in ("raylet", "gcs_server") or name.startswith("ray::")
        }
        assert any("raylet" in name for name in ray_procs.values()), started
        guards = [pid for pid in started if b"orphan_guard" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(guards) == 1, started
        proc.kill()
        proc.wait(timeout=30)
        took = _gone_within(started, time.monotonic(), LEFT_BEHIND_S)
        print(f"every process of the killed run was gone {took:.1f} s after the SIGKILL")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


KILLED_RUN_GONE_S = 10.0  # every process of a run whose `uv run` was killed


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv on the PATH")
def test_killing_uv_run_itself_stops_the_training_and_every_process_of_the_run(tmp_path, tiny_cache_dir):
    # The process the user started is `uv run`, not the driver: killed by its real pid, the
    # training it launched must not run on headless.
    launcher = (shutil.which("uv"), "run", "--project", str(ROOT))
    proc = _start_driver(tmp_path, tiny_cache_dir, launcher)
    started: dict[int, str] = {}
    try:
        started = _descendants(proc.pid)
        assert any("raylet" in name for name in started.values()), started
        proc.kill()  # SIGKILL to uv itself
        proc.wait(timeout=30)
        took = _gone_within(started, time.monotonic(), KILLED_RUN_GONE_S)
        print(f"every process of the run ({len(started)}) was gone {took:.1f} s after `uv run` was killed")
    finally:
        for pid in _alive(started):  # what the guard failed to stop, not left to the next test
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
