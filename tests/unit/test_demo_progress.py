"""The demo models' first-run training shows its progress: a bar with the time left on a
terminal, and log lines with the time left everywhere."""

from __future__ import annotations

import io
import logging
import re
import sys

from nemo_genrm.demo.progress import training_progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar_with_the_time_left_and_the_log_lines_under_it(monkeypatch, caplog):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    log = logging.getLogger("nemo_genrm.demo.test_progress")
    with caplog.at_level(logging.INFO, logger=log.name), training_progress("demo judge", 10, log, every=4) as update:
        for step in range(10):
            update(step, 1.0 / (step + 1))
    bar = terminal.getvalue()
    assert "demo judge" in bar and "10/10" in bar
    assert re.search(r"<\d\d:\d\d", bar), bar  # tqdm's time left
    assert "loss=0.100" in bar
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines  # steps 4 and 8; none at the end
    assert re.fullmatch(r"demo judge step 4/10 loss 0\.250 \(about \d+ s left\)", lines[0]), lines


def test_no_terminal_no_bar_but_the_log_lines(monkeypatch, caplog):
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    log = logging.getLogger("nemo_genrm.demo.test_progress")
    with caplog.at_level(logging.INFO, logger=log.name), training_progress("demo policy", 6, log, every=3) as update:
        for step in range(6):
            update(step, 0.5)
    assert plain.getvalue() == ""  # CI logs get no carriage-return bar
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["demo policy step 3/6 loss 0.500"]
