"""The RewardBench evaluation's configuration (the top level of ``reward_bench_*.yaml``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from nemo_genrm.config.base import StrictModel
from nemo_genrm.config.genrm import ResourcesConfig
from nemo_genrm.config.judge import JudgeConfig, SamplingConfig
from nemo_genrm.config.loading import report_problems
from nemo_genrm.config.prompt import PromptConfig, VerdictConfig, builtin_template, template_problems


class RewardBenchDataConfig(StrictModel):
    """Where RewardBench examples come from."""

    path: str | None = Field(None, description="Local JSONL, JSON or Parquet file (same columns).")
    hf_name: str | None = Field("allenai/reward-bench", description="Hub dataset, when no path.")
    split: str = Field("filtered", description="Dataset split.")
    subsets: list[str] | None = Field(None, description="Keep only these subsets; null keeps all.")
    limit: int | None = Field(None, ge=1, description="Keep the first N examples (quick runs).")
    pref_sets: bool = Field(
        False, description="Also judge the prior preference sets; Score then uses the leaderboard's weights."
    )
    pref_sets_path: str | None = Field(None, description="Local copy of the prior sets (same columns).")
    pref_sets_hf_name: str = Field("allenai/pref-test-sets", description="Hub dataset of the prior sets.")

    @model_validator(mode="after")
    def _check(self) -> RewardBenchDataConfig:
        if not self.path and not self.hf_name:
            report_problems(self, ["set data.path (a local file) or data.hf_name (a hub dataset)"])
        return self


class RewardBenchConfig(StrictModel):
    """The RewardBench evaluation: a judge, its prompt and verdict, and the protocol."""

    judge: JudgeConfig
    judges: list[JudgeConfig] = Field(
        default_factory=list, description="Ensemble: several judges, the verdict is their majority (judge: the first)."
    )
    votes: int = Field(
        1, ge=1, description="Ensemble: samples per judge and request (temperature > 0), majority verdict."
    )
    ties: Literal["reference", "abstain"] = Field(
        "reference", description="Ensemble ties: reference (reward-bench's set-order pick) | abstain (no verdict)."
    )
    prompt: PromptConfig = Field(default_factory=lambda: PromptConfig(template="pairwise"))
    verdict: VerdictConfig = Field(default_factory=lambda: VerdictConfig(parser="choice"))
    resources: ResourcesConfig = Field(default_factory=lambda: ResourcesConfig(gpus_per_replica=0))
    protocol: Literal["pairwise", "rating", "best_of_4"] = Field(
        "pairwise",
        description="pairwise: one call, A/B; rating: each response rated alone; best_of_4: RewardBench 2.",
    )
    both_orders: bool = Field(False, description="Also judge the swapped placement and report position consistency.")
    seed: int = Field(0, description="Seeds the A/B placement coin with the example id.")
    placement: Literal["seeded", "reference_random"] = Field(
        "seeded",
        description="seeded: a coin per example from seed and id; reference_random: unseeded, as the reference.",
    )
    long_prompts: Literal["skip", "shorten"] = Field(
        "skip",
        description="Examples too long for max_model_len: skip (counted apart) or shorten both responses alike.",
    )
    model_label: str | None = Field(
        None, description="Model name in the results (org/name); null: judge.model_name, prefixed local/ if needed."
    )
    data: RewardBenchDataConfig = Field(default_factory=RewardBenchDataConfig)
    output_dir: str = Field("results/reward_bench", description="Results JSON and per-example JSONL.")
    compare_to: str | None = Field(None, description="Reference results JSON to compare with.")
    tolerance: float = Field(0.02, ge=0.0, description="Largest accepted |ours - reference|.")

    @model_validator(mode="before")
    @classmethod
    def _first_judge(cls, data: Any) -> Any:
        # An ensemble given as judges: [...] needs no separate judge: the first one stands for it
        # where one judge's settings are read (its tokenizer for long_prompts: shorten).
        if isinstance(data, dict) and data.get("judges") and data.get("judge") is None:
            data = {**data, "judge": data["judges"][0]}
        return data

    @property
    def members(self) -> list[JudgeConfig]:
        """The judges that vote: ``judges`` when set, else ``judge``."""
        return list(self.judges) or [self.judge]

    @model_validator(mode="after")
    def _check(self) -> RewardBenchConfig:
        if self.prompt.preset == "rewardbench":
            for member in {id(m): m for m in (self.judge, *self.judges)}.values():
                _reference_sampling(member.sampling, self.protocol)
        problems = _ensemble_problems(self)
        wanted = {"pairwise": "choice", "rating": "rating", "best_of_4": "choice"}[self.protocol]
        if self.verdict.parser != wanted:
            problems.append(f"protocol {self.protocol!r} needs verdict.parser: {wanted} (got {self.verdict.parser!r})")
        kind = builtin_template(self.prompt.template)
        if self.protocol == "best_of_4":
            problems += _best_of_4_problems(self)
        elif self.prompt.preset is None and kind is not None and kind != self.protocol:
            problems.append(f"protocol {self.protocol!r} needs prompt.template: {self.protocol} (got {kind!r})")
        if self.both_orders and self.protocol == "rating":
            problems.append(
                "both_orders: true applies to protocol: pairwise only (each rating sees one "
                "response, so there is no order to swap): set both_orders: false"
            )
        lo, hi = self.verdict.rating_min, self.verdict.rating_max
        multi_digit = any(len(str(r)) > 1 for r in range(lo, hi + 1)) if lo < hi else False
        if self.protocol == "rating" and self.judge.verdict_from == "logprobs" and multi_digit:
            problems.append(
                f"protocol: rating with judge.verdict_from: logprobs scores each label by its tokens' "
                f"log-probabilities, so among ratings {lo}..{hi} a multi-digit label such as '10' can "
                "never beat its prefix '1': use judge.verdict_from: text, or a rating range within "
                "one digit (e.g. rating_min: 1, rating_max: 9)"
            )
        if self.prompt.preset is None and self.protocol != "best_of_4":
            fields = {"pairwise": ("question", "response_a", "response_b"), "rating": ("question", "response")}
            problems += template_problems(self.prompt, self.verdict, fields[self.protocol])
        report_problems(self, problems)
        return self


# What reward-bench's generative scripts send: greedy, 2048 new tokens for a pairwise verdict
# (vLLM and OpenAI paths), 1024 for a rating.
REFERENCE_MAX_NEW_TOKENS = {"pairwise": 2048, "rating": 1024, "best_of_4": 2048}


def _reference_sampling(sampling: SamplingConfig, protocol: str) -> None:
    """Under the rewardbench preset, default the sampling to the reference's where not set."""
    if "max_new_tokens" not in sampling.model_fields_set:
        sampling.max_new_tokens = REFERENCE_MAX_NEW_TOKENS[protocol]
    for name in ("temperature", "top_p"):
        if name not in sampling.model_fields_set:
            setattr(sampling, name, SamplingConfig.model_fields[name].default)


def _best_of_4_problems(cfg: RewardBenchConfig) -> list[str]:
    """Settings that RewardBench 2 (``protocol: best_of_4``) does not take."""
    problems = []
    if cfg.both_orders:
        problems.append("both_orders applies to protocol: pairwise (best_of_4 places the chosen response once)")
    if cfg.long_prompts == "shorten":
        problems.append("long_prompts: shorten applies to pairwise and rating; use skip with best_of_4")
    if cfg.data.pref_sets:
        problems.append("data.pref_sets belongs to RewardBench (v1); best_of_4 is RewardBench 2")
    if any(m.verdict_from == "logprobs" for m in cfg.members):
        problems.append("protocol: best_of_4 reads verdicts from text: set judge.verdict_from: text")
    return problems


def _ensemble_problems(cfg: RewardBenchConfig) -> list[str]:
    """What is wrong with the ensemble settings (``judges``, ``votes``)."""
    problems = []
    if len(cfg.judges) == 1:
        problems.append("judges holds one judge: set judge instead, or list two or more")
    if (cfg.judges or cfg.votes > 1) and cfg.protocol == "rating":
        problems.append(
            "judges and votes apply to protocols pairwise and best_of_4 (the reference has no rating ensembles)"
        )
    if cfg.votes > 1:
        seeded = [i for i, m in enumerate(cfg.members) if m.backend in ("vllm", "http")]
        if seeded:
            # These engines send judge.sampling.seed with every request: k copies, k equal samples.
            problems.append(
                f"votes: {cfg.votes} with the vllm or http engine (judge(s) {seeded}) would repeat one sample, as "
                "every request carries judge.sampling.seed: list the judge under judges with different seeds"
            )
        greedy = [i for i, m in enumerate(cfg.members) if m.sampling.temperature == 0 or m.verdict_from == "logprobs"]
        if greedy:
            problems.append(
                f"votes: {cfg.votes} needs judges that sample (temperature > 0, verdict_from: text): "
                f"judge(s) {greedy} would give {cfg.votes} identical verdicts"
            )
    return problems
