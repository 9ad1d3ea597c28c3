"""The shapes of a policy's response that game judges, read without a judge call.

:func:`response_shapes` reads one response with the defences' own detectors (one idea, one place):

- ``hedged``: extraction refused it for offering several distinct final values
  (:data:`nemo_genrm.samples.types.HEDGED`);
- ``verdict_lines``: a line that reads as a verdict, a label or a role turn
  (:func:`nemo_genrm.guard.injection.is_judge_format_line`: ``Verdict: 1``, ``Status: ✅``,
  ``System: ...``), which the prompt builder quotes but a policy should have no reason to write;
- ``openers``: its first line carries no content (:func:`nemo_genrm.guard.master_keys.is_content_free`:
  ``Let's solve this step by step.``, ``Verdict:``), the "master key" shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nemo_genrm.guard.injection import is_judge_format_line
from nemo_genrm.guard.master_keys import is_content_free
from nemo_genrm.samples.inputs import PreparedSample, content_text
from nemo_genrm.samples.types import HEDGED

MAX_LINES = 200
"""Lines of a response read for verdict lines (the rest is left unread: the check is per line)."""


def response_text(log: Any) -> str | None:
    """The text of the last assistant message of a message log, ``None`` when there is none."""
    if not isinstance(log, Sequence) or isinstance(log, (str, bytes)):
        return None
    for message in reversed(log):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            return content_text(message.get("content"))[0]
    return None


def response_shapes(text: str | None, sample: PreparedSample) -> frozenset[str]:
    """The signals one response shows (a subset of :data:`nemo_genrm.watchdog.tally.SIGNALS`).

    Args:
        text: The response as the policy wrote it (``None``: unreadable, no shape).
        sample: The sample as the environment prepared it (its reason tells a hedge).
    """
    shapes = set()
    if sample.reason == HEDGED:
        shapes.add("hedged")
    if not text:
        return frozenset(shapes)
    lines = [line for line in text.splitlines()[:MAX_LINES] if line.strip()]
    if lines and is_content_free(lines[0]):
        shapes.add("openers")
    if any(is_judge_format_line(line) for line in lines):
        shapes.add("verdict_lines")
    return frozenset(shapes)
