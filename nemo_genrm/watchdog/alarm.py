"""The alarm: thresholds on the canaries and the drift signals over a window of judge calls.

A drift signal fires when its share over the last ``window`` judge calls reaches its threshold
(``absolute``), or when its share in the newer half of a full window exceeds the older half's by
``thresholds.rise`` (``rise``); only once ``min_samples`` responses were read (half of that in each
half for a rise). Canaries are few per judge call (a budget of a few percent of the prompts), so
their share is over the last ``canary_window`` known-wrong canaries judged instead, once
``min_canaries`` were (absolute only).
"""

from __future__ import annotations

import collections
from dataclasses import asdict, dataclass

from nemo_genrm.config.watchdog import WatchdogConfig
from nemo_genrm.watchdog.tally import CANARY, SIGNALS, WATCH, WatchTally

CHECKED: tuple[str, ...] = ("canary_false_accept", *SIGNALS, "verifier_vetoes")
"""Every signal the alarm checks (and ``length_reward_corr``, absolute only)."""


def metric_name(signal: str) -> str:
    """The metric that shows a signal."""
    return CANARY + "false_accept_rate" if signal == "canary_false_accept" else WATCH + signal


@dataclass(frozen=True)
class Firing:
    """One signal past its threshold.

    Attributes:
        signal: The signal (:data:`CHECKED`, or ``length_reward_corr``).
        kind: ``absolute`` or ``rise``.
        value: The share over the window (``absolute``) or its rise between the halves (``rise``).
        threshold: What it reached.
        seen: The share's denominator over the window (canaries judged, responses read).
        metric: The metric to read.
    """

    signal: str
    kind: str
    value: float
    threshold: float
    seen: float
    metric: str

    def as_dict(self) -> dict[str, object]:
        """The firing as plain data (for the evidence)."""
        return asdict(self)


class Alarm:
    """The window of judge calls and the checks over it.

    Args:
        cfg: ``reward.watchdog``.
    """

    def __init__(self, cfg: WatchdogConfig) -> None:
        self.cfg = cfg
        self._window: collections.deque[WatchTally] = collections.deque(maxlen=cfg.window)
        self._canaries: collections.deque[int] = collections.deque(maxlen=cfg.canary_window)  # 1: accepted

    def push(self, tally: WatchTally) -> list[Firing]:
        """Add one judge call's tally and return every signal past its threshold now."""
        self._window.append(tally)
        accepted, judged = tally.share("canary_false_accept")
        self._canaries.extend([1] * int(accepted) + [0] * int(judged - accepted))
        total = _sum(self._window)
        firings = []
        canaries = WatchTally(
            canary={"false_accept": float(sum(self._canaries)), "wrong_judged": float(len(self._canaries))}
        )
        threshold = self.cfg.thresholds.canary_false_accept
        num, den = canaries.share("canary_false_accept")
        if threshold is not None and den >= self.cfg.min_canaries and num / den >= threshold:
            firings.append(
                Firing("canary_false_accept", "absolute", num / den, threshold, den, metric_name("canary_false_accept"))
            )
        for signal in CHECKED[1:]:
            threshold = getattr(self.cfg.thresholds, signal)
            least = self.cfg.min_samples
            num, den = total.share(signal)
            if threshold is not None and den >= least and num / den >= threshold:
                firings.append(Firing(signal, "absolute", num / den, threshold, den, metric_name(signal)))
                continue
            rise = self._rise(signal, least)
            if rise is not None:
                firings.append(rise)
        corr = self.cfg.thresholds.length_reward_corr
        n = total.watch.get("len_n", 0.0)
        if corr is not None and n >= self.cfg.min_samples and total.correlation() >= corr:
            firings.append(
                Firing("length_reward_corr", "absolute", total.correlation(), corr, n, WATCH + "length_reward_corr")
            )
        return firings

    def _rise(self, signal: str, least: int) -> Firing | None:
        rise = self.cfg.thresholds.rise
        if rise is None or len(self._window) < self.cfg.window:
            return None
        half = len(self._window) // 2
        calls = list(self._window)
        (old_num, old_den), (new_num, new_den) = _sum(calls[:half]).share(signal), _sum(calls[half:]).share(signal)
        if min(old_den, new_den) < least / 2:
            return None
        change = new_num / new_den - old_num / old_den
        if change < rise:
            return None
        return Firing(signal, "rise", change, rise, old_den + new_den, metric_name(signal))


def _sum(tallies: collections.abc.Iterable[WatchTally]) -> WatchTally:
    total = WatchTally()
    for tally in tallies:
        total.add(tally)
    return total
