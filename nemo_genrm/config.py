"""Typed configuration for every section of nemo-genrm.

Each section is a pydantic model with its defaults on the fields and unknown keys rejected, so a
typo fails at start-up instead of being silently ignored. :func:`validate` turns pydantic's
errors into one :class:`ConfigError` that lists every problem (its dotted path, the value seen
and how to fix it), and :func:`load_config` reads YAML with NeMo-RL's conventions (``defaults:``
inheritance and Hydra-style ``key=value`` overrides).
"""

from __future__ import annotations

from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from nemo_genrm.config_loading import load_config, report_problems, to_container, validate
from nemo_genrm.errors import ConfigError
from nemo_genrm.prompts import load_template, template_labels_from_config
from nemo_genrm.verdicts import VerdictParser

__all__ = [
    "AnswerConfig",
    "BatchingConfig",
    "ConfigError",
    "DTensorConfig",
    "FaultToleranceConfig",
    "GenRMConfig",
    "HttpConfig",
    "JudgeConfig",
    "PairwiseGroupConfig",
    "PromptConfig",
    "ResourcesConfig",
    "RewardBenchConfig",
    "RewardBenchDataConfig",
    "RewardConfig",
    "RubricConfig",
    "SamplingConfig",
    "StrictModel",
    "VerdictConfig",
    "VllmConfig",
    "load_config",
    "to_container",
    "validate",
]


class StrictModel(BaseModel):
    """Base for config sections: unknown keys are errors, assignments are validated.

    pydantic's own error text does not quote the input (a URL may carry ``user:key@``);
    :func:`validate` quotes values itself where that is safe.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, hide_input_in_errors=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads True as 1 for an int or float field; in a config that is a slip (a
        # flag written where a count belongs), so a field that takes numbers only refuses it.
        if isinstance(value, bool) and info.field_name is not None:
            kinds = _number_kinds(cls.model_fields[info.field_name].annotation)
            if kinds:
                raise ValueError(f"must be {kinds}, got the boolean {value}")
        return value


def _number_kinds(annotation: Any) -> str | None:
    """'an integer' or 'a number' when ``annotation`` takes only ints or floats (or None)."""
    union = get_origin(annotation) in (Union, UnionType)
    members = [a for a in (get_args(annotation) if union else (annotation,)) if a is not type(None)]
    if members and all(a in (int, float) for a in members):
        return "an integer" if members == [int] else "a number"
    return None


# --------------------------------------------------------------------------------------- judge
class SamplingConfig(StrictModel):
    """How the judge decodes its verdict."""

    temperature: float = Field(0.0, ge=0.0, description="0 means greedy decoding.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_new_tokens: int = Field(16, ge=1, description="Longest verdict the judge may write.")
    seed: int = Field(0, description="Sampling seed, used when temperature > 0.")


class BatchingConfig(StrictModel):
    """How prompts are cut into engine batches."""

    max_batch_size: int = Field(64, ge=1, description="Most prompts in one engine batch.")
    max_tokens_per_batch: int = Field(
        32768, ge=1, description="Token budget of one batch (padded prompt + new tokens)."
    )


class DTensorConfig(StrictModel):
    """Options of the transformers/DTensor engine."""

    tensor_parallel_size: int = Field(1, ge=1, description="Ranks that shard one replica.")
    generation: Literal["auto", "static", "dynamic"] = Field(
        "auto",
        description=(
            "Decoding loop. static: a preallocated KV cache per length bucket, the decode step "
            "compiled with CUDA graphs on a GPU (tensor parallel size 1); dynamic: "
            "transformers' generate with its growing cache; auto: static on a GPU, dynamic on CPU."
        ),
    )
    sleep_buffers: Literal["auto", "at_load", "at_first_sleep"] = Field(
        "auto",
        description=(
            "When to allocate the (pinned) host buffers that sleep copies the weights into; they "
            "are kept and reused. at_load: every sleep, the first included, runs at copy speed, "
            "for host memory the size of the weights held from the start. auto: at_load for a "
            "judge the environment colocates (the only one it puts to sleep), else at_first_sleep, "
            "so a judge that never sleeps holds no host copy of its weights."
        ),
    )
    memory_fraction: float = Field(
        0.8, gt=0.0, le=1.0,
        description=(
            "On a GPU, share of the free device memory (after the weights) that one batch's KV "
            "cache and activations may take; batch sizes follow from it (on CPU, batching.* applies)."
        ),
    )


class VllmConfig(StrictModel):
    """Options of the vLLM engine."""

    tensor_parallel_size: int = Field(1, ge=1, description="vLLM tensor parallel size.")
    gpu_memory_utilization: float = Field(
        0.3, gt=0.0, le=1.0, description="Share of each GPU vLLM may take (KV cache included)."
    )
    enable_prefix_caching: bool = Field(
        True, description="Reuse KV of prompts sharing a prefix (same question and reference)."
    )
    enable_sleep_mode: bool | None = Field(
        None, description="vLLM sleep mode; null means on when colocated, off when separate."
    )
    extra_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Passed verbatim to vllm.LLM(...)."
    )


class HttpConfig(StrictModel):
    """Options of the OpenAI-compatible HTTP engine."""

    base_url: str | None = Field(None, description="Server root, e.g. http://host:8000/v1.")
    api_key_env: str | None = Field(
        None, description="Name of the environment variable holding the API key (never logged)."
    )
    max_concurrency: int = Field(32, ge=1, description="Requests in flight at once.")
    timeout_s: float = Field(
        30.0,
        gt=0.0,
        description=(
            "Longest wait for one attempt of one request, connect and whole reply included; "
            "with the defaults a hung server holds a step at most about 2 minutes (124 s)."
        ),
    )
    connect_timeout_s: float = Field(10.0, gt=0.0, description="Connect timeout of one request.")
    max_retries: int = Field(3, ge=0, description="Retries on 429, 5xx and timeouts.")
    backoff_s: float = Field(0.5, ge=0.0, description="First retry delay; doubles, with jitter.")
    supports_logprobs: bool = Field(
        True, description="Whether the server returns top_logprobs (needed for verdict_from: logprobs)."
    )

    def __repr_args__(self) -> Any:
        # repr (and so any log line or error quoting the config) masks URL credentials.
        from nemo_genrm.redact import mask_url

        for name, value in super().__repr_args__():
            yield name, mask_url(value) if name == "base_url" and isinstance(value, str) else value

    @field_validator("base_url", mode="before")
    @classmethod
    def _no_echo(cls, value: Any) -> Any:
        # pydantic's own messages quote the value; a URL may carry user:key@, so it is checked
        # here and any message names its type or its redacted form only.
        if value is not None and not isinstance(value, str):
            raise ValueError(f"must be a string URL such as http://host:8000/v1, got a {type(value).__name__}")
        if isinstance(value, str) and value and not value.startswith(("http://", "https://")):
            from nemo_genrm.redact import mask_url

            raise ValueError(f"must start with http:// or https://, got {mask_url(value)!r}")
        return value


class JudgeConfig(StrictModel):
    """The frozen judge LLM and the engine that runs it."""

    backend: Literal["dtensor", "vllm", "http"] = Field(
        "dtensor", description="Engine: transformers+DTensor, vLLM, or an OpenAI-compatible server."
    )
    model_name: str = Field(
        ..., min_length=1, description="Checkpoint path or hub id; for http, the served model name."
    )
    tokenizer: str | None = Field(None, description="Tokenizer path or id; defaults to model_name.")
    precision: Literal["bfloat16", "float16", "float32"] = Field(
        "bfloat16", description="Weight and compute dtype."
    )
    max_model_len: int = Field(4096, ge=16, description="Longest prompt + verdict, in tokens.")
    verdict_from: Literal["text", "logprobs"] = Field(
        "text", description="text: generate then parse; logprobs: one forward pass over the labels."
    )
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    batching: BatchingConfig = Field(default_factory=BatchingConfig)
    dtensor: DTensorConfig = Field(default_factory=DTensorConfig)
    vllm: VllmConfig = Field(default_factory=VllmConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)

    @property
    def tokenizer_name(self) -> str:
        """The tokenizer to load: ``tokenizer`` when set, else ``model_name``."""
        return self.tokenizer or self.model_name

    @property
    def tensor_parallel_size(self) -> int:
        """Tensor parallel size of the selected backend (1 for http)."""
        if self.backend == "dtensor":
            return self.dtensor.tensor_parallel_size
        if self.backend == "vllm":
            return self.vllm.tensor_parallel_size
        return 1

    @model_validator(mode="after")
    def _check(self) -> JudgeConfig:
        problems = []
        if self.sampling.max_new_tokens >= self.max_model_len:
            problems.append(
                f"sampling.max_new_tokens ({self.sampling.max_new_tokens}) must be smaller than "
                f"max_model_len ({self.max_model_len}): raise max_model_len or lower max_new_tokens"
            )
        if self.backend == "http" and not self.http.base_url:
            problems.append("http.base_url is required when backend is 'http' (e.g. http://localhost:8000/v1)")
        if self.backend == "http" and self.verdict_from == "logprobs" and not self.http.supports_logprobs:
            problems.append(
                "verdict_from 'logprobs' needs a server with top_logprobs: set http.supports_logprobs: "
                "true or verdict_from: text"
            )
        report_problems(self, problems)
        return self


# -------------------------------------------------------------------------------------- prompt
class AnswerConfig(StrictModel):
    """How the candidate answer is cut out of the policy's response before judging."""

    marker: str | None = Field(
        "Answer:", description="Judge the text after the last marker; null disables."
    )
    boxed: bool = Field(True, description="Else judge the last \\boxed{...}.")
    tail_chars: int = Field(
        300,
        ge=0,
        description="Else judge the last this many characters; 0: no fallback (reason no_answer).",
    )
    max_chars: int = Field(
        1000, ge=1, description="Longer answers are not judged (reason too_long, reward 0)."
    )


class PromptConfig(StrictModel):
    """Which judge prompt to render and how the candidate answer is prepared."""

    template: str = Field(
        "consistency",
        description="consistency | consistency_compact (few tokens, for small judges) | pairwise | rating, or a path to a YAML template file.",
    )
    preset: Literal["rewardbench"] | None = Field(
        None,
        description=(
            "rewardbench: take the prompts from the installed rewardbench package, send its request "
            "parameters and read replies its way (whole reply, <think> blocks included). Without "
            "it verdicts are read after the last </think>."
        ),
    )
    answer: AnswerConfig = Field(default_factory=AnswerConfig)
    neutralise: bool = Field(
        True,
        description=(
            "Normalise answers (NFKC, no zero-width or bidi characters) and defuse verdict lines, "
            "role turns, instructions and chat tokens in them; the nonce fence is always there."
        ),
    )
    fence_seed: int | None = Field(
        None,
        description=(
            "Seeds the key of the fence nonces (each a keyed hash of the prompt's fields), so a "
            "run's prompts are reproducible; null: a random key per process."
        ),
    )


class VerdictConfig(StrictModel):
    """How the judge's output becomes a verdict."""

    parser: Literal["strict", "lenient", "choice", "rating"] = Field(
        "strict", description="strict | lenient | choice ([[A]]/[[B]]) | rating (an integer)."
    )
    positive: str = Field("1", min_length=1, description="Label meaning the answers agree.")
    negative: str = Field("0", min_length=1, description="Label meaning they disagree.")
    on_parse_failure: Literal["zero", "mask"] = Field(
        "zero",
        description="zero: reward 0 counted in the mean; mask: reward 0 but reported apart.",
    )
    synonyms: dict[str, list[str]] = Field(
        default_factory=dict,
        description="lenient parser: label -> extra words, e.g. {'1': [yes, correct]}.",
    )
    choice_markers: list[str] = Field(
        default_factory=lambda: ["[[A]]", "[[B]]"], description="choice parser: markers for A and B."
    )
    rating_min: int = Field(1, description="rating parser: lowest valid rating.")
    rating_max: int = Field(10, description="rating parser: highest valid rating.")

    @model_validator(mode="after")
    def _check(self) -> VerdictConfig:
        # The parser's own rules, run here: a config that validates always builds its parser,
        # and the rules are written once (in nemo_genrm.verdicts, which the parser also runs).
        try:
            VerdictParser.from_config(self)
        except ConfigError as err:
            report_problems(self, [_section_relative(p) for p in err.problems])
        return self


# ------------------------------------------------------------------------- reward modes
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
            "one (asynchronous rollouts): a judge call waits up to group_wait_ms for its groups "
            "to be complete."
        ),
    )
    group_wait_ms: float = Field(
        2000.0, ge=0.0, description="With group_size: longest wait for a group's missing responses."
    )
    all_pairs_up_to: int = Field(
        8, ge=2, description="Groups with at most this many distinct responses judge every pair."
    )
    opponents: int = Field(
        4, ge=1, description="Larger groups: random opponents drawn per distinct response."
    )
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


def _section_relative(problem: str) -> str:
    """A parser problem ("verdict.x: ...", "verdict: ...") as one of the verdict section's."""
    return problem.removeprefix("verdict: ").removeprefix("verdict.")


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
        1, ge=1, description="Samples per judge and prompt (needs temperature > 0); majority verdict."
    )
    judges: list[JudgeConfig] = Field(
        default_factory=list,
        description="Further judges voting with 'judge' (each on its own resources, placement separate).",
    )
    swap: bool = Field(
        False, description="reference mode: also judge with candidate and reference swapped; both must agree."
    )
    pairwise_group: PairwiseGroupConfig = Field(default_factory=PairwiseGroupConfig)
    rubric: RubricConfig = Field(default_factory=RubricConfig)


def _mode_problems(cfg: Any) -> list[str]:
    """Checks that tie ``reward``'s mode options to the judge and resources sections."""
    reward, problems = cfg.reward, []
    if reward.mode != "reference" and reward.kind == "probability":
        problems.append(f"reward.kind 'probability' is for mode 'reference'; mode {reward.mode!r} gives a share")
    if reward.swap and reward.mode != "reference":
        problems.append(f"reward.swap swaps candidate and reference: mode {reward.mode!r} has no reference")
    for where, judge in [("judge", cfg.judge)] + [(f"reward.judges[{i}]", j) for i, j in enumerate(reward.judges)]:
        if reward.votes > 1 and judge.sampling.temperature <= 0.0:
            problems.append(
                f"reward.votes ({reward.votes}) samples each judge several times: {where}.sampling."
                "temperature must be > 0, else every vote is the same"
            )
    if reward.judges and cfg.resources.placement != "separate":
        problems.append("reward.judges start judges of their own: use resources.placement 'separate'")
    return problems


class ResourcesConfig(StrictModel):
    """Where the judge runs: its own placement group, or inside the policy's."""

    placement: Literal["separate", "colocated"] = Field(
        "separate", description="separate: own GPUs; colocated: share the policy's GPUs."
    )
    num_replicas: int = Field(1, ge=1, description="Data-parallel judge replicas.")
    gpus_per_replica: int = Field(1, ge=0, description="GPUs per replica; 0 on a CPU-only machine.")
    num_nodes: int = Field(1, ge=1, description="Nodes the separate placement group may span.")
    gpu_fraction: float = Field(
        0.3, gt=0.0, le=1.0, description="Colocated only: share of each GPU the judge takes."
    )
    colocate_with: str | None = Field(
        None, description="Colocated only: name of the placement group to join."
    )
    cpus_per_replica: float = Field(1.0, gt=0.0, description="CPUs reserved per judge worker.")


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
    max_samples: int = Field(
        4096, ge=1, description="Samples at which a shared judge call stops taking step calls."
    )


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
        120.0,
        gt=0.0,
        description=(
            "Longest wait for the judge's Ray worker actors to be scheduled and their processes "
            "up (model loading not included); past it, start-up fails saying which actor and why."
        ),
    )


def _template_problems(prompt: PromptConfig, verdict: VerdictConfig, fields: tuple[str, ...]) -> list[str]:
    """Load a custom template file now, so a missing file or unknown field fails at validation."""
    if _template_kind(prompt.template) is not None:
        return []
    try:
        load_template(prompt.template, provided_fields=fields, labels=template_labels_from_config(verdict))
    except ConfigError as err:
        return list(err.problems)
    return []


def _template_kind(template: str) -> str | None:
    """The built-in template name, or None for a custom template path."""
    return template if template in ("consistency", "consistency_compact", "pairwise", "rating") else None


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
        kind = _template_kind(self.prompt.template)
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
        problems += _template_problems(self.prompt, self.verdict, ("question", "reference", "candidate"))
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
    if judge.backend == "vllm" and res.placement == "colocated":
        if judge.vllm.gpu_memory_utilization > res.gpu_fraction + 1e-9:
            problems.append(
                f"judge.vllm.gpu_memory_utilization ({judge.vllm.gpu_memory_utilization}) exceeds "
                f"resources.gpu_fraction ({res.gpu_fraction}): vLLM would take more of the GPU than "
                "the judge's share"
            )
    return problems


# ---------------------------------------------------------------------------------- RewardBench
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
    votes: int = Field(1, ge=1, description="Ensemble: samples per judge and request (temperature > 0), majority verdict.")
    ties: Literal["reference", "abstain"] = Field(
        "reference", description="Ensemble ties: reference (reward-bench's set-order pick) | abstain (no verdict)."
    )
    prompt: PromptConfig = Field(default_factory=lambda: PromptConfig(template="pairwise"))
    verdict: VerdictConfig = Field(default_factory=lambda: VerdictConfig(parser="choice"))
    resources: ResourcesConfig = Field(
        default_factory=lambda: ResourcesConfig(gpus_per_replica=0)
    )
    protocol: Literal["pairwise", "rating", "best_of_4"] = Field(
        "pairwise",
        description="pairwise: one call, A/B; rating: each response rated alone; best_of_4: RewardBench 2.",
    )
    both_orders: bool = Field(
        False, description="Also judge the swapped placement and report position consistency."
    )
    seed: int = Field(0, description="Seeds the A/B placement coin with the example id.")
    placement: Literal["seeded", "reference_random"] = Field(
        "seeded", description="seeded: a coin per example from seed and id; reference_random: unseeded, as the reference."
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
            problems.append(
                f"protocol {self.protocol!r} needs verdict.parser: {wanted} (got {self.verdict.parser!r})"
            )
        kind = _template_kind(self.prompt.template)
        if self.protocol == "best_of_4":
            problems += _best_of_4_problems(self)
        elif self.prompt.preset is None and kind is not None and kind != self.protocol:
            problems.append(
                f"protocol {self.protocol!r} needs prompt.template: {self.protocol} (got {kind!r})"
            )
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
            problems += _template_problems(self.prompt, self.verdict, fields[self.protocol])
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


def _ensemble_problems(cfg: RewardBenchConfig) -> list[str]:
    """What is wrong with the ensemble settings (``judges``, ``votes``)."""
    problems = []
    if len(cfg.judges) == 1:
        problems.append("judges holds one judge: set judge instead, or list two or more")
    if (cfg.judges or cfg.votes > 1) and cfg.protocol == "rating":
        problems.append("judges and votes apply to protocols pairwise and best_of_4 (the reference has no rating ensembles)")
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
