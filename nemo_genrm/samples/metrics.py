"""Counters of environment steps and the ``genrm/*`` metrics computed from them.

A :class:`StepTally` holds what one step (or several, merged) counted; :meth:`StepTally.metrics`
turns it into the flat ``genrm/...`` dict loggers take. Definitions:

- ``genrm/mean_reward``: mean reward over the samples that count: every sample except the
  parse failures masked by ``verdict.on_parse_failure: mask``. ``nan`` when none counts.
- ``genrm/count/<reason>`` and ``genrm/rate/<reason>``: samples per outcome reason
  (:data:`nemo_genrm.samples.types.REASONS`), and that count over all samples.
- ``genrm/parse_failure_rate``: parse failures over the samples whose judge reply arrived
  (``judged + parse_failure``): how often the judge's reply holds no verdict.
- ``genrm/parse_failure/<why>``: the parse failures per sub-reason
  (:data:`nemo_genrm.samples.types.PARSE_FAILURE_WHYS`). ``truncated``: the judge ran out of tokens
  before its verdict (it used all ``max_new_tokens``, or stopped inside a ``<think>`` block), a
  budget to raise rather than a judge that cannot follow the format; ``no_label``, ``empty``,
  ``ambiguous``, ...: what the verdict parser found instead of a verdict; ``no_label_probs``: no
  usable label probability (verdicts from logprobs). ``truncated`` is always reported, the
  others from the first step that has one. Pairwise and rubric samples combine several replies
  and are not split by sub-reason.
- ``genrm/bad_input/<why>``: the ``bad_input`` samples per detail
  (:data:`nemo_genrm.samples.types.BAD_INPUT_WHYS`: ``metadata_not_dict``, ``content_not_text``,
  ``no_text_part``, ...), each from the first step that has one.
- ``genrm/masked``: samples left out of ``mean_reward`` (masked parse failures).
- ``genrm/judge_prompts``: distinct prompts sent to the judge; ``genrm/dedup_hits``: samples
  that reused another sample's verdict in the same step (sent samples minus prompts).
- ``genrm/prompt_tokens``, ``genrm/output_tokens``, ``genrm/truncated_prompts``,
  ``genrm/engine_errors``, ``genrm/judge_restarts``: summed from the results of the step's judge calls
  (each call returns its own counts; restarts and deadlines are the pool's during that call).
- ``genrm/votes/*``, ``genrm/swap/*``, ``genrm/pairwise/*``, ``genrm/rubric/*``: the reward
  mode's counters and rates (:mod:`nemo_genrm.modes`), present when that mode or option ran.
- ``genrm/verifier/<decision>`` (``equal``, ``different``, ``undecided``) with
  ``genrm/verifier/undecided/<side>`` (``reference``: not a value, e.g. ``Paris``; ``answer``) over
  ``genrm/verifier/checked`` samples, ``genrm/verifier/undecided_rate``, and under
  ``reward.verifier: both`` ``genrm/verifier/disagreements`` (the judge's verdict against a decided
  value) and ``genrm/verifier/vetoes`` (the judge said 1 to a value the verifier found different:
  the reward was lowered to 0). A veto rate that climbs is a policy learning a notation the judge
  misreads (:mod:`nemo_genrm.modes.reference`).
- ``genrm/deadline_exceeded``: judge calls that passed the step deadline (their unfinished
  samples got ``judge_error``; busy replicas were replaced); ``genrm/judge_unavailable``: judge
  calls that found no replica alive (their samples got ``judge_error``; past
  ``fault_tolerance.unavailable_grace_s`` the step raises instead); ``genrm/judge_node_losses``:
  judge replicas lost with their node during the step's judge calls (their work went to the
  other replicas; the pool relaunches them where Ray reschedules their placement).
- ``genrm/judge_latency_s``: mean wall time of one judge call; ``genrm/judge_latency_s/p50``
  and ``/p95`` over a window of recent calls (one call per step).
- ``genrm/step_time_s``: mean wall time of a step, all included; ``genrm/wake_s`` and
  ``genrm/sleep_s``: time spent waking and putting to sleep a colocated judge.
- ``genrm/reasoning_tokens/mean``, ``/p95``, ``/max``: length of the judge's thought over the
  replies that had one (``judge.sampling.reasoning``); ``genrm/reasoning_closed``: thoughts the
  engine closed at their budget to ask for the verdict; ``genrm/reasoning_truncated``: thoughts
  cut at their budget and left without a verdict (:mod:`nemo_genrm.judges.reasoning`). Present
  once a judge has reasoned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

from nemo_genrm.judges.results import reasoning_summary
from nemo_genrm.samples.types import BAD_INPUT, JUDGED, PARSE_FAILURE, REASONS, SampleResult
from nemo_genrm.verdicts import TRUNCATED

PREFIX = "genrm/"


def _zero_counts() -> dict[str, int]:
    return dict.fromkeys(REASONS, 0)


def _zero_whys() -> dict[str, int]:
    return {TRUNCATED: 0}  # always reported; the other sub-reasons once they occur


@dataclass
class StepTally:
    """What one or more steps counted (merge steps with :meth:`add`)."""

    steps: int = 0
    samples: int = 0
    counts: dict[str, int] = field(default_factory=_zero_counts)
    masked: int = 0
    reward_sum: float = 0.0
    reward_count: int = 0
    sent_samples: int = 0
    judge_prompts: int = 0
    judge_calls: int = 0
    judge_time_s: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0
    truncated_prompts: int = 0
    parse_failures: dict[str, int] = field(default_factory=_zero_whys)  # per sub-reason (why)
    bad_inputs: dict[str, int] = field(default_factory=dict)  # per detail (why)
    engine_errors: int = 0
    judge_restarts: int = 0
    deadline_exceeded: int = 0
    judge_unavailable: int = 0
    judge_node_losses: int = 0
    step_time_s: float = 0.0
    wake_s: float = 0.0
    sleep_s: float = 0.0
    modes: dict[str, float] = field(default_factory=dict)  # reward-mode counters (nemo_genrm.modes)
    reasoning_lengths: dict[int, int] = field(default_factory=dict)  # thought length -> replies
    reasoning_closed: int = 0
    reasoning_truncated: int = 0

    def count(self, result: SampleResult) -> None:
        """Count one sample's settled result: its reason, its detail (parse failure or bad input),
        mask and reward."""
        self.counts[result.reason] = self.counts.get(result.reason, 0) + 1
        if result.reason == PARSE_FAILURE and result.why is not None:
            self.parse_failures[result.why] = self.parse_failures.get(result.why, 0) + 1
        if result.reason == BAD_INPUT and result.why is not None:
            self.bad_inputs[result.why] = self.bad_inputs.get(result.why, 0) + 1
        if result.masked:
            self.masked += 1
        else:
            self.reward_sum += result.reward
            self.reward_count += 1

    def add(self, other: StepTally) -> None:
        """Add another tally's counts into this one."""
        for f in fields(self):
            if isinstance(getattr(self, f.name), dict):
                mine = getattr(self, f.name)
                for name, n in getattr(other, f.name).items():
                    mine[name] = mine.get(name, 0) + n
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def metrics(self, recent_latencies: Sequence[float] = ()) -> dict[str, float]:
        """The ``genrm/*`` metrics of this tally (see the module docstring).

        Args:
            recent_latencies: Wall times of recent judge calls, for the percentiles.

        Returns:
            A flat dict of floats.
        """
        n = self.samples
        out: dict[str, float] = {
            "mean_reward": self.reward_sum / self.reward_count if self.reward_count else math.nan,
            "num_samples": float(n),
            "masked": float(self.masked),
            "judge_prompts": float(self.judge_prompts),
            # Pairwise and rubric modes send more prompts than samples: no hits there.
            "dedup_hits": float(max(0, self.sent_samples - self.judge_prompts)),
            "parse_failure_rate": _ratio(self.counts[PARSE_FAILURE], self.counts[JUDGED] + self.counts[PARSE_FAILURE]),
            "prompt_tokens": float(self.prompt_tokens),
            "output_tokens": float(self.output_tokens),
            "truncated_prompts": float(self.truncated_prompts),
            "engine_errors": float(self.engine_errors),
            "judge_restarts": float(self.judge_restarts),
            "deadline_exceeded": float(self.deadline_exceeded),
            "judge_unavailable": float(self.judge_unavailable),
            "judge_node_losses": float(self.judge_node_losses),
            "judge_latency_s": _ratio(self.judge_time_s, self.judge_calls),
            "judge_latency_s/p50": percentile(recent_latencies, 50),
            "judge_latency_s/p95": percentile(recent_latencies, 95),
            "step_time_s": _ratio(self.step_time_s, self.steps),
            "wake_s": self.wake_s,
            "sleep_s": self.sleep_s,
        }
        for reason in REASONS:
            out[f"count/{reason}"] = float(self.counts[reason])
            out[f"rate/{reason}"] = _ratio(self.counts[reason], n)
        for why, count in self.parse_failures.items():
            out[f"parse_failure/{why}"] = float(count)
        for why, count in self.bad_inputs.items():
            out[f"bad_input/{why}"] = float(count)
        if self.reasoning_lengths or self.reasoning_closed or self.reasoning_truncated:
            for name, value in reasoning_summary(self.reasoning_lengths).items():
                out[f"reasoning_tokens/{name}"] = value
            out["reasoning_closed"] = float(self.reasoning_closed)
            out["reasoning_truncated"] = float(self.reasoning_truncated)
        result = {PREFIX + k: v for k, v in out.items()}
        if self.modes:
            result.update(mode_metrics(self.modes))
        return result


# Rates derived from the mode counters: metric -> (numerator, denominator).
RATES: dict[str, tuple[str, str]] = {
    "votes/agreement": ("votes/agreement_sum", "votes/requests"),
    "votes/tie_rate": ("votes/ties", "votes/requests"),
    "swap/disagreement_rate": ("swap/disagreements", "swap/pairs"),
    "pairwise/order_disagreement_rate": ("pairwise/order_disagreements", "pairwise/pairs"),
    "pairwise/failed_pair_rate": ("pairwise/failed_pairs", "pairwise/pairs"),
    "rubric/met_rate": ("rubric/items_met", "rubric/items"),
    "rubric/item_failure_rate": ("rubric/item_failures", "rubric/items"),
    "verifier/undecided_rate": ("verifier/undecided", "verifier/checked"),
}


def mode_metrics(counters: Mapping[str, float]) -> dict[str, float]:
    """The ``genrm/<mode>/*`` metrics: every counter, and the rates of :data:`RATES` it allows.

    ``pairwise/order_disagreement_rate`` is over the pairs judged in both orders (failed pairs
    left out); every other rate is over its counter's total.
    """
    out = {PREFIX + name: float(value) for name, value in counters.items()}
    for name, (num, den) in RATES.items():
        total = counters.get(den, 0.0)
        if name == "pairwise/order_disagreement_rate":
            total -= counters.get("pairwise/failed_pairs", 0.0)
        if den in counters:
            out[PREFIX + name] = counters.get(num, 0.0) / total if total else 0.0
    return out


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile with linear interpolation; ``nan`` for no values.

    Args:
        values: The sample.
        q: Percentile in ``[0, 100]``.

    Returns:
        The percentile.
    """
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
