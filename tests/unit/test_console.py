"""What a newcomer sees, as they see it: the entry points' own processes, their output read from
a file (a pipe, as CI logs and ``| tee`` get it) or from a pseudo-terminal.

- The first line says what is starting within 2 s, before torch, transformers or Ray is imported
  (those took about a minute of silence on the first start after an install).
- On a terminal long work draws a tqdm bar with the time left; in a file it writes plain lines,
  with no carriage-return redraws and no colour codes.
- huggingface_hub's warnings (a hub retry) are printed once, not twice.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import textwrap
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]

# Long work shown through the console helper, as the demo judge's training shows it.
PROGRESS_SCRIPT = textwrap.dedent(
    """
    import logging, time
    from nemo_genrm.console import setup_console, progress

    setup_console()
    log = logging.getLogger("demo")
    with progress("demo judge", 20, interval_s=0.05, log=log) as bar:
        for step in range(20):
            time.sleep(0.02)
            bar.update(1, loss=f"{1 / (step + 1):.3f}")
    log.info("done")
    """
)


def _run_in_pty(args: list[str], timeout_s: float = 60) -> str:
    """Run ``args`` with stdout and stderr on a pseudo-terminal; return what it wrote."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    proc = subprocess.Popen(args, stdin=follower, stdout=follower, stderr=follower, cwd=ROOT, close_fds=True)
    os.close(follower)
    chunks, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=10)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_a_terminal_gets_a_tqdm_bar_with_the_time_left():
    out = _run_in_pty([sys.executable, "-c", PROGRESS_SCRIPT])
    assert "\r" in out and "demo judge" in out and "20/20" in out, out
    assert re.search(r"<\d\d:\d\d", out), out  # tqdm's time left
    assert "loss=0.050" in out


def test_a_file_gets_plain_lines_with_the_time_left_and_no_redraws(tmp_path):
    log = tmp_path / "out.log"
    with log.open("w") as sink:
        proc = subprocess.run(
            [sys.executable, "-c", PROGRESS_SCRIPT], stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT, timeout=60
        )
    out = log.read_text()
    assert proc.returncode == 0, out
    assert "\r" not in out and "\x1b[" not in out, repr(out)
    lines = [line for line in out.splitlines() if "demo judge:" in line]
    shape = r"demo judge: \d+/20 steps \(\d+%\), \d+s elapsed, about \d+s left, loss="
    assert lines and all(re.search(shape, line) for line in lines), out


def test_hub_warnings_are_printed_once(tmp_path):
    script = textwrap.dedent(
        """
        import logging
        from nemo_genrm.console import setup_console

        setup_console()
        import huggingface_hub  # its library logger brings a handler of its own

        logging.getLogger("huggingface_hub.utils._http").warning("retrying in 1s [Retry 1/5]")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("retrying in 1s") == 1, proc.stderr


@pytest.mark.parametrize(
    ("script", "args", "first"),
    [
        ("run_grpo_genrm.py", ["grpo.max_num_steps=0"], "GRPO with a GenRM judge (--engine builtin): loading "),
        (
            "run_reward_bench.py",
            ["--config", "examples/configs/reward_bench_tiny.yaml", "data.limit=0"],
            "RewardBench evaluation: loading --config",
        ),
    ],
)
def test_the_first_line_comes_at_once_before_the_heavy_imports(script, args, first):
    # `-X importtime` writes a line per import as it completes, on the same stream as the log,
    # so the order shows what had been imported when the first line was printed. The override
    # is a mistake, so the run ends after its config is read.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", str(ROOT / "examples" / script), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: list[str] = []
    first_at, first_cpu = None, 0.0
    for line in proc.stdout:  # type: ignore[union-attr]
        if first in line:
            first_at, first_cpu = time.monotonic() - start, sum(psutil.Process(proc.pid).cpu_times()[:2])
            break
        seen.append(line)
    rest = proc.communicate(timeout=120)[0]
    assert first_at is not None, "".join(seen) + rest
    heavy = [line for line in seen if re.search(r"\| +(torch|transformers|ray|numpy)$", line.rstrip())]
    assert not heavy, heavy
    # The child's own CPU time says how much it did first; wall time on a loaded machine says
    # more about the machine, so it only has to be sane.
    assert first_cpu < 2.0, f"first line after {first_cpu:.1f} s of CPU"
    assert first_at < 20.0, f"first line after {first_at:.1f} s"
    assert proc.returncode != 0 and "error: 1 configuration problem" in rest, rest
