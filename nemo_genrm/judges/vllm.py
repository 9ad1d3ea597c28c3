"""The vLLM judge engine: ``vllm.LLM`` inside Ray actors (one actor per replica).

:class:`VllmJudgeWorker` is the plain worker (no Ray; vLLM is imported when it is built, so this
module imports without vLLM installed). :class:`VllmJudge` runs one per replica through the same
:class:`~nemo_genrm.judges.pooled.PooledJudge` pipeline as the transformers engine (fitting,
chunk planning, restarts, deadline, token-balanced chunks, input order). vLLM schedules and pads
itself, so a chunk goes to ``LLM.generate`` whole.

- Every call sends the fitted token ids themselves (``TokensPrompt``), so vLLM judges exactly
  the prompt that was rendered and, when too long, shortened to fit ``max_model_len``; nothing
  is templated or tokenized again on the vLLM side.
- Generation: ``LLM.generate`` with one ``SamplingParams(temperature, top_p, max_tokens, seed)``
  per prompt, its seed ``sampling.seed + vote`` (``JudgeRequest.vote``): vLLM seeds each
  request's generator from its own params, so the votes on one prompt are separate draws. A
  call's prompts go to vLLM as one queue per replica (its own continuous batching). A reasoning
  judge (``sampling.reasoning``) gets the two passes of :mod:`nemo_genrm.judges.reasoning` on
  token ids.
- Scores, as the transformers engine computes them: a label's log-probability is the sum of its
  tokens' log-probabilities teacher-forced after the prompt (full-vocabulary log-softmax), then
  the labels are renormalised. One-token labels are read from one generated token with
  ``logprobs=k`` (vLLM's top-k of the raw next-token log-softmax: the same values); a label
  outside the top-k, or a label of several tokens, is read from ``prompt_logprobs`` of
  ``prompt + label``.
- Sleep mode (``enable_sleep_mode``; by default on when the replica takes a fraction of a GPU,
  i.e. colocated): ``LLM.sleep(level=1)`` offloads the weights and drops the KV cache,
  ``LLM.wake_up()`` brings them back.
- Tensor parallel > 1: with a placement group, the actor takes no GPU itself and vLLM's Ray
  executor places its workers on the replica's bundles (``VLLM_RAY_BUNDLE_INDICES``); without
  one, the actor takes all the replica's GPUs and vLLM uses its multiprocessing executor.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from nemo_genrm.config import ConfigError, JudgeConfig
from nemo_genrm.config.loading import typed
from nemo_genrm.judges.base import Placement, ReplicaPlacement
from nemo_genrm.judges.fitting import FittedPrompt, label_token_ids
from nemo_genrm.judges.pooled import PooledJudge
from nemo_genrm.judges.ray_hosts import WorkerSpec, default_actor_options
from nemo_genrm.judges.reasoning import ReasoningBudget, ThoughtTokens, answer
from nemo_genrm.judges.results import GenOut, check_labels, renormalise

logger = logging.getLogger(__name__)

_DEFAULT_MAX_LOGPROBS = 20  # vLLM's default cap on logprobs / prompt_logprobs


class VllmJudgeWorker:
    """One judge replica on vLLM (no Ray here; see :class:`VllmJudge`).

    Args:
        judge_config: A ``JudgeConfig`` or a dict of one.
        enable_sleep_mode: Build the engine so it can sleep and wake.
        bundle_indices: Placement-group bundles for vLLM's own Ray workers (tensor parallel
            with a placement group); ``None`` otherwise.
        per_worker_gpus: GPU share of each of those workers.

    Raises:
        ImportError: If vLLM is not installed (``pip install nemo-genrm[vllm]``).
    """

    def __init__(
        self,
        judge_config: JudgeConfig,
        *,
        enable_sleep_mode: bool = False,
        bundle_indices: Sequence[int] | None = None,
        per_worker_gpus: float | None = None,
    ):
        self.config = typed(JudgeConfig, judge_config, type(self).__name__)
        opts = self.config.vllm
        kwargs: dict[str, Any] = {
            "model": self.config.model_name,
            "tokenizer": self.config.tokenizer_name,
            "tensor_parallel_size": opts.tensor_parallel_size,
            "dtype": self.config.precision,
            "max_model_len": self.config.max_model_len,
            "gpu_memory_utilization": opts.gpu_memory_utilization,
            "enable_prefix_caching": opts.enable_prefix_caching,
            "enable_sleep_mode": enable_sleep_mode,
            "seed": self.config.sampling.seed,
        }
        if bundle_indices:
            os.environ["VLLM_RAY_BUNDLE_INDICES"] = ",".join(str(i) for i in bundle_indices)
            os.environ["VLLM_RAY_PER_WORKER_GPUS"] = str(per_worker_gpus or 1.0)
            kwargs["distributed_executor_backend"] = "ray"
        elif opts.tensor_parallel_size > 1:
            kwargs["distributed_executor_backend"] = "mp"
        kwargs.update(opts.extra_kwargs)
        self.max_logprobs = int(kwargs.get("max_logprobs", _DEFAULT_MAX_LOGPROBS))
        self.sleep_enabled = enable_sleep_mode
        try:
            import vllm
            from vllm.inputs import TokensPrompt
        except ImportError as exc:
            raise ImportError("the vllm backend needs vLLM: pip install 'nemo-genrm[vllm]'") from exc
        self._vllm = vllm
        self._tokens_prompt = TokensPrompt
        self.llm = vllm.LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.asleep = False
        logger.info(
            "vLLM judge %s up (tp=%d, sleep mode %s)",
            self.config.model_name,
            opts.tensor_parallel_size,
            enable_sleep_mode,
        )

    def _params(self, **kwargs: Any):
        return self._vllm.SamplingParams(**kwargs)

    def _prompts(self, prompts: Sequence[Sequence[int]]) -> list:
        """vLLM token prompts: the ids go to the engine as they are."""
        return [self._tokens_prompt(prompt_token_ids=list(ids)) for ids in prompts]

    def _ensure_awake(self) -> None:
        if self.asleep:
            logger.warning("vLLM judge called while asleep: waking it first")
            self.wake()

    QUEUE_METHODS = ("generate_fitted",)
    """A call's prompts reach ``LLM.generate`` as one queue per replica: vLLM batches them
    continuously itself, so a long reply never holds a batch of short ones back."""

    def generate_fitted(self, prompts: Sequence[FittedPrompt]) -> list[GenOut]:
        """Generate from the fitted token ids: ``(text, tokens generated)`` each (for a reasoning
        judge also the thought's length and whether it was cut), in order."""
        self._ensure_awake()
        ids = [list(p.token_ids) for p in prompts]
        votes = [p.vote for p in prompts]
        reasoning = ReasoningBudget.of(self.config.sampling)
        if reasoning is not None:
            # Both passes on token ids, as the transformers engine runs them (not run in this
            # project's CI: no vLLM there).
            tokens = ThoughtTokens.of(self.tokenizer, reasoning)
            return answer(ids, votes, reasoning, tokens, self.tokenizer, self._eos_ids(), self._generate_ids)
        outputs = self._generate(ids, votes, self.config.sampling.max_new_tokens)
        return [(out.outputs[0].text, len(out.outputs[0].token_ids)) for out in outputs]

    def _generate(self, ids: list[list[int]], votes: list[int], max_tokens: int) -> list:
        """``LLM.generate`` on token ids, each prompt sampled with seed ``sampling.seed + vote``."""
        sampling = self.config.sampling
        params = [
            self._params(
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=max_tokens,
                seed=sampling.seed + vote if sampling.temperature > 0 else None,
                skip_special_tokens=True,
            )
            for vote in votes
        ]
        return self.llm.generate(self._prompts(ids), params, use_tqdm=False)

    def _generate_ids(
        self, ids: list[list[int]], votes: list[int], max_tokens: int, thinking: list[bool] | None
    ) -> list[list[int]]:
        """New ids per prompt (vLLM keeps the EOS it stopped on); ``thinking`` is not used."""
        return [list(out.outputs[0].token_ids) for out in self._generate(ids, votes, max_tokens)]

    def _eos_ids(self) -> list[int]:
        """The ids that end a reply: the tokenizer's EOS and the checkpoint's generation config's."""
        from transformers import GenerationConfig

        ids = [self.tokenizer.eos_token_id]
        try:
            extra = GenerationConfig.from_pretrained(self.config.model_name).eos_token_id
        except (OSError, ValueError):  # no generation_config.json (or no such local folder)
            extra = None
        ids += extra if isinstance(extra, list) else [extra]
        return sorted({int(i) for i in ids if i is not None})

    def score_fitted(self, prompts: Sequence[FittedPrompt], labels: Sequence[str]) -> list[dict]:
        """Label probabilities per prompt (top-k logprobs, else exact prompt logprobs)."""
        self._ensure_awake()
        labels = check_labels(labels)
        label_ids = label_token_ids(self.tokenizer, labels)
        out: list[dict | None] = [None] * len(prompts)
        exact = list(range(len(prompts)))
        if all(len(ids) == 1 for ids in label_ids):
            params = self._params(max_tokens=1, temperature=0.0, logprobs=self.max_logprobs)
            results = self.llm.generate(self._prompts([p.token_ids for p in prompts]), params, use_tqdm=False)
            exact = []
            for i, result in enumerate(results):
                top = result.outputs[0].logprobs[0]  # token id -> Logprob
                if all(ids[0] in top for ids in label_ids):
                    out[i] = renormalise({lab: top[ids[0]].logprob for lab, ids in zip(labels, label_ids, strict=True)})
                else:
                    exact.append(i)
        if exact:
            scored = self._exact_scores([prompts[i].token_ids for i in exact], labels, label_ids)
            for i, probs in zip(exact, scored, strict=True):
                out[i] = probs
        return out  # type: ignore[return-value]

    def _exact_scores(
        self, prompts: Sequence[Sequence[int]], labels: list[str], label_ids: list[list[int]]
    ) -> list[dict]:
        """Teacher-force each label after each prompt; sum the label tokens' prompt logprobs."""
        joined = [list(p) + ids for p in prompts for ids in label_ids]
        params = self._params(max_tokens=1, temperature=0.0, prompt_logprobs=1)
        results = self.llm.generate(self._prompts(joined), params, use_tqdm=False)
        out = []
        for row, prompt in enumerate(prompts):
            logps = {}
            for col, (label, ids) in enumerate(zip(labels, label_ids, strict=True)):
                per_token = results[row * len(labels) + col].prompt_logprobs
                logps[label] = sum(per_token[len(prompt) + j][tok].logprob for j, tok in enumerate(ids))
            out.append(renormalise(logps))
        return out

    def top_logprobs_fitted(self, prompts: Sequence[FittedPrompt], k: int) -> list[dict]:
        """The ``k`` likeliest first reply tokens (decoded) and their log-probabilities."""
        self._ensure_awake()
        k = min(k, self.max_logprobs)
        params = self._params(max_tokens=1, temperature=0.0, logprobs=k)
        results = self.llm.generate(self._prompts([p.token_ids for p in prompts]), params, use_tqdm=False)
        out = []
        for result in results:
            ranked = sorted(result.outputs[0].logprobs[0].items(), key=lambda kv: -kv[1].logprob)
            top: dict[str, float] = {}
            for tok, lp in ranked[:k]:
                text = lp.decoded_token if lp.decoded_token is not None else self.tokenizer.decode([tok])
                top.setdefault(text, lp.logprob)
            out.append(top)
        return out

    def sleep(self) -> None:
        """Offload weights and drop the KV cache (level 1); a no-op without sleep mode."""
        if not self.sleep_enabled:
            logger.info("vLLM sleep mode is off for this judge: sleep() keeps it resident")
            return
        if not self.asleep:
            if hasattr(self.llm, "reset_prefix_cache"):
                self.llm.reset_prefix_cache()  # the cached blocks do not survive the sleep
            self.llm.sleep(level=1)
            self.asleep = True

    def wake(self) -> None:
        """Bring weights back and rebuild the KV cache."""
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False


def _check_share(config: JudgeConfig, replica: ReplicaPlacement, index: int) -> list[str]:
    """A colocated replica's vLLM must not take more of the GPU than its share."""
    share = replica.num_gpus
    util = config.vllm.gpu_memory_utilization
    if 0 < share < 1 and util > share + 1e-9:
        return [
            f"replica {index}: judge.vllm.gpu_memory_utilization ({util}) exceeds the replica's "
            f"GPU share ({share}): lower gpu_memory_utilization to at most {share}"
        ]
    return []


class VllmJudge(PooledJudge):
    """vLLM judge replicas on Ray (see the module docstring).

    Args:
        judge_config: A ``JudgeConfig`` (``backend: vllm``) or a dict of one.
        placement: Where the replicas run (``num_gpus`` is per tensor-parallel rank); ``None``
            gives one replica without a placement group.
        fault_tolerance: Restart budget and per-call deadline (defaults when ``None``).

    Raises:
        ConfigError: If the config or the placement is invalid (e.g. ``gpu_memory_utilization``
            above a colocated replica's GPU share).
        RuntimeError: If the workers fail to start (vLLM missing, out of memory...).
    """

    @classmethod
    def worker_spec(cls, config: JudgeConfig, placement: Placement) -> WorkerSpec:
        """One actor per replica hosting a :class:`VllmJudgeWorker` (vLLM runs its own ranks).

        Raises:
            ConfigError: ``gpu_memory_utilization`` above a colocated replica's GPU share.
        """
        problems = [p for i, rep in enumerate(placement.replicas) for p in _check_share(config, rep, i)]
        if problems:
            raise ConfigError(problems)
        tp = config.vllm.tensor_parallel_size

        def uses_ray_executor(replica: ReplicaPlacement) -> bool:
            return tp > 1 and replica.placement_group is not None

        def kwargs_for(rank: int, replica: ReplicaPlacement) -> dict:
            sleep = config.vllm.enable_sleep_mode
            ray_executor = uses_ray_executor(replica)
            return {
                "judge_config": config,
                "enable_sleep_mode": (0 < replica.num_gpus < 1) if sleep is None else sleep,
                "bundle_indices": tuple(replica.bundle_indices) if ray_executor else None,
                "per_worker_gpus": replica.num_gpus if ray_executor else None,
            }

        def options_for(rank: int, replica: ReplicaPlacement) -> dict:
            options = default_actor_options(rank, replica)
            if uses_ray_executor(replica):
                options["num_gpus"] = 0  # vLLM's own Ray workers take the bundles' GPUs
            elif tp > 1:
                options["num_gpus"] = replica.num_gpus * tp  # one actor, every rank's GPU
            return options

        return WorkerSpec(VllmJudgeWorker, 1, kwargs_for, options_for, needs_address=False, bundles_per_replica=tp)
