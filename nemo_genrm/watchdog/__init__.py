"""The reward watchdog: canaries in the judge calls, drift signals from the policy's own answers,
and an alarm that warns, masks or stops before a policy has learned a hole in the judge.

- :mod:`~nemo_genrm.watchdog.canaries`: known-wrong answers in the shapes that game judges and
  known-right controls, budgeted by judge prompts and judged once each;
- :mod:`~nemo_genrm.watchdog.shapes`: what a response looks like (hedge, verdict line, opener);
- :mod:`~nemo_genrm.watchdog.tally`: the counters and the ``genrm/canary/*`` and
  ``genrm/watchdog/*`` metrics;
- :mod:`~nemo_genrm.watchdog.alarm`: thresholds over a window of judge calls;
- :mod:`~nemo_genrm.watchdog.watch`: :class:`Watchdog`, what the environment keeps.

How to read the signals and what each action costs: docs/watchdog.md.
"""

from nemo_genrm.watchdog.alarm import Alarm, Firing
from nemo_genrm.watchdog.canaries import FAMILIES, Canary, CanaryPlanner
from nemo_genrm.watchdog.tally import SIGNALS, WatchTally
from nemo_genrm.watchdog.watch import Watchdog

__all__ = ["FAMILIES", "SIGNALS", "Alarm", "Canary", "CanaryPlanner", "Firing", "WatchTally", "Watchdog"]
