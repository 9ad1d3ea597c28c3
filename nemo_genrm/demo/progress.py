"""Progress of the demo models' one-off training: a bar with the time left, and log lines.

The demo judge trains for minutes on the first run; a user watching the terminal sees a tqdm
bar (rate and time left) on stderr when it is a terminal, and a log line every ``every`` steps
with the time left either way (tqdm stays quiet when stderr is not a terminal, as in CI logs).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator

__all__ = ["training_progress"]


@contextlib.contextmanager
def training_progress(
    name: str, steps: int, log: logging.Logger, every: int = 100
) -> Iterator[Callable[[int, float], None]]:
    """Yield ``update(step, loss)``, to call after each of ``steps`` training steps.

    Args:
        name: What trains ("demo judge"), the bar's label and the log lines'.
        steps: Total steps.
        log: Logger of the training module.
        every: A log line every this many steps (0: none).
    """
    from tqdm.auto import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    start = time.perf_counter()
    bar = tqdm(total=steps, desc=name, unit="step", disable=None)  # disabled when stderr is no terminal
    # On a terminal the root logger's console lines are written through tqdm, above the bar.
    redirect = contextlib.nullcontext() if bar.disable else logging_redirect_tqdm()
    with redirect, bar:

        def update(step: int, loss: float) -> None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            done = step + 1
            if every and done % every == 0 and done < steps:
                left = (time.perf_counter() - start) / done * (steps - done)
                log.info("%s step %d/%d loss %.3f (about %.0f s left)", name, done, steps, loss, left)

        yield update
