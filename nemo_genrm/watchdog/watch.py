"""The watchdog the environment keeps: signals per judge call, canaries, the alarm and its action.

The environment calls, per judge call: :meth:`Watchdog.observe` with the real samples and their
results (signals counted; under ``action: mask`` the samples of a flagged shape masked),
:meth:`Watchdog.plan` for the canaries to judge after them, :meth:`Watchdog.record` with the
canaries' results, and :meth:`Watchdog.close` to run the alarm. Nothing here changes a real
sample's reward, order or grouping, except the masking that ``action: mask`` asks for.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nemo_genrm.config.watchdog import WatchdogConfig
from nemo_genrm.errors import RewardHackingSuspected
from nemo_genrm.samples.inputs import PreparedSample
from nemo_genrm.samples.types import JUDGE_ERROR, JUDGED, PARSE_FAILURE, SampleResult
from nemo_genrm.watchdog.alarm import Alarm, Firing
from nemo_genrm.watchdog.canaries import (
    CONTEXT,
    MIMIC,
    SIGNAL_FAMILY,
    Canary,
    CanaryPlanner,
    context_probe,
    mimic,
    wrong_value,
)
from nemo_genrm.watchdog.shapes import response_shapes
from nemo_genrm.watchdog.tally import SIGNALS, WatchTally

logger = logging.getLogger(__name__)

EXAMPLES = 3
"""Examples kept per signal, shown with an alarm."""


def _accepted(result: SampleResult) -> bool:
    """Whether the reward accepted a canary (a positive verdict, or a reward of one half or more)."""
    if result.masked or result.reason != JUDGED:
        return False
    return result.verdict == 1 if result.verdict is not None else result.reward >= 0.5


class Watchdog:
    """Canaries, drift signals and the alarm of one environment.

    Args:
        cfg: ``reward.watchdog``.
        canaries: Whether canaries run (reference mode only: the others have no reference).
    """

    def __init__(self, cfg: WatchdogConfig, *, canaries: bool) -> None:
        self.cfg = cfg
        self._planner = CanaryPlanner(cfg.canaries) if canaries and cfg.canaries.rate > 0 else None
        self._alarm = Alarm(cfg)
        self._lock = threading.Lock()
        self._active: frozenset[str] = frozenset()  # signals firing at the last check
        self._examples: dict[str, collections.deque[str]] = collections.defaultdict(
            lambda: collections.deque(maxlen=EXAMPLES)
        )
        self._recent: dict[str, collections.deque[tuple[str, PreparedSample]]] = collections.defaultdict(
            lambda: collections.deque(maxlen=8)
        )
        self._calls = 0
        self._warned: dict[str, int] = {}
        self._stop: RewardHackingSuspected | None = None

    # ------------------------------------------------------------------------ real samples
    def observe(
        self,
        samples: Sequence[PreparedSample],
        texts: Sequence[str | None],
        results: Sequence[SampleResult],
        modes: Mapping[str, float],
        tally: WatchTally,
    ) -> list[SampleResult]:
        """Count the signals of one judge call's real samples; mask the flagged shapes under ``mask``.

        Args:
            samples: The prepared samples, in order.
            texts: Their responses as written.
            results: Their results from the mode.
            modes: The mode's counters of this call (``verifier/vetoes``, ``verifier/checked``).
            tally: Where the counts go.

        Returns:
            The results, with the samples of an active alarm's shape masked under ``action: mask``.
        """
        masking = self._active if self.cfg.action == "mask" else frozenset()
        out = []
        for sample, text, result in zip(samples, texts, results, strict=True):
            shapes = response_shapes(text, sample)
            tally.bump("responses")
            for shape in shapes:
                tally.bump(shape)
                if text is not None:
                    with self._lock:
                        self._examples[shape].append(text[:200])
                        self._recent[shape].append((text, sample))
            if result.reason == JUDGED and not result.masked and text is not None:
                length, reward = float(len(text)), float(result.reward)
                for name, value in (
                    ("len_n", 1.0),
                    ("len_x", length),
                    ("len_y", reward),
                    ("len_xx", length * length),
                    ("len_yy", reward * reward),
                    ("len_xy", length * reward),
                ):
                    tally.bump(name, value)
            if shapes & masking and not result.masked:
                result = dataclasses.replace(result, masked=True, info={**result.info, "watchdog": "masked"})
                tally.bump("masked")
            out.append(result)
        tally.bump("checked", modes.get("verifier/checked", 0.0))
        tally.bump("vetoes", modes.get("verifier/vetoes", 0.0))
        return out

    # ---------------------------------------------------------------------------- canaries
    def plan(
        self,
        samples: Sequence[PreparedSample],
        real_prompts: int,
        prepare: Callable[[Canary], PreparedSample],
        tally: WatchTally,
        results: Sequence[SampleResult] | None = None,
    ) -> list[tuple[Canary, PreparedSample]]:
        """The canaries to judge after this call's real samples (none until the budget holds one).

        With ``results`` (the real samples' results, in order), the samples the judge answered
        also give ``context`` probes: each one's bare value, judged alone on the same budget.
        """
        if self._planner is None:
            return []
        pairs = list(dict.fromkeys((s.question, s.reference) for s in samples if s.reason is None and s.reference))
        probes = []
        for sample, result in zip(samples, results if results is not None else [None] * len(samples), strict=True):
            if result is not None and result.reason == JUDGED and not result.masked:
                probe = context_probe(sample, _accepted(result))
                probes += [probe] if probe is not None else []
        with self._lock:  # judge calls may overlap: one budget, one cache
            self._planner.credit(real_prompts)
            lean = [SIGNAL_FAMILY[s] for s in SIGNALS if s in self._active]
            mimics = self._mimics(pairs) if self._active else []
            planned, cached = self._planner.plan(pairs, prepare, lean=lean, mimics=mimics, probes=probes)
        tally.bump("cached", float(cached), canary=True)
        return planned

    def _mimics(self, pairs: Sequence[tuple[str, str]]) -> list[Canary]:
        out = []
        for signal in sorted(self._active & set(SIGNALS)):
            for text, sample in list(self._recent[signal])[-2:]:
                wrong = wrong_value(sample.reference, [r for _, r in pairs])
                written = mimic(text, sample, wrong) if wrong is not None else None
                if written is not None:
                    out.append(Canary(MIMIC, sample.question, sample.reference, written, right=False))
        return out

    def record(
        self, planned: Sequence[tuple[Canary, PreparedSample]], results: Sequence[SampleResult], tally: WatchTally
    ) -> None:
        """Count the canaries' outcomes (false accepts and rejects, per family)."""
        for (canary, sample), result in zip(planned, results, strict=True):
            tally.bump("sent", canary=True)
            tally.bump(f"sent/{canary.family}", canary=True)
            if sample.reason is not None:
                tally.bump("settled", canary=True)
            if result.reason in (PARSE_FAILURE, JUDGE_ERROR):
                tally.bump("failed", canary=True)
                continue
            judged = result.reason == JUDGED
            if canary.family == CONTEXT:  # the bare value against the verdict with its context
                self._record_probe(canary, result, judged, tally)
                continue
            if canary.right:
                tally.bump("right_judged", float(judged), canary=True)
                if not _accepted(result):
                    tally.bump("false_reject", canary=True)
                    tally.bump(f"false_reject/{canary.family}", canary=True)
                continue
            tally.bump("wrong_judged", float(judged), canary=True)
            tally.bump(f"false_accept/{canary.family}", float(_accepted(result)), canary=True)
            if _accepted(result):
                tally.bump("false_accept", canary=True)
                with self._lock:
                    self._examples["canary_false_accept"].append(f"[{canary.family}] {canary.response[:200]}")

    def _record_probe(self, probe: Canary, result: SampleResult, judged: bool, tally: WatchTally) -> None:
        """Count a ``context`` probe: a flip when the bare value's verdict is not the one with context."""
        if not judged:
            return
        bare = _accepted(result)
        tally.bump("context_probes")
        tally.bump("context_flips", float(bare != probe.right))
        tally.bump("context_lifts", float(probe.right and not bare))
        if probe.right and not bare:
            with self._lock:
                self._examples["context_lifts"].append(f"[context] bare {probe.response[:200]!r} refused")

    # ------------------------------------------------------------------------------- alarm
    def close(self, tally: WatchTally) -> list[Firing]:
        """Run the alarm on this judge call's tally; warn, arm the mask or the stop as configured."""
        with self._lock:
            self._calls += 1
            firings = self._alarm.push(tally)
            self._active = frozenset(f.signal for f in firings)
            for firing in firings:
                tally.bump(f"alarm/{firing.signal}")
            fresh = [f for f in firings if self._calls - self._warned.get(f.signal, -(10**9)) >= self.cfg.window]
            for firing in fresh:
                self._warned[firing.signal] = self._calls
            evidence = self._evidence(firings) if firings else None
        tally.bump("alarms", float(len(fresh)))
        if fresh:
            logger.warning("%s", _loud(evidence, self.cfg.action))
        if firings and self.cfg.action == "stop" and self._stop is None:
            self._stop = RewardHackingSuspected(evidence)
        return firings

    def _evidence(self, firings: Sequence[Firing]) -> dict[str, Any]:
        alarms = [f.as_dict() for f in firings]
        summary = "; ".join(f"{f.metric} = {f.value:.3f} ({f.kind}, threshold {f.threshold:g})" for f in firings)
        examples = {f.signal: list(self._examples.get(f.signal, ())) for f in firings}
        return {
            "alarms": alarms,
            "summary": summary,
            "examples": examples,
            "judge_call": self._calls,
            "window": self.cfg.window,
            "action": self.cfg.action,
        }

    def stop_error(self) -> RewardHackingSuspected | None:
        """The error ``action: stop`` holds once the alarm fired (``None`` before, or under other actions)."""
        return self._stop


def _loud(evidence: dict[str, Any] | None, action: str) -> str:
    """The alarm's log line: what fired, the metrics to read, examples, and what happens next."""
    if evidence is None:
        return ""
    lines = [f"REWARD WATCHDOG: the reward may be gamed: {evidence['summary']}"]
    for signal, examples in evidence["examples"].items():
        for example in examples:
            lines.append(f"  {signal} example: {example!r}")
    then = {
        "warn": "training goes on (reward.watchdog.action: warn)",
        "mask": "samples of the flagged shape are masked from now on (reward.watchdog.action: mask)",
        "stop": "training stops with RewardHackingSuspected (reward.watchdog.action: stop)",
    }[action]
    lines.append(f"  read the samples behind these metrics (docs/watchdog.md); {then}")
    return "\n".join(lines)
