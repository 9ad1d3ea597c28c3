"""What a person sees on the console: bars on a terminal, plain lines elsewhere, never silence.

The entry points call :func:`setup_console` first thing (it imports nothing heavy, so their first
line prints within a second of start). On a terminal, long work shows a tqdm bar with the time
left (:func:`progress`); when the output goes to a file or a pipe (CI logs, ``| tee``, a job
scheduler), the same work logs a plain line every ``interval_s`` seconds instead, and neither
tqdm's redrawn bars (``\\r``), the libraries' own bars (transformers, huggingface_hub) nor Ray's
coloured ``(pid=...)`` prefixes reach the file. :func:`heartbeat` says "still ..." while a wait
with nothing of its own to show (Ray's start, actors loading their models) goes on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = [
    "LOG_FORMAT",
    "Progress",
    "heartbeat",
    "is_terminal",
    "no_library_bars_off_terminal",
    "progress",
    "setup_console",
]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

logger = logging.getLogger(__name__)


def is_terminal(*streams: TextIO | None) -> bool:
    """Whether every stream (default: stdout and stderr) is a terminal."""
    for stream in streams or (sys.stdout, sys.stderr):
        try:
            if stream is None or not stream.isatty():
                return False
        except (AttributeError, ValueError):  # a replaced or closed stream
            return False
    return True


def setup_console(level: int = logging.INFO) -> bool:
    """Configure logging for an entry point; keep Ray's colour codes out of files.

    - The root logger writes ``LOG_FORMAT`` lines to stderr.
    - huggingface_hub's records are written once: its library logger has a handler of its own
      and also propagated to the root, which printed each of its warnings (a hub retry) twice.
      (Its API, ``huggingface_hub.utils.logging.disable_propagation``, sets the same flag.)
    - When stdout or stderr is not a terminal, Ray prints its workers' lines without colour
      codes: ``RAY_COLOR_PREFIX=0`` is Ray's own (and only) switch for them, read as it prints.
      A value the user set is kept.

    Imports nothing beyond the standard library, so an entry point's first line follows at once;
    call :func:`no_library_bars_off_terminal` after that line.

    Returns:
        Whether the output is a terminal.
    """
    logging.basicConfig(level=level, format=LOG_FORMAT)
    logging.getLogger("huggingface_hub").propagate = False
    terminal = is_terminal()
    if not terminal:
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    return terminal


def no_library_bars_off_terminal() -> None:
    """When the output is not a terminal, transformers and huggingface_hub draw no progress bars.

    Their bars (``Writing model shards``, downloads) redraw with carriage returns, which a file
    keeps as one long line per redraw. transformers follows huggingface_hub's switch when it is
    imported after this call. (Model workers on Ray turn their bars off themselves.)
    """
    if not is_terminal():
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()


class Progress:
    """The handle :func:`progress` yields: call :meth:`update` after each unit of work."""

    def __init__(
        self, bar: Any, desc: str, total: int, initial: int, unit: str, interval_s: float | None, log: logging.Logger
    ):
        self._bar, self._desc, self._total, self._unit = bar, desc, total, unit
        self._interval_s, self._log = interval_s, log
        self._done = self._started_at = initial
        self._start = self._last_line = time.monotonic()
        self._postfix: dict[str, Any] = {}

    @property
    def on_terminal(self) -> bool:
        """Whether a tqdm bar is drawn."""
        return self._bar is not None

    def update(self, n: int = 1, **postfix: Any) -> None:
        """Count ``n`` more units; ``postfix`` (e.g. ``loss=0.12``) is shown beside the count."""
        self._done += n
        self._postfix = postfix
        if self._bar is not None:
            self._bar.update(n)
            if postfix:
                self._bar.set_postfix(postfix, refresh=False)
            return
        now = time.monotonic()
        if self._interval_s is not None and now - self._last_line >= self._interval_s and self._done < self._total:
            self._last_line = now
            self._log.info("%s", self.line(now))

    def line(self, now: float | None = None) -> str:
        """``desc: 300/1200 steps (25%), 1m30s elapsed, about 4m30s left, loss=0.95``."""
        elapsed = (now or time.monotonic()) - self._start
        done_here = self._done - self._started_at
        share = 100 * self._done / max(self._total, 1)
        text = f"{self._desc}: {self._done}/{self._total} {self._unit}s ({share:.0f}%), {_duration(elapsed)} elapsed"
        if 0 < done_here and self._done < self._total:
            text += f", about {_duration(elapsed / done_here * (self._total - self._done))} left"
        if self._postfix:
            text += ", " + ", ".join(f"{k}={v}" for k, v in self._postfix.items())
        return text


@contextlib.contextmanager
def progress(
    desc: str,
    total: int,
    *,
    unit: str = "step",
    initial: int = 0,
    interval_s: float | None = 30.0,
    log: logging.Logger | None = None,
    stream: TextIO | None = None,
) -> Iterator[Progress]:
    """A tqdm bar on a terminal; elsewhere a log line every ``interval_s`` seconds and one at the
    end (``None``: none).

    On a terminal, log records are written above the bar (tqdm's ``logging_redirect_tqdm``), so
    the bar stays one line.

    Args:
        desc: What is counted ("demo judge").
        total: Units in all.
        unit: The unit's name, singular.
        initial: Units already done (a resumed run).
        interval_s: Seconds between the plain lines off a terminal.
        log: Where the plain lines go (this module's logger by default).
        stream: The bar's stream (stderr by default); decides whether it is a terminal.
    """
    stream = stream or sys.stderr
    log = log or logger
    if not is_terminal(stream):
        handle = Progress(None, desc, total, initial, unit, interval_s, log)
        yield handle
        if interval_s is not None:
            log.info("%s", handle.line())  # where it ended (the last figures), as a bar's last frame
        return
    from tqdm.auto import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    with (
        logging_redirect_tqdm(),
        tqdm(total=total, initial=initial, desc=desc, unit=unit, file=stream, dynamic_ncols=True) as bar,
    ):
        yield Progress(bar, desc, total, initial, unit, interval_s, log)


@contextlib.contextmanager
def heartbeat(what: str, every_s: float = 15.0, log: logging.Logger | None = None) -> Iterator[None]:
    """Log ``still <what> (N s)`` every ``every_s`` seconds until the block ends.

    For waits that print nothing of their own: Ray's start, actors that import torch and load
    their models, a first import after an install.
    """
    log = log or logger
    stop = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not stop.wait(every_s):
            log.info("still %s (%s)", what, _duration(time.monotonic() - start))

    thread = threading.Thread(target=beat, name="nemo-genrm-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=1.0)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes}m{seconds:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"
