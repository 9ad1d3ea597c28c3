"""``reward.watchdog``: canaries in the judge calls, drift signals and the alarm (:mod:`nemo_genrm.watchdog`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from nemo_genrm.config.base import StrictModel


class CanaryConfig(StrictModel):
    """Known-wrong and known-right answers mixed into the judge calls (reference mode only)."""

    rate: float = Field(
        0.03,
        ge=0.0,
        le=1.0,
        description=(
            "Canaries per real judge prompt, as a running budget: a canary is sent once the budget "
            "holds a whole one (0.03: one canary per ~33 real prompts). 0 turns canaries off."
        ),
    )
    max_per_call: int = Field(8, ge=1, description="Most canaries added to one judge call.")
    cache_size: int = Field(
        4096, ge=1, description="Canaries (question, reference, shape) remembered: each is judged once."
    )
    seed: int = Field(0, description="Seeds which questions and shapes the canaries take.")


class ThresholdsConfig(StrictModel):
    """When the alarm fires: a share over the window at or above its threshold (``null``: never)."""

    canary_false_accept: float | None = Field(
        0.25, ge=0.0, le=1.0, description="Known-wrong canaries the reward accepted, over those judged."
    )
    hedged: float | None = Field(0.5, ge=0.0, le=1.0, description="Responses with several distinct final values.")
    verdict_lines: float | None = Field(
        0.2, ge=0.0, le=1.0, description="Responses with a verdict-like or label-like line (or a role turn)."
    )
    openers: float | None = Field(0.5, ge=0.0, le=1.0, description="Responses that open with content-free words.")
    verifier_vetoes: float | None = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="Judged samples where the judge said 1 to a value the verifier found different (verifier: both).",
    )
    length_reward_corr: float | None = Field(
        None, ge=-1.0, le=1.0, description="Correlation of response length and reward (off by default)."
    )
    rise: float | None = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="A share rising by this much from the window's older half to its newer half also fires.",
    )


class WatchdogConfig(StrictModel):
    """The reward watchdog: it tells, while training, that the reward is being gamed."""

    enabled: bool = Field(True, description="Watch the reward (canaries, drift signals, alarm).")
    action: Literal["warn", "mask", "stop"] = Field(
        "warn",
        description=(
            "warn: a loud log line with examples (at most once per window); mask: also mask later "
            "samples of the flagged shape; stop: raise RewardHackingSuspected (the GRPO driver "
            "after the step's checkpoint, elsewhere at the next step)."
        ),
    )
    window: int = Field(8, ge=2, description="Judge calls the drift signals' alarm looks back over.")
    canary_window: int = Field(
        32, ge=1, description="Known-wrong canaries judged (the latest) that the canary alarm looks back over."
    )
    min_canaries: int = Field(
        8, ge=1, description="Known-wrong canaries judged in the canary window before their share can fire."
    )
    min_samples: int = Field(64, ge=1, description="Responses in the window before a drift signal can fire.")
    canaries: CanaryConfig = Field(default_factory=CanaryConfig)
    thresholds: ThresholdsConfig = Field(default_factory=ThresholdsConfig)
