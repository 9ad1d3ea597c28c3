"""The policy: a transformers causal LM that samples responses and takes GRPO updates.

:class:`PolicyWorker` holds the logic and runs in-process (tests) or inside a Ray actor
(:data:`PolicyActor`, what the driver starts). It owns the trained model, a frozen reference copy
for the KL term (only when the penalty is positive), the AdamW optimizer and the RNG that
sampling draws from, and it saves and restores all four.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
import torch

from nemo_genrm.dtypes import DTYPES
from nemo_genrm.grpo.config import LossFnConfig, PolicyConfig
from nemo_genrm.grpo.loss import clipped_pg_loss
from nemo_genrm.ray_env import actor_runtime_env

logger = logging.getLogger(__name__)

__all__ = ["GeneratedSample", "PolicyActor", "PolicyWorker", "TrainBatch"]


@dataclass
class GeneratedSample:
    """One sampled response.

    Attributes:
        prompt_ids: Token ids of the prompt (no padding).
        response_ids: Token ids of the response, EOS included when it ended with one.
        text: The decoded response, special tokens removed.
        truncated: Whether it hit ``max_new_tokens`` without ending.
    """

    prompt_ids: list[int]
    response_ids: list[int]
    text: str
    truncated: bool


@dataclass
class TrainBatch:
    """What one GRPO update needs: the sampled sequences and one advantage per sequence.

    Attributes:
        prompt_ids: Per sample, the prompt token ids.
        response_ids: Per sample, the response token ids.
        advantages: Per sample, the advantage (a float).
    """

    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    advantages: list[float]

    def __len__(self) -> int:
        return len(self.advantages)


def _resolve_device(choice: str) -> torch.device:
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("policy.device is 'cuda' but no CUDA device is visible to the policy")
    return torch.device("cuda", torch.cuda.current_device())


def _collate(prompts: list[list[int]], responses: list[list[int]], pad_id: int) -> tuple[torch.Tensor, ...]:
    """Right-padded ids, attention mask and the mask of response tokens among the targets.

    Returns:
        ``input_ids [B, T]``, ``attention_mask [B, T]`` and ``target_mask [B, T-1]`` which is 1
        where the target token ``input_ids[:, 1:]`` belongs to the response.
    """
    lengths = [len(p) + len(r) for p, r in zip(prompts, responses, strict=True)]
    width = max(lengths)
    ids = torch.full((len(lengths), width), pad_id, dtype=torch.long)  # [B, T]
    attn = torch.zeros((len(lengths), width), dtype=torch.long)  # [B, T]
    target = torch.zeros((len(lengths), width - 1), dtype=torch.float32)  # [B, T-1]
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        ids[i, : len(p) + len(r)] = torch.tensor(p + r, dtype=torch.long)
        attn[i, : len(p) + len(r)] = 1
        target[i, len(p) - 1 : len(p) + len(r) - 1] = 1.0  # predicting response token j from position j-1
    return ids, attn, target


def _disable_dropout(model: torch.nn.Module) -> None:
    """Set every dropout probability in ``model`` to 0 (modules and attention attributes)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        for attr in ("attention_dropout", "dropout"):
            if isinstance(getattr(module, attr, None), float):
                setattr(module, attr, 0.0)


class PolicyWorker:
    """Samples responses, scores log-probs and applies the clipped GRPO update.

    Args:
        policy_cfg: The ``policy`` section (``model_name`` already a real path or hub id).
        loss_cfg: The ``loss_fn`` section.
        seed: Seeds model-side randomness (sampling).
    """

    def __init__(self, policy_cfg: PolicyConfig, loss_cfg: LossFnConfig, seed: int = 0):
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.cfg, self.loss_cfg = policy_cfg, loss_cfg
        torch.manual_seed(seed)
        self.device = _resolve_device(policy_cfg.device)
        if policy_cfg.cpu_threads is not None:
            torch.set_num_threads(policy_cfg.cpu_threads)
        self.compute_dtype = DTYPES[policy_cfg.precision]
        self.tokenizer = AutoTokenizer.from_pretrained(policy_cfg.tokenizer_name)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"
        self.model = self._load_model(trainable=True)
        self.reference = self._load_model(trainable=False) if loss_cfg.reference_policy_kl_penalty > 0 else None
        self.optimizer = self._make_optimizer()
        self._eos_ids = self._stop_token_ids()
        logger.info(
            "Policy %s on %s (%s), %.1fM parameters, reference %s",
            policy_cfg.model_name,
            self.device,
            policy_cfg.precision,
            sum(p.numel() for p in self.model.parameters()) / 1e6,
            "on" if self.reference else "off",
        )

    # ------------------------------------------------------------------------------- building
    def _load_model(self, trainable: bool, path: str | None = None) -> torch.nn.Module:
        from transformers import AutoConfig, AutoModelForCausalLM

        source = path or self.cfg.model_name
        # Dropout off everywhere: logp_old is computed in eval mode, the training forward in train
        # mode, so any dropout would make the importance ratio differ from 1 at the first update
        # (and the KL term noisy) although the weights are the sampling policy's. RL fine-tuning
        # wants no dropout anyway, so zero it in the config (attention dropout is read from there)
        # and in every Dropout module. Checkpoints keep the zeroed config.
        config = AutoConfig.from_pretrained(source)
        for key, value in config.to_dict().items():
            if ("dropout" in key or key.endswith("pdrop")) and isinstance(value, float):
                setattr(config, key, 0.0)
        # float32 weights (master copy); lower precision comes from autocast in `_autocast`.
        model = AutoModelForCausalLM.from_pretrained(source, config=config, dtype=torch.float32)
        _disable_dropout(model)
        model.to(self.device)
        model.train(trainable)
        if not trainable:
            model.requires_grad_(False)
        return model

    def _autocast(self) -> Any:
        """Autocast to the compute dtype (a no-op context for float32)."""
        enabled = self.compute_dtype != torch.float32
        return torch.autocast(device_type=self.device.type, dtype=self.compute_dtype, enabled=enabled)

    def _make_optimizer(self) -> torch.optim.Optimizer:
        kw = self.cfg.optimizer.kwargs
        extra = {k: v for k, v in (("foreach", kw.foreach), ("fused", kw.fused)) if v is not None}
        return torch.optim.AdamW(
            self.model.parameters(), lr=kw.lr, weight_decay=kw.weight_decay, betas=kw.betas, eps=kw.eps, **extra
        )

    def _stop_token_ids(self) -> list[int]:
        ids = {self.tokenizer.eos_token_id}
        model_eos = self.model.generation_config.eos_token_id
        ids.update(model_eos if isinstance(model_eos, list) else [model_eos])
        return sorted(i for i in ids if i is not None)

    # ----------------------------------------------------------------------------- generation
    @torch.no_grad()
    def generate(self, prompts: list[str], seed: int | None = None) -> list[GeneratedSample]:
        """Sample one response per prompt (repeat a prompt to get several).

        Args:
            prompts: Chat-templated prompt texts.
            seed: Draw from a generator seeded with this, leaving the policy's own random
                stream untouched (validation: the same draws at every validation, so two
                validations differ by the policy alone, and validating does not change what
                training samples); ``None``: the policy's stream.

        Returns:
            One :class:`GeneratedSample` per prompt, in order.
        """
        if seed is not None:
            devices = [self.device.index or 0] if self.device.type == "cuda" else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(seed)
                return self.generate(prompts)
        out: list[GeneratedSample] = []
        size = self.cfg.generation_batch_size
        self.model.eval()
        for start in range(0, len(prompts), size):
            out.extend(self._generate_batch(prompts[start : start + size]))
        self.model.train()
        return out

    def _generate_batch(self, prompts: list[str]) -> list[GeneratedSample]:
        from transformers import GenerationConfig

        gen = self.cfg.generation
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        input_ids = enc["input_ids"].to(self.device)  # [B, P]
        config = GenerationConfig(
            do_sample=True,
            temperature=gen.temperature,
            top_p=gen.top_p,
            top_k=gen.top_k or 0,
            max_new_tokens=gen.max_new_tokens,
            stop_strings=gen.stop_strings,
            eos_token_id=self._eos_ids,
            pad_token_id=self.tokenizer.pad_token_id,
        )
        with self._autocast():
            output = self.model.generate(
                input_ids=input_ids,
                attention_mask=enc["attention_mask"].to(self.device),
                generation_config=config,
                tokenizer=self.tokenizer if gen.stop_strings else None,
            )  # [B, P + N]
        new_tokens = output[:, input_ids.shape[1] :].tolist()  # [B, N]
        samples = []
        for row, ids, mask in zip(new_tokens, enc["input_ids"].tolist(), enc["attention_mask"].tolist(), strict=True):
            response, ended = self._trim(row)
            prompt_ids = [t for t, m in zip(ids, mask, strict=True) if m]
            text = self.tokenizer.decode(response, skip_special_tokens=True)
            samples.append(GeneratedSample(prompt_ids, response, text, truncated=not ended))
        return samples

    def _trim(self, row: list[int]) -> tuple[list[int], bool]:
        """Cut a generated row after its first stop token; drop padding after a stop string."""
        for i, tok in enumerate(row):
            if tok in self._eos_ids:
                return row[: i + 1], True
        pad = self.tokenizer.pad_token_id
        end = len(row)
        while end > 1 and row[end - 1] == pad:
            end -= 1
        ended = end < len(row) or self._ends_with_stop_string(row[:end])
        return row[:end], ended

    def _ends_with_stop_string(self, ids: list[int]) -> bool:
        stops = self.cfg.generation.stop_strings
        return bool(stops) and self.tokenizer.decode(ids).endswith(tuple(stops))

    # ------------------------------------------------------------------------------- training
    def _token_logprobs(self, model: torch.nn.Module, ids: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """Log-probs of each next token under ``model`` at the sampling temperature, ``[B, T-1]``."""
        with self._autocast():
            logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1]  # [B, T-1, V]
        logits = logits.float()  # [B, T-1, V]
        logits = logits / self.cfg.generation.temperature  # [B, T-1, V] as sampled
        targets = ids[:, 1:].unsqueeze(-1)  # [B, T-1, 1]
        return logits.gather(-1, targets).squeeze(-1) - torch.logsumexp(logits, dim=-1)  # [B, T-1]

    @torch.no_grad()
    def _frozen_logprobs(self, model: torch.nn.Module, batch: TrainBatch) -> list[torch.Tensor]:
        """Per sample, the response-token log-probs under a model without grad (on CPU)."""
        out: list[torch.Tensor] = []
        was_training = model.training
        model.eval()
        size = self.cfg.logprob_batch_size
        for s in range(0, len(batch), size):
            ids, attn, target = _collate(batch.prompt_ids[s : s + size], batch.response_ids[s : s + size], self._pad_id)
            lp = self._token_logprobs(model, ids.to(self.device), attn.to(self.device)).cpu()  # [b, T-1]
            out.extend(row[m.bool()] for row, m in zip(lp, target, strict=True))
        model.train(was_training)
        return out

    @property
    def _pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    def train(self, batch: TrainBatch) -> dict[str, float]:
        """One GRPO update: the batch is cut into global batches (one optimizer step each) and
        micro-batches (gradient accumulation).

        Args:
            batch: Sequences and advantages; its size must be a multiple of
                ``train_global_batch_size``.

        Returns:
            Means of the loss terms, the gradient norm and the learning rate.

        Raises:
            ValueError: The batch size is not a multiple of ``train_global_batch_size``.
        """
        gbs = self.cfg.train_global_batch_size
        if len(batch) % gbs:
            raise ValueError(f"batch of {len(batch)} is not a multiple of train_global_batch_size {gbs}")
        start = time.perf_counter()
        old = self._frozen_logprobs(self.model, batch)
        ref = self._frozen_logprobs(self.reference, batch) if self.reference is not None else None
        totals: dict[str, float] = {}
        for g in range(0, len(batch), gbs):
            step = self._optimizer_step(batch, range(g, g + gbs), old, ref)
            for key, value in step.items():
                totals[key] = totals.get(key, 0.0) + value / (len(batch) // gbs)
        totals["lr"] = self.optimizer.param_groups[0]["lr"]
        totals["train_time_s"] = time.perf_counter() - start
        return totals

    def _optimizer_step(
        self, batch: TrainBatch, rows: range, old: list[torch.Tensor], ref: list[torch.Tensor] | None
    ) -> dict[str, float]:
        tokens = sum(len(batch.response_ids[i]) for i in rows)
        normaliser = float(tokens if self.loss_cfg.token_level_loss else len(rows))
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = {}
        mbs = self.cfg.train_micro_batch_size
        for m in range(rows.start, rows.stop, mbs):
            idx = range(m, min(m + mbs, rows.stop))
            ids, attn, target = _collate(
                [batch.prompt_ids[i] for i in idx], [batch.response_ids[i] for i in idx], self._pad_id
            )
            ids, attn, target = ids.to(self.device), attn.to(self.device), target.to(self.device)
            logprobs = self._token_logprobs(self.model, ids, attn)  # [b, T-1]
            old_full = self._scatter([old[i] for i in idx], target)  # [b, T-1]
            ref_full = self._scatter([ref[i] for i in idx], target) if ref is not None else None  # [b, T-1]
            adv = torch.tensor([batch.advantages[i] for i in idx], device=self.device)  # [b]
            out = clipped_pg_loss(
                logprobs, old_full, adv, target, self.loss_cfg, ref_logprobs=ref_full, normaliser=normaliser
            )
            out.loss.backward()
            share = target.sum().item() / max(tokens, 1)
            sums["loss"] = sums.get("loss", 0.0) + out.loss.item()
            for key, value in out.metrics.items():
                sums[key] = sums.get(key, 0.0) + value * share
        params = [p for p in self.model.parameters() if p.grad is not None]
        max_norm = self.cfg.max_grad_norm if self.cfg.max_grad_norm is not None else math.inf
        sums["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        self.optimizer.step()
        return sums

    def _scatter(self, rows: list[torch.Tensor], target: torch.Tensor) -> torch.Tensor:
        """Place per-sample response values into the ``[b, T-1]`` layout of ``target``."""
        full = torch.zeros_like(target)  # [b, T-1]
        full[target.bool()] = torch.cat(rows).to(full.device, full.dtype)
        return full

    # ---------------------------------------------------------------------------- checkpoints
    def save_checkpoint(self, path: str) -> None:
        """Write weights (loadable by ``from_pretrained``), tokenizer, optimizer and RNG state."""
        root = Path(path)
        self.model.save_pretrained(str(root / "policy"))
        self.tokenizer.save_pretrained(str(root / "policy"))
        torch.save(self.optimizer.state_dict(), root / "optimizer.pt")
        rng = {"cpu": torch.get_rng_state()}
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        torch.save(rng, root / "policy_rng.pt")

    def load_checkpoint(self, path: str) -> None:
        """Restore what :meth:`save_checkpoint` wrote (the reference model is left as it is)."""
        root = Path(path)
        self.model = self._load_model(trainable=True, path=str(root / "policy"))
        self.optimizer = self._make_optimizer()
        self.optimizer.load_state_dict(torch.load(root / "optimizer.pt", map_location=self.device))
        rng = torch.load(root / "policy_rng.pt", weights_only=False)
        torch.set_rng_state(rng["cpu"])
        if "cuda" in rng and self.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"], self.device)

    def describe(self) -> dict[str, Any]:
        """Device, dtype and size (for the start-up log)."""
        return {
            "device": str(self.device),
            "dtype": self.cfg.precision,
            "parameters": sum(p.numel() for p in self.model.parameters()),
        }


PolicyActor = ray.remote(runtime_env=actor_runtime_env())(PolicyWorker)
"""The Ray actor the driver starts: ``PolicyActor.options(num_gpus=...).remote(policy_cfg, loss_cfg, seed)``."""
