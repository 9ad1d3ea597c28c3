"""The ``judge`` section: the frozen judge LLM, its sampling and the engine that runs it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from nemo_genrm.config.base import StrictModel
from nemo_genrm.config.loading import report_problems


class ReasoningConfig(StrictModel):
    """A judge that reasons in a ``<think> ... </think>`` block before its verdict."""

    enabled: bool = Field(
        False,
        description=(
            "The judge reasons first: sampling.max_new_tokens is the reasoning's budget (up to "
            "and including </think>), verdict_tokens more are kept for the verdict, and the "
            "verdict is read after the reasoning only. A reply whose reasoning is not closed "
            "within the budget (or ends inside it) is handled by on_budget."
        ),
    )
    verdict_tokens: int = Field(
        32,
        ge=1,
        description="Tokens reserved after the reasoning: the closing text when the engine writes it, and the verdict.",
    )
    on_budget: Literal["close", "truncate"] = Field(
        "close",
        description=(
            "A reasoning over budget: close (cut it at the budget, append close_text and let the "
            "judge write its verdict in verdict_tokens) or truncate (no verdict: a parse failure "
            "counted as truncated, never a verdict read from inside the thought)."
        ),
    )
    close_text: str = Field(
        "\n</think>\n\n", description="What the engine appends to a reasoning it closes; must hold </think>."
    )


class SamplingConfig(StrictModel):
    """How the judge decodes its verdict."""

    temperature: float = Field(0.0, ge=0.0, description="0 means greedy decoding.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_new_tokens: int = Field(
        16, ge=1, description="Longest verdict the judge may write; with reasoning.enabled, the reasoning's budget."
    )
    seed: int = Field(0, description="Sampling seed, used when temperature > 0.")
    reasoning: ReasoningConfig = Field(default_factory=ReasoningConfig)

    @property
    def reply_tokens(self) -> int:
        """Most tokens one reply may take: ``max_new_tokens``, plus ``verdict_tokens`` for a reasoning judge."""
        return self.max_new_tokens + (self.reasoning.verdict_tokens if self.reasoning.enabled else 0)


class BatchingConfig(StrictModel):
    """How prompts are cut into engine batches."""

    max_batch_size: int = Field(
        64, ge=1, description="Most prompts in one engine batch (the static loop: rows decoded at once)."
    )
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
    continuous_batching: bool = Field(
        True,
        description=(
            "Static loop: a call's prompts form one queue per replica, and a row that ends (EOS or "
            "its budget) hands its slot to the next prompt, so every slot stays busy while prompts "
            "wait (verdicts of very different lengths cost the work they need, not the longest "
            "row's). false: batches of batching.max_batch_size decode until their longest row ends."
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
        0.8,
        gt=0.0,
        le=1.0,
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
    extra_kwargs: dict[str, Any] = Field(default_factory=dict, description="Passed verbatim to vllm.LLM(...).")


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
        from nemo_genrm.guard.redact import mask_url

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
            from nemo_genrm.guard.redact import mask_url

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
    precision: Literal["bfloat16", "float16", "float32"] = Field("bfloat16", description="Weight and compute dtype.")
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
        reasoning = self.sampling.reasoning
        if self.sampling.reply_tokens >= self.max_model_len:
            what = "sampling.max_new_tokens"
            if reasoning.enabled:
                what += " + sampling.reasoning.verdict_tokens"
            problems.append(
                f"{what} ({self.sampling.reply_tokens}) must be smaller than max_model_len "
                f"({self.max_model_len}): raise max_model_len or lower max_new_tokens"
            )
        if reasoning.enabled:
            if "</think>" not in reasoning.close_text:
                problems.append(
                    f"sampling.reasoning.close_text {reasoning.close_text!r} must hold </think>: "
                    "it closes the reasoning"
                )
            if self.backend == "http" and reasoning.on_budget == "close":
                problems.append(
                    "sampling.reasoning.on_budget 'close' continues a reply from its tokens, which an HTTP judge "
                    "does not have: use on_budget: truncate with backend http (a thought left open is then a "
                    "truncated parse failure)"
                )
            if self.verdict_from == "logprobs":
                problems.append(
                    "sampling.reasoning.enabled needs verdict_from: text (a verdict from logprobs reads the first "
                    "reply token, before any reasoning)"
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
