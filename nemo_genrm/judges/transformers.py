"""The transformers judge engine: one worker per rank, run in process or on Ray.

- :class:`TransformersWorker` is one rank of the judge (the whole judge when ``world_size == 1``):
  it loads the model with ``AutoModelForCausalLM.from_pretrained`` and implements the engine's
  token-level protocol (``generate_fitted``, from :mod:`nemo_genrm.judges.hf_replies`,
  ``score_fitted``, ``top_logprobs_fitted``, ``sleep``, ``wake``) on fitted prompts; no Ray, no
  fitting, no counting.
- :class:`LocalTransformersJudge` is the judge pipeline over one worker in this process (tests,
  RewardBench, the judge service, benchmarks).
- :class:`TransformersJudge` (``judge.backend: dtensor``) is the judge pipeline over
  ``num_replicas`` replicas of ``dtensor.tensor_parallel_size`` Ray actors, each hosting a
  worker; restarts and the call deadline are the :class:`~nemo_genrm.judges.ray_pool.ReplicaPool`'s.

Tensor parallel (``world_size > 1``): the ranks of a replica join one ``torch.distributed``
process group (gloo on CPU, nccl on GPU; ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/
``MASTER_PORT`` are set in the environment; on Ray the port is picked on rank 0's node) and load
with transformers' own tensor-parallel plan (``DistributedConfig(tp_size=world_size)``;
``tp_plan="auto"`` with a 1-D device mesh on older transformers), so the weights are DTensors
sharded over the ranks. Every rank runs the same calls on the same inputs; the logits come back
replicated, so each rank computes the same result and the caller keeps rank 0's. Each Ray actor
asks for ``num_cpus``/``num_gpus`` of its :class:`ReplicaPlacement` and runs torch with as many
threads as its CPU share.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch

from nemo_genrm.config import JudgeConfig
from nemo_genrm.config.loading import typed
from nemo_genrm.dtypes import DTYPES
from nemo_genrm.judges.base import Placement, ReplicaPlacement
from nemo_genrm.judges.fitting import FittedPrompt, PromptFitter, label_token_ids, plan_batches
from nemo_genrm.judges.hf_generation import (
    StaticGenerator,
    activation_bytes_per_token,
    batch_limits_from_memory,
    kv_bytes_per_token,
)
from nemo_genrm.judges.hf_offload import HostOffload
from nemo_genrm.judges.hf_replies import ReplyMixin
from nemo_genrm.judges.hf_setup import init_process_group, own_weights, pick_device, tensor_parallel_kwargs
from nemo_genrm.judges.hf_slots import supports_slots
from nemo_genrm.judges.pipeline import LocalRunner, PipelineJudge
from nemo_genrm.judges.pooled import PooledJudge
from nemo_genrm.judges.ray_hosts import WorkerSpec
from nemo_genrm.judges.results import GenOut, check_labels, renormalise

logger = logging.getLogger(__name__)

SCORE_MAX_PADDING = 0.1
"""Forward-only calls bucket prompts so none is padded by more than this share of its batch's
width: on mixed lengths the padded positions are pure waste, and a forward pass gains little
from batches bigger than the token budget already allows."""

GENERATE_MAX_PADDING = 0.25
"""Generation buckets are looser: a decode step reads the weights once whatever the batch, so
bigger batches pay off there, while prefill still wastes the padded positions."""


class TransformersWorker(ReplyMixin):
    """One rank of a transformers judge (the whole judge when ``world_size == 1``): the
    token-level protocol of :mod:`nemo_genrm.judges.pipeline` on fitted prompts.

    Args:
        judge_config: A ``JudgeConfig`` or a dict of one.
        rank: This worker's tensor-parallel rank.
        world_size: Tensor parallel size of the replica (``dtensor.tensor_parallel_size``).
        master_addr: Address of rank 0 (needed when ``world_size > 1``).
        master_port: Free port on rank 0's node (needed when ``world_size > 1``).
        local_rank: Index of this worker's GPU among the visible ones (default: ``rank``; 0 in
            a Ray actor, which sees only its own GPU).
        num_threads: Torch CPU threads (default: leave torch's setting).

    Raises:
        ConfigError: If ``judge_config`` is invalid.
        ValueError: If the rank layout is inconsistent.
    """

    def __init__(
        self,
        judge_config: JudgeConfig,
        rank: int = 0,
        world_size: int = 1,
        master_addr: str | None = None,
        master_port: int | None = None,
        *,
        local_rank: int | None = None,
        num_threads: int | None = None,
    ):
        self.config = typed(JudgeConfig, judge_config, type(self).__name__)
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in a world of size {world_size}")
        if world_size > 1 and master_port is None:
            raise ValueError("master_port is required when world_size > 1")
        if num_threads:
            torch.set_num_threads(num_threads)
        self.rank, self.world_size = rank, world_size
        local_rank = rank if local_rank is None else local_rank
        self.device = pick_device(local_rank)
        if world_size > 1:
            addr = master_addr or "127.0.0.1"
            init_process_group(rank, world_size, local_rank, addr, master_port, self.device)
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(self.config.tokenizer_name)
        self.model = self._load_model()
        self.eos_ids = self._stop_ids()
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else self.eos_ids[0]
        self._setup_replies()
        self._offload = HostOffload(self.model)
        if self.config.dtensor.sleep_buffers == "at_load":
            self._offload.allocate()  # pinning is slow: not on the first sleep's clock
        self.generation_mode = self._generation_mode()
        self._static: StaticGenerator | None = None
        if self.generation_mode == "static":
            # CUDA graphs need one device and fixed shapes: tensor-parallel ranks run eagerly.
            compile_step = self.device.type == "cuda" and world_size == 1
            self._static = StaticGenerator(self.model, self.eos_ids, self.pad_id, compile_step=compile_step)

    # ------------------------------------------------------------------------------ loading
    def _load_model(self) -> torch.nn.Module:
        from transformers import AutoModelForCausalLM, GenerationConfig
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a worker's output is no terminal: a bar there is \r noise
        kwargs: dict[str, Any] = {"dtype": DTYPES[self.config.precision]}
        if self.world_size > 1:
            kwargs.update(tensor_parallel_kwargs(self.world_size, self.device))
        elif self.device.type == "cuda":
            kwargs["device_map"] = str(self.device)
        model = AutoModelForCausalLM.from_pretrained(self.config.model_name, **kwargs).eval()
        # Our sampling config decides decoding; drop the checkpoint's own defaults (top_k,
        # repetition_penalty...) so they cannot leak into the judge's verdicts.
        eos = model.generation_config.eos_token_id
        model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=model.config.pad_token_id)
        if self.device.type == "cpu":
            own_weights(model)
        logger.info(
            "Loaded judge %s (rank %d/%d, %s, %s)",
            self.config.model_name,
            self.rank,
            self.world_size,
            self.config.precision,
            self.device,
        )
        return model

    def _generation_mode(self) -> str:
        """``static`` or ``dynamic``: ``dtensor.generation``, with ``auto`` static on a GPU only
        (and only for a decoder whose layers all use full attention: the static loop's slots).

        Raises:
            ValueError: ``generation: static`` for a model with sliding-window layers.
        """
        mode = self.config.dtensor.generation
        slots = supports_slots(self.model.config)
        if mode == "auto":
            mode = "static" if self.device.type == "cuda" and slots else "dynamic"
        elif mode == "static" and not slots:
            raise ValueError(
                f"judge.dtensor.generation 'static' needs a decoder whose layers all use full attention; "
                f"{self.config.model_name!r} has sliding-window layers: use 'dynamic' or 'auto'"
            )
        return mode

    def _stop_ids(self) -> list[int]:
        ids: list[int] = []
        for source in (self.tokenizer.eos_token_id, self.model.generation_config.eos_token_id):
            for value in source if isinstance(source, (list, tuple)) else [source]:
                if value is not None and value not in ids:
                    ids.append(int(value))
        if not ids:
            raise ValueError(f"judge {self.config.model_name!r} defines no EOS token")
        return ids

    # ------------------------------------------------------------------ token-level engine API
    MAX_PADDING: ClassVar[dict[str, float]] = {
        "generate_fitted": GENERATE_MAX_PADDING,
        "score_fitted": SCORE_MAX_PADDING,
        "top_logprobs_fitted": SCORE_MAX_PADDING,
    }
    """Largest padded share of a batch per method: the pipeline plans its chunks with these."""

    QUEUE_METHODS: ClassVar[tuple[str, ...]] = ("generate_fitted",)
    """``generate_fitted`` takes a queue: the static loop batches it continuously
    (``dtensor.continuous_batching``), else the worker cuts it into batches itself."""

    def score_fitted(self, prompts: Sequence[FittedPrompt], labels: Sequence[str]) -> list[dict]:
        """Label probabilities for fitted prompts (see :meth:`score`), in order."""
        self._ensure_awake()
        labels = check_labels(labels)
        label_ids = label_token_ids(self.tokenizer, labels)
        longest = max(len(ids) for ids in label_ids)
        return self._batched(prompts, longest, lambda batch: self._score_batch(batch, labels, label_ids))

    def top_logprobs_fitted(self, prompts: Sequence[FittedPrompt], k: int) -> list[dict]:
        """The ``k`` most likely first reply tokens and their log-probabilities, per prompt."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self._ensure_awake()
        return self._batched(prompts, 1, lambda batch: self._top_batch(batch, k))

    def _batched(self, prompts: Sequence[FittedPrompt], new_tokens: int, run: Callable) -> list:
        """Run ``run`` over the chunk ``prompts`` as one batch; results in input order.

        The chunk was planned by the judge pipeline. On a GPU a chunk bigger than free memory
        holds (a replica pool plans with the config's limits) is split to fit. ``run`` gets the
        batch's token ids.
        """
        ids = [p.token_ids for p in prompts]
        out: list[Any] = [None] * len(ids)
        if not ids:
            return out
        for batch in self._within_memory([len(p) for p in ids], new_tokens, None):
            for index, value in zip(batch, run([ids[i] for i in batch]), strict=True):
                out[index] = value
        return out

    def _within_memory(self, lengths: list[int], new_tokens: int, max_padding: float | None) -> list[list[int]]:
        """The chunk whole when it fits this worker's batch limits, else split under them
        (length-sorted, at most ``max_padding`` of a batch's width padded)."""
        max_batch, max_tokens = self.batch_limits(max(lengths), new_tokens)
        if len(lengths) <= max_batch and len(lengths) * (max(lengths) + new_tokens) <= max_tokens:
            return [list(range(len(lengths)))]
        return plan_batches(
            lengths,
            max_batch_size=max_batch,
            max_tokens_per_batch=max_tokens,
            max_new_tokens=new_tokens,
            max_padding=max_padding,
        )

    def batch_limits(self, longest: int, new_tokens: int) -> tuple[int, int]:
        """``(max_batch_size, max_tokens_per_batch)``: from free memory on a GPU, else the config."""
        batching = self.config.batching
        if self.device.type != "cuda":
            return batching.max_batch_size, batching.max_tokens_per_batch
        free, _ = torch.cuda.mem_get_info(self.device)
        if self._static is not None:
            free += self._static.cached_bytes()  # kept KV caches are reused, not added
        size = torch.finfo(DTYPES[self.config.precision]).bits // 8
        return batch_limits_from_memory(
            free,
            self.config.dtensor.memory_fraction,
            kv_bytes_per_token(self.model.config, self.world_size, size),
            activation_bytes_per_token(self.model.config, size),
            longest,
            new_tokens,
        )

    def _pad(self, prompts: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-pad prompts: ids and attention mask, both ``[B, T]`` on the worker's device."""
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)  # [B, T]
        mask = torch.zeros((len(prompts), width), dtype=torch.long)  # [B, T]
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            mask[row, width - len(prompt) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def _logprobs(self, ids: torch.Tensor, mask: torch.Tensor, keep: int) -> torch.Tensor:
        """Log-softmax of the last ``keep`` positions' logits: ``[B, keep, V]`` float32."""
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # [B, T]; left padding shifts nothing
        logits = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            logits_to_keep=keep,
            use_cache=False,
        ).logits  # [B, keep, V]
        return torch.log_softmax(logits.float(), dim=-1)

    @torch.no_grad()
    def _score_batch(
        self, prompts: Sequence[Sequence[int]], labels: list[str], label_ids: list[list[int]]
    ) -> list[dict[str, float]]:
        ids, mask = self._pad(prompts)  # [B, T]
        batch = ids.shape[0]
        first = self._logprobs(ids, mask, keep=1)[:, 0, :]  # [B, V]
        per_label = []
        for toks in label_ids:
            if len(toks) == 1:  # the prompt pass already has it
                per_label.append(first[:, toks[0]])  # [B]
                continue
            # Teacher-force the label: the pass over prompt + label[:-1] predicts every label token.
            tail = torch.tensor(toks[:-1], device=ids.device).expand(batch, -1)  # [B, L-1]
            ext_ids = torch.cat([ids, tail], dim=1)  # [B, T+L-1]
            ext_mask = torch.cat([mask, torch.ones_like(tail)], dim=1)  # [B, T+L-1]
            logp = self._logprobs(ext_ids, ext_mask, keep=len(toks))  # [B, L, V]
            target = torch.tensor(toks, device=ids.device).expand(batch, -1)  # [B, L]
            per_label.append(logp.gather(-1, target.unsqueeze(-1)).squeeze(-1).sum(-1))  # [B]
        table = torch.stack(per_label, dim=-1).double().cpu().tolist()  # [B, n_labels]
        return [renormalise(dict(zip(labels, row, strict=True))) for row in table]

    @torch.no_grad()
    def _top_batch(self, prompts: Sequence[Sequence[int]], k: int) -> list[dict[str, float]]:
        ids, mask = self._pad(prompts)  # [B, T]
        first = self._logprobs(ids, mask, keep=1)[:, 0, :]  # [B, V]
        values, indices = first.topk(min(k, first.shape[-1]), dim=-1)  # [B, k]
        out = []
        for row_values, row_ids in zip(values.tolist(), indices.tolist(), strict=True):
            top: dict[str, float] = {}
            for value, tok in zip(row_values, row_ids, strict=True):
                top.setdefault(self.tokenizer.decode([tok]), value)  # two ids, one string: keep the likelier
            out.append(top)
        return out

    # ------------------------------------------------------------------------------ lifecycle
    def sleep(self) -> None:
        """Offload the weights to host memory (and free the device cache).

        The host buffers are allocated at the first sleep and reused by every later one;
        ``stats().extra`` reports them and the device memory left allocated after the sleep.
        """
        if self._offload.active:
            return
        if self._static is not None:
            self._static.release()  # the KV caches hold device memory too
        moved = self._offload.offload()
        logger.info(
            "Judge rank %d asleep: %.1f MiB offloaded, %.1f MiB left on the device",
            self.rank,
            moved / 2**20,
            (self._offload.stats.device_bytes_after_sleep or 0) / 2**20,
        )

    def wake(self) -> None:
        """Bring the weights back to the device."""
        if self._offload.active:
            self._offload.restore()
            logger.info("Judge rank %d awake", self.rank)

    @property
    def asleep(self) -> bool:
        """Whether the weights are offloaded."""
        return self._offload.active

    def _ensure_awake(self) -> None:
        if self._offload.active:
            logger.warning("Judge called while asleep: waking it first (call wake() before use)")
            self.wake()

    def stats_extra(self) -> dict[str, Any]:
        """Facts for the judge's ``stats().extra``: sleep state, generation mode, host buffers, and
        with the static loop how busy its decode slots were (``decode_slot_utilisation``)."""
        offload = self._offload.stats
        facts = {
            "asleep": self.asleep,
            "generation": self.generation_mode,
            "host_buffer_bytes": offload.host_bytes,
            "host_buffer_allocations": offload.allocations,
            "sleep_cycles": offload.cycles,
            "device_bytes_after_sleep": offload.device_bytes_after_sleep,
        }
        if self._static is not None:
            decoded = self._static.stats
            facts.update(
                decode_steps=decoded.decode_steps,
                decode_slot_steps=decoded.slot_steps,
                decode_slot_utilisation=decoded.utilisation,
                prefills=decoded.prefills,
            )
        return facts

    def shutdown(self) -> None:
        """Leave the process group and drop the model; safe to call twice."""
        if getattr(self, "model", None) is None:
            return
        self.model = None
        if self.world_size > 1 and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


class LocalTransformersJudge(PipelineJudge):
    """The transformers judge in this process, without Ray: the judge pipeline over one worker.

    Takes the arguments of :class:`TransformersWorker`; the worker's attributes (``model``,
    ``tokenizer``, ``asleep``...) read through.
    """

    def __init__(self, judge_config: JudgeConfig, *args: Any, **kwargs: Any):
        worker = TransformersWorker(judge_config, *args, **kwargs)
        self.worker = worker
        fitter = PromptFitter.for_judge(worker.config, worker.tokenizer)
        super().__init__(worker.config, LocalRunner(worker), fitter=fitter)

    def __getattr__(self, name: str) -> Any:
        worker = self.__dict__.get("worker")
        if worker is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(worker, name)

    def _values(self, method: str, prompts: Sequence[FittedPrompt], new_tokens: int, *extra: Any) -> list:
        outcomes = self.run_fitted(method, prompts, new_tokens, *extra)
        return [outcomes[i] for i in range(len(prompts))]

    def generate_fitted(self, prompts: Sequence[FittedPrompt]) -> list[GenOut]:
        """``(text, tokens generated)`` per fitted prompt, in planned batches, in order."""
        return self._values("generate_fitted", prompts, self.config.sampling.reply_tokens)

    def score_fitted(self, prompts: Sequence[FittedPrompt], labels: Sequence[str]) -> list[dict]:
        """Label probabilities per fitted prompt, in planned batches, in order."""
        labels = check_labels(labels)
        longest = max(len(ids) for ids in label_token_ids(self.worker.tokenizer, labels))
        return self._values("score_fitted", prompts, longest, labels)

    def top_logprobs_fitted(self, prompts: Sequence[FittedPrompt], k: int) -> list[dict]:
        """The ``k`` likeliest first reply tokens per fitted prompt, in order."""
        return self._values("top_logprobs_fitted", prompts, 1, k)


class TransformersJudge(PooledJudge):
    """The transformers judge on Ray: replicas for data parallelism, DTensor for tensor
    parallelism (see :class:`~nemo_genrm.judges.pooled.PooledJudge` for the arguments)."""

    @classmethod
    def worker_spec(cls, config: JudgeConfig, placement: Placement) -> WorkerSpec:
        """``dtensor.tensor_parallel_size`` ranks per replica, one :class:`TransformersWorker` each."""
        tp = config.dtensor.tensor_parallel_size

        def kwargs_for(rank: int, replica: ReplicaPlacement) -> dict:
            # Ray shows each actor only its own GPU, so its device index is always 0.
            return {
                "judge_config": config,
                "rank": rank,
                "world_size": tp,
                "local_rank": 0,
                "num_threads": max(1, int(replica.num_cpus)),
            }

        return WorkerSpec(TransformersWorker, tp, kwargs_for, needs_address=tp > 1)
