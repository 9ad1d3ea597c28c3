"""Static-cache generation for the transformers judge: a preallocated KV cache and a decode step
that can be compiled once and replayed as a CUDA graph.

transformers' ``generate`` with its dynamic cache grows the cache every step and runs the whole
Python generation loop around each forward; at judge batch sizes a decode step then costs tens of
times the memory-bandwidth floor (weights plus KV read once per step). :class:`StaticGenerator`
keeps one :class:`transformers.StaticCache` per ``(batch, cache length)`` shape, prefills it in
one forward pass, and runs the decode steps on fixed-shape inputs (one token per row, a fixed
attention mask over the whole cache), so the step can be compiled with ``mode="reduce-overhead"``
(CUDA graphs). Shapes are bucketed (batch sizes to powers of two, cache lengths to a multiple of
``length_multiple``) so few shapes, hence few graphs, exist.

Rows that reached EOS keep their slot (a CUDA graph has a fixed batch) and write padding; the
batch stops as soon as every row is done, checked every ``check_every`` steps so the host does
not wait on the device at every step.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decoding:
    """How to pick the next token: greedy when ``temperature == 0``, else top-p sampling."""

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


def trim_at_eos(row: list[int], eos_ids: Sequence[int]) -> list[int]:
    """``row`` up to and including its first EOS (all of it when it has none)."""
    stop = next((i for i, tok in enumerate(row) if tok in eos_ids), None)
    return row if stop is None else row[: stop + 1]


def round_up(value: int, multiple: int) -> int:
    """``value`` rounded up to a multiple of ``multiple``."""
    return -(-value // multiple) * multiple


def next_power_of_two(value: int) -> int:
    """The smallest power of two at or above ``value`` (1 for 0 or 1)."""
    return 1 << max(0, value - 1).bit_length()


def kv_bytes_per_token(model_config, world_size: int, element_size: int) -> int:
    """Bytes of KV cache one token takes on one rank (keys and values, every layer)."""
    text = model_config.get_text_config(decoder=True) if hasattr(model_config, "get_text_config") else model_config
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return 2 * text.num_hidden_layers * max(1, kv_heads // world_size) * head_dim * element_size


def activation_bytes_per_token(model_config, element_size: int) -> int:
    """A generous estimate of one layer's live prefill activations per prompt token.

    The residual stream, the attention projections and the MLP's gate, up and product tensors
    are alive together inside a layer; layers run one after the other, so one layer's worth
    bounds the peak (the logits are kept for the last position only).
    """
    text = model_config.get_text_config(decoder=True) if hasattr(model_config, "get_text_config") else model_config
    intermediate = getattr(text, "intermediate_size", 4 * text.hidden_size)
    return element_size * (6 * text.hidden_size + 3 * intermediate)


def batch_limits_from_memory(
    free_bytes: int, fraction: float, kv_per_token: int, act_per_token: int, max_len: int, new_tokens: int
) -> tuple[int, int]:
    """Largest batch (a power of two) and prompt-token budget that fit ``fraction`` of free memory.

    Args:
        free_bytes: Free device memory now (weights already loaded).
        fraction: Share of it one batch may use.
        kv_per_token: KV cache bytes per token (see :func:`kv_bytes_per_token`).
        act_per_token: Prefill activation bytes per prompt token.
        max_len: Longest prompt of the call, in tokens.
        new_tokens: Tokens each row may generate (0 for a forward pass).

    Returns:
        ``(max_batch_size, max_tokens_per_batch)``, both at least 1.
    """
    budget = int(free_bytes * fraction)
    per_row = kv_per_token * (max_len + new_tokens) + act_per_token * max_len
    rows = max(1, budget // max(1, per_row))
    rows = 1 << (rows.bit_length() - 1)  # a power of two: few distinct compiled shapes
    tokens = max(1, budget // max(1, kv_per_token + act_per_token))
    return rows, tokens


class StaticGenerator:
    """Batched decoding into a preallocated KV cache (see the module docstring).

    Args:
        model: A transformers causal LM (its weights may be DTensors).
        eos_ids: Token ids that end a row.
        pad_id: Id written after a row's EOS and into padding rows.
        compile_step: Compile the decode step with ``mode="reduce-overhead"`` (CUDA graphs).
        length_multiple: Cache lengths are rounded up to a multiple of this.
        check_every: Steps between checks whether every row is done.
        max_cached_shapes: KV caches kept for reuse (oldest dropped first).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        eos_ids: Sequence[int],
        pad_id: int,
        *,
        compile_step: bool = False,
        length_multiple: int = 64,
        check_every: int = 8,
        max_cached_shapes: int = 2,
    ):
        self.model = model
        self.pad_id = pad_id
        self.length_multiple = length_multiple
        self.check_every = max(1, check_every)
        self.max_cached_shapes = max(1, max_cached_shapes)
        self._eos = torch.tensor(sorted(set(eos_ids)), dtype=torch.long)
        self._caches: OrderedDict[tuple[int, int], object] = OrderedDict()
        self._step = self._decode_step
        self.compiled = False
        self._compiled_ran = False
        if compile_step:
            self._step = torch.compile(self._decode_step, mode="reduce-overhead", fullgraph=True)
            self.compiled = True

    # ------------------------------------------------------------------------------ caches
    def _cache(self, batch: int, length: int):
        """A reset :class:`StaticCache` for ``batch`` rows of ``length`` positions (reused)."""
        from transformers import StaticCache

        key = (batch, length)
        cache = self._caches.pop(key, None)
        if cache is None:
            while len(self._caches) >= self.max_cached_shapes:
                self._caches.popitem(last=False)
            param = next(self.model.parameters())
            # transformers >= 5 sizes the cache lazily from the first keys; older versions take
            # the batch, device and dtype up front (later versions accept and ignore them).
            cache = StaticCache(
                config=self.model.config, max_cache_len=length, max_batch_size=batch,
                device=param.device, dtype=param.dtype,
            )
        else:
            cache.reset()
        self._caches[key] = cache
        return cache

    def cached_bytes(self) -> int:
        """Device bytes held by the kept KV caches (reusable by the next batch)."""
        total = 0
        for cache in self._caches.values():
            for layer in getattr(cache, "layers", ()):
                for tensor in (getattr(layer, "keys", None), getattr(layer, "values", None)):
                    if isinstance(tensor, torch.Tensor):
                        total += tensor.numel() * tensor.element_size()
        return total

    def release(self) -> None:
        """Drop every KV cache (before a sleep: they hold device memory)."""
        self._caches.clear()

    # ------------------------------------------------------------------------------ decoding
    def _decode_step(self, tokens, positions, cache_position, mask, cache):
        """One decode step: ``tokens [B, 1]`` -> last-position logits ``[B, V]``."""
        out = self.model(
            input_ids=tokens, position_ids=positions, cache_position=cache_position,
            attention_mask=mask, past_key_values=cache, use_cache=True,
        )
        return out.logits[:, -1, :]

    def _run_step(self, *args) -> torch.Tensor:
        """The decode step, compiled when asked; a compile that fails falls back to eager once."""
        if self.compiled:
            try:
                torch.compiler.cudagraph_mark_step_begin()
                logits = self._step(*args).clone()  # a graph's output is overwritten by its next replay
                self._compiled_ran = True
                return logits
            except Exception as exc:  # compile errors come in many types; after one success, raise
                if self._compiled_ran:
                    raise
                logger.warning("Compiling the decode step failed (%s: %s); decoding eagerly from now on",
                               type(exc).__name__, exc)
                self.compiled = False
        return self._decode_step(*args)

    def _pick(self, logits: torch.Tensor, decoding: Decoding, generators) -> torch.Tensor:
        """Next token per row ``[B]`` from last-position logits ``[B, V]``; with sampling, the
        rows of each ``(rows, generator)`` entry of ``generators`` draw from that generator."""
        if decoding.temperature <= 0:
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits.float() / decoding.temperature, dim=-1)  # [B, V]
        if decoding.top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True)  # [B, V]
            before = sorted_probs.cumsum(-1) - sorted_probs  # mass ranked above each token
            sorted_probs = sorted_probs.masked_fill(before >= decoding.top_p, 0.0)
            probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
        if len(generators) == 1:
            return torch.multinomial(probs, 1, generator=generators[0][1]).squeeze(-1)
        token = torch.empty(probs.shape[0], dtype=torch.long, device=probs.device)  # [B]
        for rows, generator in generators:
            token[rows] = torch.multinomial(probs[rows], 1, generator=generator).squeeze(-1)
        return token

    @torch.no_grad()
    def generate(
        self, prompts: Sequence[Sequence[int]], decoding: Decoding, seeds: Sequence[int] | None = None
    ) -> list[list[int]]:
        """New tokens per prompt (up to and including the first EOS), in input order.

        The rows are left-padded to one width; the batch is padded with copies of its first
        prompt up to a power of two, and the cache length rounded up to ``length_multiple``.

        Args:
            prompts: Token ids of each prompt (a single batch; the caller plans batches).
            decoding: Greedy or sampling settings and the number of new tokens.
            seeds: With sampling, each prompt's seed (default: ``decoding.seed`` for all): the
                rows of one seed draw from one generator seeded with it.

        Returns:
            The generated ids of each prompt.
        """
        device = next(self.model.parameters()).device
        rows = len(prompts)
        batch = next_power_of_two(rows) if self.compiled else rows
        padded = list(prompts) + [prompts[0]] * (batch - rows)
        width = max(len(p) for p in padded)
        new = decoding.max_new_tokens
        length = round_up(width + new, self.length_multiple)
        ids = torch.full((batch, width), self.pad_id, dtype=torch.long)  # [B, T]
        mask = torch.ones((batch, length), dtype=torch.long)  # [B, L]: future slots are hidden by causality
        pad = torch.tensor([width - len(p) for p in padded], dtype=torch.long)  # [B]
        for row, prompt in enumerate(padded):
            ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            mask[row, : width - len(prompt)] = 0
        ids, mask, pad = ids.to(device), mask.to(device), pad.to(device)
        eos = self._eos.to(device)
        cache = self._cache(batch, length)
        positions = (mask[:, :width].cumsum(-1) - 1).clamp(min=0)  # [B, T]
        logits = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
            cache_position=torch.arange(width, device=device), use_cache=True, logits_to_keep=1,
        ).logits[:, -1, :]  # [B, V]
        generators = []
        if decoding.temperature > 0:  # same seeds on every rank: identical samples
            row_seeds = list(seeds) if seeds is not None else [decoding.seed] * rows
            row_seeds += [row_seeds[0]] * (batch - rows)  # padding rows copy the first prompt
            for seed in sorted(set(row_seeds)):
                chosen = torch.tensor([i for i, s in enumerate(row_seeds) if s == seed], device=device)
                generators.append((chosen, torch.Generator(device=device).manual_seed(seed)))
        out = torch.full((batch, new), self.pad_id, dtype=torch.long, device=device)  # [B, N]
        done = torch.zeros(batch, dtype=torch.bool, device=device)  # [B]
        steps = new
        for step in range(new):
            token = self._pick(logits, decoding, generators)  # [B]
            token = torch.where(done, torch.full_like(token, self.pad_id), token)
            out[:, step] = token
            done |= torch.isin(token, eos)
            if step == new - 1:
                break
            if (step + 1) % self.check_every == 0 and bool(done.all()):
                steps = step + 1
                break
            where = width + step
            logits = self._run_step(
                token.unsqueeze(-1), (where - pad).unsqueeze(-1),
                torch.tensor([where], device=device), mask, cache,
            )  # [B, V]
        eos_ids = self._eos.tolist()
        return [trim_at_eos(row, eos_ids) for row in out[:rows, :steps].tolist()]
