"""The watchdog's counters and the ``genrm/canary/*`` and ``genrm/watchdog/*`` metrics made of them.

Every counter is a sum, so tallies of several judge calls add up (:meth:`WatchTally.add`) and the
rates are computed from the sums at the end, as :mod:`nemo_genrm.samples.metrics` does:

- ``genrm/canary/sent``, ``/judge_prompts``, ``/judge_time_s``, ``/cached`` (canaries skipped
  because their verdict is already known), ``/errors`` (canary calls that raised; real samples
  never see them);
- ``genrm/canary/wrong_judged`` and ``genrm/canary/right_judged``: canaries of each kind the
  judge answered; ``genrm/canary/settled``: canaries decided before the judge (a hedge, a
  content-free answer);
- ``genrm/canary/false_accept`` (a known-wrong canary rewarded) and ``/false_reject`` (a
  known-right control not rewarded), each also per family (``genrm/canary/false_accept/<family>``),
  with ``genrm/canary/false_accept_rate`` over ``wrong_judged`` and ``/false_reject_rate`` over
  ``right_judged``; ``genrm/canary/sent/<family>`` per family;
- ``genrm/watchdog/responses``: the policy's responses read; ``genrm/watchdog/<signal>``: the share
  of them showing each signal (``hedged``, ``verdict_lines``, ``openers``);
  ``genrm/watchdog/verifier_vetoes``: judged samples the verifier vetoed over those it checked;
  ``genrm/watchdog/length_reward_corr``: Pearson correlation of response length and reward over
  the rewarded samples (``0`` with fewer than two, or no spread);
- ``genrm/watchdog/context_probes``: ``context`` probes judged (a real judged sample's bare value
  judged alone, sent with the canaries on their budget); ``genrm/watchdog/context_flips``: the
  share of them whose verdict differs from the sample's verdict with its context, and
  ``genrm/watchdog/context_lifts``: the share accepted with context but refused bare (the words
  around the value carried the verdict);
- ``genrm/watchdog/alarms``: alarms fired, ``genrm/watchdog/alarm/<signal>``: judge calls that
  ended with that alarm on; ``genrm/watchdog/masked``: samples masked by ``action: mask``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

CANARY = "genrm/canary/"
WATCH = "genrm/watchdog/"

SIGNALS: tuple[str, ...] = ("hedged", "verdict_lines", "openers")
"""The shapes read from each response (:func:`nemo_genrm.watchdog.shapes.response_shapes`)."""

_ALWAYS = (
    "sent",
    "judge_prompts",
    "judge_time_s",
    "cached",
    "errors",
    "wrong_judged",
    "right_judged",
    "settled",
    "false_accept",
    "false_reject",
)


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


@dataclass
class WatchTally:
    """What the watchdog counted over one judge call, or several added together."""

    canary: dict[str, float] = field(default_factory=dict)
    watch: dict[str, float] = field(default_factory=dict)

    def bump(self, name: str, amount: float = 1.0, *, canary: bool = False) -> None:
        """Add ``amount`` to a canary counter (``canary=True``) or a watchdog counter."""
        counters = self.canary if canary else self.watch
        counters[name] = counters.get(name, 0.0) + amount

    def add(self, other: WatchTally) -> None:
        """Add another tally's counts into this one."""
        for mine, theirs in ((self.canary, other.canary), (self.watch, other.watch)):
            for name, value in theirs.items():
                mine[name] = mine.get(name, 0.0) + value

    def share(self, signal: str) -> tuple[float, float]:
        """``(responses showing signal, responses read)``; for ``verifier_vetoes``, over checked samples."""
        if signal == "verifier_vetoes":
            return self.watch.get("vetoes", 0.0), self.watch.get("checked", 0.0)
        if signal == "canary_false_accept":
            return self.canary.get("false_accept", 0.0), self.canary.get("wrong_judged", 0.0)
        return self.watch.get(signal, 0.0), self.watch.get("responses", 0.0)

    def correlation(self) -> float:
        """Pearson correlation of response length and reward (0 without spread)."""
        w = self.watch
        n = w.get("len_n", 0.0)
        if n < 2:
            return 0.0
        sx, sy, sxx, syy, sxy = (w.get(k, 0.0) for k in ("len_x", "len_y", "len_xx", "len_yy", "len_xy"))
        vx, vy = n * sxx - sx * sx, n * syy - sy * sy
        if vx <= 1e-12 or vy <= 1e-12:
            return 0.0
        return (n * sxy - sx * sy) / math.sqrt(vx * vy)

    def metrics(self) -> dict[str, float]:
        """The flat ``genrm/canary/*`` and ``genrm/watchdog/*`` metrics (see the module docstring)."""
        out = {CANARY + name: 0.0 for name in _ALWAYS}
        out.update({CANARY + name: value for name, value in self.canary.items()})
        out[CANARY + "false_accept_rate"] = _ratio(*self.share("canary_false_accept"))
        out[CANARY + "false_reject_rate"] = _ratio(
            self.canary.get("false_reject", 0.0), self.canary.get("right_judged", 0.0)
        )
        w = self.watch
        out[WATCH + "responses"] = w.get("responses", 0.0)
        for signal in (*SIGNALS, "verifier_vetoes"):
            out[WATCH + signal] = _ratio(*self.share(signal))
        out[WATCH + "length_reward_corr"] = self.correlation()
        out[WATCH + "context_probes"] = w.get("context_probes", 0.0)
        for name in ("context_flips", "context_lifts"):
            out[WATCH + name] = _ratio(w.get(name, 0.0), w.get("context_probes", 0.0))
        out[WATCH + "alarms"] = w.get("alarms", 0.0)
        out[WATCH + "masked"] = w.get("masked", 0.0)
        for name, value in w.items():
            if name.startswith("alarm/"):
                out[WATCH + name] = value
        return out
