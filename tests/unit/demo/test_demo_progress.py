"""Long work shows its progress as the reader meets it: a tqdm bar with the time left on a
terminal, plain lines with the time left in a file, and never a redrawn bar in a file."""

from __future__ import annotations

import io
import logging
import re
import sys
import time

from nemo_genrm import console
from nemo_genrm.console import heartbeat, progress
from nemo_genrm.demo.progress import training_progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar_with_the_time_left_and_no_extra_lines(monkeypatch, caplog):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    log = logging.getLogger("nemo_genrm.demo.test_progress")
    with caplog.at_level(logging.INFO, logger=log.name), training_progress("demo judge", 10, log, 0) as update:
        for step in range(10):
            update(step, 1.0 / (step + 1))
    bar = terminal.getvalue()
    assert "demo judge" in bar and "10/10" in bar
    assert re.search(r"<\d\d:\d\d", bar), bar  # tqdm's time left
    assert "loss=0.100" in bar
    assert not caplog.records  # the bar says it all


def test_no_terminal_no_bar_but_plain_lines_with_the_time_left(monkeypatch, caplog):
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    log = logging.getLogger("nemo_genrm.demo.test_progress")
    clock = iter(range(0, 1000, 10))  # each update is 10 s after the previous one
    monkeypatch.setattr(console.time, "monotonic", lambda: float(next(clock)))
    with caplog.at_level(logging.INFO, logger=log.name), training_progress("demo policy", 6, log, 25) as update:
        for step in range(6):
            update(step, 0.5)
    assert plain.getvalue() == ""  # a file gets no carriage-return bar
    lines = [r.getMessage() for r in caplog.records]
    # One line per 25 s at most, none at the end (the caller reports the finish itself).
    assert lines == [
        "demo policy: 3/6 steps (50%), 30s elapsed, about 30s left, loss=0.500",
    ], lines


def test_a_heartbeat_says_still_while_a_silent_wait_goes_on(caplog):
    with caplog.at_level(logging.INFO, logger="nemo_genrm.console"), heartbeat("starting Ray", every_s=0.05):
        time.sleep(0.3)
    beats = [r.getMessage() for r in caplog.records]
    assert beats and all(re.fullmatch(r"still starting Ray \(\d+s\)", b) for b in beats), beats
    count = len(beats)
    time.sleep(0.2)
    assert len(caplog.records) == count  # stopped with the block


def test_progress_counts_from_a_resumed_step(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with progress("GRPO", 64, initial=40, interval_s=None) as bar:
        bar.update(1)
        assert not bar.on_terminal and bar.line().startswith("GRPO: 41/64 steps (64%)")
