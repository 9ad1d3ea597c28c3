"""How a judge's reply is read: one verdict per reply, and one majority over several replies.

- :mod:`~nemo_genrm.verdicts.parser`: :class:`VerdictParser` (``strict``, ``lenient``,
  ``choice``, ``rating``) after the reasoning and any quoted candidate are removed; a reply
  without a verdict is ``None`` and a reason, never a number;
- :mod:`~nemo_genrm.verdicts.voting`: :func:`majority`, the one vote rule of voting rewards and
  RewardBench ensembles.

What the judge is asked is :mod:`nemo_genrm.prompts`.
"""

from __future__ import annotations

from nemo_genrm.verdicts.parser import (
    CHOICE_VALUES,
    DEFAULT_CHOICE_MARKERS,
    PARSERS,
    REASONS,
    TRUNCATED,
    Verdict,
    VerdictParser,
    strip_quoted,
    strip_think,
)
from nemo_genrm.verdicts.voting import REFERENCE_ERROR, Majority, TieRule, majority

__all__ = [
    "CHOICE_VALUES",
    "DEFAULT_CHOICE_MARKERS",
    "PARSERS",
    "REASONS",
    "REFERENCE_ERROR",
    "TRUNCATED",
    "Majority",
    "TieRule",
    "Verdict",
    "VerdictParser",
    "majority",
    "strip_quoted",
    "strip_think",
]
