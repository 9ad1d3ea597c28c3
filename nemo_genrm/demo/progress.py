"""Progress of the demo models' one-off training: a bar with the time left, or plain lines.

The demo judge trains for minutes on the first run. On a terminal the user sees a tqdm bar (rate,
time left, loss) on stderr; when the output goes to a file or a pipe, a log line every
``interval_s`` seconds says how far it is and about how long is left, with no redrawn bar
(:func:`nemo_genrm.console.progress`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

from nemo_genrm.console import progress

__all__ = ["training_progress"]


@contextlib.contextmanager
def training_progress(
    name: str, steps: int, log: logging.Logger, interval_s: float = 30.0
) -> Iterator[Callable[[int, float], None]]:
    """Yield ``update(step, loss)``, to call after each of ``steps`` training steps.

    Args:
        name: What trains ("demo judge"), the bar's label and the log lines'.
        steps: Total steps.
        log: Logger of the training module (the plain lines go there).
        interval_s: Seconds between the plain lines when the output is not a terminal.
    """
    with progress(name, steps, interval_s=interval_s, log=log) as bar:

        def update(step: int, loss: float) -> None:
            bar.update(1, loss=f"{loss:.3f}")

        yield update
