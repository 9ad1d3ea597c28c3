"""The ``env.genrm`` section: the GenRM environment's judge, prompt, reward modes and resources."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from nemo_genrm.config.base import StrictModel
from nemo_genrm.config.judge import JudgeConfig
from nemo_genrm.config.labels import selector_problems
from nemo_genrm.config.loading import report_problems
from nemo_genrm.config.prompt import (
    PromptConfig,
    VerdictConfig,
    builtin_template,
    mode_template_problems,
    template_problems,
)
from nemo_genrm.config.watchdog import WatchdogConfig


class PairwiseGroupConfig(StrictModel):
    """``reward.mode: pairwise_group``: responses to one prompt judged against each other."""

    template: str = Field(
        "pairwise",
        description="Built-in 'pairwise' or a template file with {question}, {response_a}, {response_b}.",
    )
    group_key: str = Field(
        "group_id",
        description="Metadata key that, with the question, names a response's group (absent: the question alone).",
    )
    group_size: int | None = Field(
        None,
        ge=2,
        description=(
            "Responses per group (num_generations_per_prompt). Set it when samples arrive one by "
            "one (asynchronous rollouts): each group is gathered by its key across step calls and "
            "ranked only when whole. Unset: a group is what one step call holds."
        ),
    )
    group_wait_ms: float = Field(
        30000.0,
        ge=0.0,
        description=(
            "With group_size: how long a group may take to fill from its first response; a group "
            "still short then is masked in full (incomplete_group). A whole group goes on at once, "
            "so only a group that cannot fill waits this long: set it above the spread of one "
            "group's finishing times (shorter than fault_tolerance.step_timeout_s)."
        ),
    )
    straggler_memory_s: float = Field(
        300.0,
        ge=0.0,
        description=(
            "With group_size: how long the responses a short group still lacks are recognised by "
            "its key and masked at once on arrival; later, a response with that key starts a new group."
        ),
    )
    all_pairs_up_to: int = Field(
        8, ge=2, description="Groups with at most this many distinct responses judge every pair."
    )
    opponents: int = Field(4, ge=1, description="Larger groups: random opponents drawn per distinct response.")
    seed: int = Field(0, description="Seeds the draw of opponents.")


class RubricConfig(StrictModel):
    """``reward.mode: rubric``: each rubric item of a sample judged met or not met."""

    template: str = Field(
        "rubric",
        description="Built-in 'rubric' or a template file with {question}, {response}, {criterion}.",
    )
    items_key: str = Field("rubric", description="Metadata key holding a sample's rubric items.")
    file: str | None = Field(
        None,
        description="JSON or YAML mapping a question to its items ('*': items for every question).",
    )


class RewardConfig(StrictModel):
    """How verdicts become rewards."""

    kind: Literal["binary", "probability"] = Field(
        "binary", description="binary: 1/0; probability: P(positive) (needs verdict_from: logprobs)."
    )
    dedup: bool = Field(True, description="Judge identical (question, reference, answer) once per step.")
    mode: Literal["reference", "pairwise_group", "rubric"] = Field(
        "reference",
        description=(
            "reference: answer against the reference; pairwise_group: win rate within the "
            "prompt's group; rubric: weighted share of rubric items met."
        ),
    )
    votes: int = Field(
        1,
        ge=1,
        description=(
            "Samples per judge and prompt, majority verdict; needs every judge to sample "
            "(verdict_from: text, temperature > 0), else the votes are identical."
        ),
    )
    judges: list[JudgeConfig] = Field(
        default_factory=list,
        description="Further judges voting with 'judge' (each on its own resources, placement separate).",
    )
    swap: bool = Field(
        False, description="reference mode: also judge with candidate and reference swapped; both must agree."
    )
    verifier: Literal["none", "rule_first", "both"] = Field(
        "both",
        description=(
            "reference mode: a value-level verifier (math-verify) beside the judge, reading the "
            "answer's final value against the reference. none: the judge alone; rule_first: the "
            "verifier decides what it can (different, or equal with nothing said after the value) "
            "and the judge is asked the rest; "
            "both: every sample is judged and a value the verifier finds different gets 0 (the "
            "lower of the two). Values it cannot read (words, non-math references) are never "
            "rejected by it."
        ),
    )
    pairwise_group: PairwiseGroupConfig = Field(default_factory=PairwiseGroupConfig)
    rubric: RubricConfig = Field(default_factory=RubricConfig)
    watchdog: WatchdogConfig = Field(
        default_factory=WatchdogConfig,
        description="Canaries, drift signals and an alarm on reward hacking (docs/watchdog.md).",
    )


def _mode_problems(cfg: Any) -> list[str]:
    """Checks that tie ``reward``'s mode options to the judge and resources sections."""
    reward, problems = cfg.reward, []
    if reward.mode != "reference" and reward.kind == "probability":
        problems.append(f"reward.kind 'probability' is for mode 'reference'; mode {reward.mode!r} gives a share")
    if reward.swap and reward.mode != "reference":
        problems.append(f"reward.swap swaps candidate and reference: mode {reward.mode!r} has no reference")
    if reward.mode != "reference" and reward.verifier != "none" and "verifier" in reward.model_fields_set:
        problems.append(
            f"reward.verifier {reward.verifier!r} compares an answer's value with the reference: mode "
            f"{reward.mode!r} has no reference; remove reward.verifier (or set it to none)"
        )
    canaries = reward.watchdog.canaries
    if reward.mode != "reference" and canaries.rate > 0 and "rate" in canaries.model_fields_set:
        problems.append(
            f"reward.watchdog.canaries.rate {canaries.rate:g}: canaries are known-wrong answers to a "
            f"reference, and mode {reward.mode!r} has none; remove it (its drift signals still run)"
        )
    for where, judge in [("judge", cfg.judge)] + [(f"reward.judges[{i}]", j) for i, j in enumerate(reward.judges)]:
        if reward.votes > 1:
            problems += _vote_problems(reward.votes, where, judge)
    if reward.judges and cfg.resources.placement != "separate":
        problems.append("reward.judges start judges of their own: use resources.placement 'separate'")
    pairwise = reward.pairwise_group
    if reward.mode == "pairwise_group" and pairwise.group_size is not None:
        step_ms = cfg.fault_tolerance.step_timeout_s * 1000.0
        if pairwise.group_wait_ms >= step_ms:
            problems.append(
                f"reward.pairwise_group.group_wait_ms ({pairwise.group_wait_ms:g}) must be shorter than "
                f"fault_tolerance.step_timeout_s ({cfg.fault_tolerance.step_timeout_s:g} s = {step_ms:g} ms): "
                "a response waits for its group inside its step's deadline"
            )
    if reward.mode == "pairwise_group":
        problems += mode_template_problems(
            reward.pairwise_group.template,
            "pairwise",
            ("question", "response_a", "response_b"),
            cfg.verdict,
            "reward.pairwise_group.template",
        )
    if reward.mode == "rubric":
        problems += mode_template_problems(
            reward.rubric.template,
            "rubric",
            ("question", "response", "criterion"),
            cfg.verdict,
            "reward.rubric.template",
        )
    return problems


def _vote_problems(votes: int, where: str, judge: JudgeConfig) -> list[str]:
    """Why ``votes`` samples of one judge would all be the same, if they would.

    Votes differ only where the judge draws: a verdict from logprobs is one forward pass whose
    label probabilities do not depend on the seed, and greedy decoding ignores it, so such a
    judge gives ``votes`` identical verdicts for ``votes`` times the cost.
    """
    if judge.verdict_from == "logprobs":
        return [
            f"reward.votes ({votes}) with {where}.verdict_from 'logprobs': each vote scores the same "
            f"prompt in one forward pass, so the {votes} votes are identical ({votes} times the cost "
            f"of one): set reward.votes: 1 (or reward.judges for other judges), or {where}.verdict_from: "
            "text with sampling.temperature > 0"
        ]
    if judge.sampling.temperature <= 0.0:
        return [
            f"reward.votes ({votes}) with {where}.sampling.temperature 0: greedy decoding ignores the "
            f"seed, so the {votes} votes are identical: set {where}.sampling.temperature > 0, or "
            "reward.votes: 1"
        ]
    return []


class ResourcesConfig(StrictModel):
    """Where the judge runs: its own placement group, or inside the policy's."""

    placement: Literal["separate", "colocated"] = Field(
        "separate", description="separate: own GPUs; colocated: share the policy's GPUs."
    )
    num_replicas: int = Field(1, ge=1, description="Data-parallel judge replicas.")
    gpus_per_replica: int = Field(1, ge=0, description="GPUs per replica; 0 on a CPU-only machine.")
    num_nodes: int = Field(1, ge=1, description="Nodes the separate placement group may span.")
    gpu_fraction: float = Field(0.3, gt=0.0, le=1.0, description="Colocated only: share of each GPU the judge takes.")
    colocate_with: str | None = Field(None, description="Colocated only: name of the placement group to join.")
    cpus_per_replica: float = Field(1.0, gt=0.0, description="CPUs reserved per judge worker.")
    strategy: Literal["auto", "PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = Field(
        "auto",
        description=(
            "Separate only: Ray placement strategy of the judge's group. auto: STRICT_PACK when "
            "num_nodes is 1, SPREAD over several nodes (tensor parallel: one STRICT_PACK group "
            "per replica). STRICT_SPREAD puts every worker on a node of its own, so losing a "
            "node loses one worker."
        ),
    )
    node_labels: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Separate only: Ray label selector every judge worker's node must match (nodes "
            "started with `ray start --labels genrm-role=judge`), e.g. {genrm-role: judge}; a "
            "condition is a value, '!value', 'in(a,b)' or '!in(a,b)'."
        ),
    )
    custom_resources: dict[str, float] = Field(
        default_factory=dict,
        description=(
            "Separate only: custom Ray resources each judge worker reserves on its node (nodes "
            "started with `ray start --resources '{\"judge_slot\": 1}'`), e.g. {judge_slot: 1}."
        ),
    )

    @field_validator("node_labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        problems = selector_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("custom_resources")
    @classmethod
    def _custom(cls, value: dict[str, float]) -> dict[str, float]:
        problems = []
        for name, amount in value.items():
            if name in _BUILTIN_RESOURCES:
                problems.append(f"{name} is Ray's own resource: set it with gpus_per_replica or cpus_per_replica")
            if not amount > 0:
                problems.append(f"{name} must be > 0, got {amount:g}")
        if problems:
            raise ValueError("; ".join(problems))
        return value


# Resources Ray defines itself: a judge asks for them through their own fields.
_BUILTIN_RESOURCES = frozenset({"CPU", "GPU", "memory", "object_store_memory"})


class CoalesceConfig(StrictModel):
    """How concurrent ``step`` calls (NeMo-RL's asynchronous rollouts) share judge calls."""

    max_wait_ms: float = Field(
        10.0,
        ge=0.0,
        description=(
            "How long a step call waits for concurrent ones to join its judge call (calls that "
            "arrive while the judge is busy join the next call anyway)."
        ),
    )
    max_samples: int = Field(4096, ge=1, description="Samples at which a shared judge call stops taking step calls.")


class FaultToleranceConfig(StrictModel):
    """How judge failures are survived, and when training stops because the judge is gone."""

    max_restarts: int = Field(
        3,
        ge=0,
        description=(
            "Restarts of crashed judge replicas the pool may spend at once (a budget that refills: "
            "see restart_budget_refill_s). Replacing a replica stuck past the step deadline does "
            "not spend it."
        ),
    )
    restart_budget_refill_s: float = Field(
        600.0,
        ge=0.0,
        description="One restart comes back to the budget every this many seconds, up to max_restarts; 0: never.",
    )
    restart_backoff_s: float = Field(
        1.0,
        ge=0.0,
        description=(
            "Wait before restarting a crashed replica; doubles with each crash in a row of the same "
            "replica (reset when it finishes work), up to restart_backoff_max_s."
        ),
    )
    restart_backoff_max_s: float = Field(60.0, ge=0.0, description="Longest wait before a restart.")
    step_timeout_s: float = Field(
        600.0,
        gt=0.0,
        description=(
            "Deadline of a whole step, from its call to its return (coalescing waits, prompt fitting "
            "and the judge call included); past it the unfinished samples get judge_error rewards "
            "and busy replicas are replaced."
        ),
    )
    unavailable_grace_s: float = Field(
        300.0,
        ge=0.0,
        description=(
            "How long the judge may have no live replica before step raises JudgeUnavailableError "
            "(training stops rather than trains on zero rewards); steps within it get judge_error."
        ),
    )
    startup_timeout_s: float = Field(
        300.0,
        gt=0.0,
        description=(
            "Longest wait for the judge's Ray worker actors (and, in GenRMEnvironment.start, the "
            "environment actor) to be scheduled and their processes up (model loading not included); "
            "past it, start-up fails saying which actor and why. A worker process importing torch "
            "on a loaded 2-core machine took over 120 s."
        ),
    )


class GenRMConfig(StrictModel):
    """The ``env.genrm`` section: everything the GenRM environment needs."""

    judge: JudgeConfig
    prompt: PromptConfig = Field(default_factory=PromptConfig)
    verdict: VerdictConfig = Field(default_factory=VerdictConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    fault_tolerance: FaultToleranceConfig = Field(default_factory=FaultToleranceConfig)
    coalesce: CoalesceConfig = Field(default_factory=CoalesceConfig)

    @model_validator(mode="after")
    def _check(self) -> GenRMConfig:
        problems = []
        if self.reward.kind == "probability" and self.judge.verdict_from != "logprobs":
            problems.append(
                "reward.kind 'probability' needs judge.verdict_from: logprobs (the probability of "
                "the positive label comes from one forward pass)"
            )
        if self.verdict.parser not in ("strict", "lenient"):
            problems.append(
                f"verdict.parser {self.verdict.parser!r} does not give a binary verdict: the "
                "environment needs strict or lenient"
            )
        kind = builtin_template(self.prompt.template)
        if kind is not None and not kind.startswith("consistency"):
            problems.append(
                f"prompt.template {kind!r} is for RewardBench; the environment compares an answer "
                "with a reference: use 'consistency', 'consistency_compact' or a custom template file"
            )
        if self.prompt.preset is not None:
            problems.append(
                f"prompt.preset {self.prompt.preset!r} is for RewardBench evaluation only; the "
                "environment ignores it: remove prompt.preset (set prompt.template instead)"
            )
        problems += template_problems(self.prompt, self.verdict, ("question", "reference", "candidate"))
        problems += _placement_problems(self.judge, self.resources)
        problems += _mode_problems(self)
        report_problems(self, problems)
        return self


def _placement_problems(judge: JudgeConfig, res: ResourcesConfig) -> list[str]:
    """Static layout checks (the ones that need no cluster)."""
    problems = []
    tp = judge.tensor_parallel_size
    if judge.backend != "http" and res.gpus_per_replica > 0 and res.gpus_per_replica % tp:
        problems.append(
            f"resources.gpus_per_replica ({res.gpus_per_replica}) is not a multiple of the tensor "
            f"parallel size ({tp}): set gpus_per_replica to {tp} or a multiple of it"
        )
    if res.placement == "colocated" and res.gpus_per_replica == 0:
        problems.append(
            "resources.placement 'colocated' shares the policy's GPUs but gpus_per_replica is 0: "
            "use placement: separate on a CPU-only machine"
        )
    problems += _pinning_problems(judge, res)
    if judge.backend == "vllm" and res.placement == "colocated":
        if judge.vllm.gpu_memory_utilization > res.gpu_fraction + 1e-9:
            problems.append(
                f"judge.vllm.gpu_memory_utilization ({judge.vllm.gpu_memory_utilization}) exceeds "
                f"resources.gpu_fraction ({res.gpu_fraction}): vLLM would take more of the GPU than "
                "the judge's share"
            )
    return problems


def _pinning_problems(judge: JudgeConfig, res: ResourcesConfig) -> list[str]:
    """Checks of the options that say which nodes a separate judge goes to."""
    problems = []
    if res.placement == "colocated":
        pinned = [
            name
            for name, on in (
                ("strategy", res.strategy != "auto"),
                ("node_labels", res.node_labels),
                ("custom_resources", res.custom_resources),
            )
            if on
        ]
        if pinned:
            problems.append(
                f"resources.{' / '.join(pinned)}: a colocated judge runs in the policy's placement group, "
                "which decides its nodes: remove them, or use placement: separate"
            )
        return problems
    workers = res.num_replicas * judge.tensor_parallel_size
    strategy = res.strategy
    if strategy == "STRICT_PACK" and res.num_nodes > 1:
        problems.append(
            f"resources.strategy STRICT_PACK keeps the judge on one node but num_nodes is {res.num_nodes}: "
            "set num_nodes to 1 or choose SPREAD, STRICT_SPREAD or PACK"
        )
    if strategy in ("PACK", "SPREAD", "STRICT_SPREAD") and res.num_nodes == 1 and workers > 1:
        problems.append(
            f"resources.strategy {strategy} places the judge's {workers} workers over several nodes but "
            "num_nodes is 1 (one node): raise num_nodes to the nodes the judge may use, or use STRICT_PACK"
        )
    if strategy == "STRICT_SPREAD" and res.num_nodes > 1 and res.num_nodes != workers:
        problems.append(
            f"resources.strategy STRICT_SPREAD puts each of the judge's {workers} workers on a node of "
            f"its own: set num_nodes to {workers} (it is {res.num_nodes})"
        )
    if judge.backend != "http" and strategy != "auto" and judge.tensor_parallel_size > 1 and res.num_nodes > 1:
        problems.append(
            f"resources.strategy {strategy}: over several nodes a tensor-parallel judge takes one "
            "STRICT_PACK group per replica (its ranks share a node); leave strategy auto"
        )
    return problems
