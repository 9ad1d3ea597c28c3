"""Static-cache generation for the transformers judge: fixed slots refilled as rows finish, and
a decode step of one shape that can be compiled once and replayed as a CUDA graph.

transformers' ``generate`` with its dynamic cache grows the cache every step and runs the whole
Python generation loop around each forward; at judge batch sizes a decode step then costs tens of
times the memory-bandwidth floor (weights plus KV read once per step). :class:`StaticGenerator`
takes a queue of prompts and keeps ``slots`` of them decoding at once in a preallocated
:class:`~nemo_genrm.judges.hf_slots.SlotCache`: the decode step runs on fixed-shape inputs (one
token per row, each row's own position and mask), so it can be compiled with
``mode="reduce-overhead"`` (CUDA graphs), and when a row ends (EOS or its token budget) its slot
is refilled with the next prompt of the queue (its prefill written into that slot's row), so the
batch stays full until the queue is empty (continuous batching). Judges that reason write
verdicts of very different lengths; a batch decoded until its longest row is done would spend
most of its slots writing padding.

The host looks at the device only every ``check_every`` steps (and when a row's budget must have
run out): then finished rows are read, their slots refilled, and, once the queue is empty and at
most half the slots are busy, the busy rows are moved to the front and the step narrowed to a
power of two at least as wide (few widths, so few graphs). Shapes are bucketed: slots to a power
of two when compiled, the cache length to a multiple of ``length_multiple``.

Greedy decoding gives the tokens of transformers' ``generate`` (float32: exactly; the arithmetic
is the same up to the order of the sums), whatever the slot a prompt lands in.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from nemo_genrm.judges.hf_slots import SlotCache, fill_inputs

logger = logging.getLogger(__name__)

_RECOMPILE_LIMIT = 64


@dataclass(frozen=True)
class Decoding:
    """How to pick the next token: greedy when ``temperature == 0``, else top-p sampling.

    Attributes:
        max_new_tokens: Most tokens a row may generate.
        temperature: 0 for greedy decoding.
        top_p: Nucleus sampling mass.
        seed: Sampling seed of every row without its own.
        reasoning_budget: A row still inside its thought after this many tokens stops there (it
            ran over budget). A row is inside its thought from an id of ``open_ids`` (or from
            the start, see ``thinking`` of :meth:`StaticGenerator.generate`) to one of ``close_ids``.
        open_ids: Ids that open a thought (``<think>`` when it is one token).
        close_ids: Ids that close it (``</think>`` when it is one token).
    """

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    reasoning_budget: int | None = None
    open_ids: tuple[int, ...] = ()
    close_ids: tuple[int, ...] = ()


@dataclass
class GenerationStats:
    """What the static loop did, summed over calls: how busy its decode slots were.

    Attributes:
        sequences: Prompts generated for.
        tokens: Tokens generated (each is one busy slot of one step).
        decode_steps: Decode steps run.
        slot_steps: Slots run, summed over the steps that pick a token per slot (busy or not;
            a step picks from the prefill's logits or the last decode step's).
        prefills: Prefill passes (the first fill and every refill).
        prefill_tokens: Prompt positions prefilled, padding included.
        narrowed: Times the batch was narrowed while the last rows drained.
    """

    sequences: int = 0
    tokens: int = 0
    decode_steps: int = 0
    slot_steps: int = 0
    prefills: int = 0
    prefill_tokens: int = 0
    narrowed: int = 0

    @property
    def utilisation(self) -> float:
        """Share of the decode slots that generated a token (1.0 when nothing ran)."""
        return self.tokens / self.slot_steps if self.slot_steps else 1.0

    def add(self, other: GenerationStats) -> None:
        """Add ``other``'s counts to these."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


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
    """Continuous batching into a preallocated slot cache (see the module docstring).

    Args:
        model: A transformers causal LM whose layers all use full attention (its weights may be
            DTensors).
        eos_ids: Token ids that end a row.
        pad_id: Id written after a row's end and fed to idle slots.
        compile_step: Compile the decode step with ``mode="reduce-overhead"`` (CUDA graphs).
        length_multiple: Cache lengths are rounded up to a multiple of this.
        check_every: Steps between looks at which rows are done.
        refill_share: While prompts wait, free slots are refilled once at least this share of
            the slots is free (at least one): one prefill pass serves several slots.
        max_cached_shapes: Slot caches kept for reuse (oldest dropped first).

    Attributes:
        stats: What every call so far did (:class:`GenerationStats`).
        last_stats: What the last call did.
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
        refill_share: float = 1 / 16,
        max_cached_shapes: int = 2,
    ):
        self.model = model
        self.pad_id = pad_id
        self.length_multiple = length_multiple
        self.check_every = max(1, check_every)
        self.refill_share = refill_share
        self.max_cached_shapes = max(1, max_cached_shapes)
        self._eos = torch.tensor(sorted(set(eos_ids)), dtype=torch.long)
        self._caches: OrderedDict[tuple[int, int], SlotCache] = OrderedDict()
        self._step = self._decode_step
        self.compiled = False
        self._compiled_ran = False
        self.stats = GenerationStats()
        self.last_stats = GenerationStats()
        if compile_step:
            self._step = torch.compile(self._decode_step, mode="reduce-overhead", fullgraph=True)
            self.compiled = True
            # One graph per (width, cache length): the widths a drain narrows through alone are
            # log2(slots) + 1, more than dynamo's default of 8 recompiles before it runs eagerly.
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, _RECOMPILE_LIMIT)

    # ------------------------------------------------------------------------------ caches
    def _cache(self, slots: int, length: int) -> SlotCache:
        """A :class:`SlotCache` of ``slots`` rows and ``length`` columns (kept and reused)."""
        key = (slots, length)
        cache = self._caches.pop(key, None)
        if cache is None:
            while len(self._caches) >= self.max_cached_shapes:
                self._caches.popitem(last=False)
            config = self.model.config
            text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
            device = next(self.model.parameters()).device
            cache = SlotCache(text.num_hidden_layers, slots, length, device)
        else:
            cache.width = slots  # old rows are hidden by the masks; their values are finite
        self._caches[key] = cache
        return cache

    def cached_bytes(self) -> int:
        """Device bytes held by the kept slot caches (reusable by the next call)."""
        return sum(cache.nbytes() for cache in self._caches.values())

    def release(self) -> None:
        """Drop every slot cache (before a sleep: they hold device memory)."""
        self._caches.clear()

    # ------------------------------------------------------------------------------ decoding
    def _decode_step(self, tokens, positions, mask, cache):
        """One decode step: ``tokens [W, 1]`` at ``positions [W, 1]`` -> logits ``[W, V]``."""
        out = self.model(
            input_ids=tokens,
            position_ids=positions,
            attention_mask=mask,
            past_key_values=cache,
            use_cache=True,
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
                logger.warning(
                    "Compiling the decode step failed (%s: %s); decoding eagerly from now on", type(exc).__name__, exc
                )
                self.compiled = False
        return self._decode_step(*args)

    def _prefill(self, cache: SlotCache, rows: torch.Tensor, inputs: dict) -> torch.Tensor:
        """Prefill ``inputs`` (:func:`fill_inputs`) into ``rows``: their last-position logits ``[R, V]``."""
        with cache.filling(rows, inputs["cols"]):
            out = self.model(
                input_ids=inputs["input_ids"],
                position_ids=inputs["position_ids"],
                attention_mask=inputs["attention_mask"],
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
        return out.logits[:, -1, :]

    @staticmethod
    def _pick(logits: torch.Tensor, decoding: Decoding, groups) -> torch.Tensor:
        """Next token per row ``[W]`` from last-position logits ``[W, V]``; with sampling, the
        rows of each ``(rows, generator)`` entry of ``groups`` draw from that generator (rows in
        no group take the argmax: they are idle)."""
        token = logits.argmax(dim=-1)  # [W]
        if decoding.temperature <= 0 or not groups:
            return token
        probs = torch.softmax(logits.float() / decoding.temperature, dim=-1)  # [W, V]
        if decoding.top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True)  # [W, V]
            before = sorted_probs.cumsum(-1) - sorted_probs  # mass ranked above each token
            sorted_probs = sorted_probs.masked_fill(before >= decoding.top_p, 0.0)
            probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
        for rows, generator in groups:
            token[rows] = torch.multinomial(probs[rows], 1, generator=generator).squeeze(-1)
        return token

    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        decoding: Decoding,
        seeds: Sequence[int] | None = None,
        *,
        slots: int | None = None,
        narrow: bool = True,
        thinking: Sequence[bool] | None = None,
    ) -> list[list[int]]:
        """New tokens per prompt (up to and including its EOS), in input order.

        Args:
            prompts: Token ids of each prompt: the queue (longest prompts are started first).
            decoding: Greedy or sampling settings, the number of new tokens, the reasoning budget.
            seeds: With sampling, each prompt's seed (default: ``decoding.seed`` for all): the
                rows of one seed draw from one generator seeded with it.
            slots: Rows decoded at once (default: every prompt at once); a power of two when
                the step is compiled.
            narrow: Narrow the step as the last rows drain (else finished rows keep their slots
                and write padding until every row is done, as a plain batch does).
            thinking: Per prompt, whether its reply starts inside a thought (the template opened
                it): with ``decoding.reasoning_budget``.

        Returns:
            The generated ids of each prompt.
        """
        if not prompts:
            return []
        width = min(slots or len(prompts), len(prompts))
        if self.compiled:  # a power of two, never above ``slots`` (memory was planned for it)
            width = next_power_of_two(width)
            width = width // 2 if slots is not None and width > slots else width
        length = round_up(max(len(p) for p in prompts) + decoding.max_new_tokens, self.length_multiple)
        run = _Run(self, self._cache(width, length), prompts, decoding, seeds, narrow, thinking)
        results = run.drive()
        self.last_stats = run.stats
        self.stats.add(run.stats)
        return results


class _Run:
    """One call of :meth:`StaticGenerator.generate`: the queue, the slots' state, the results."""

    def __init__(
        self,
        gen: StaticGenerator,
        cache: SlotCache,
        prompts,
        decoding: Decoding,
        seeds,
        narrow: bool,
        thinking: Sequence[bool] | None,
    ):
        self.gen, self.cache, self.decoding, self.narrow = gen, cache, decoding, narrow
        self.prompts = [list(p) for p in prompts]
        self.starts_thinking = list(thinking) if thinking is not None else [False] * len(prompts)
        self.seeds = list(seeds) if seeds is not None else [decoding.seed] * len(prompts)
        param = next(gen.model.parameters())
        self.device, self.dtype = param.device, param.dtype
        slots, length, new = cache.slots, cache.length, decoding.max_new_tokens
        self.out = torch.full((slots, new + 1), gen.pad_id, dtype=torch.long, device=self.device)  # [S, N+1]
        self.count = torch.zeros(slots, dtype=torch.long, device=self.device)  # [S] tokens per row
        self.done = torch.ones(slots, dtype=torch.bool, device=self.device)  # [S] a free slot is done
        self.thinking = torch.zeros(slots, dtype=torch.bool, device=self.device)  # [S] inside a thought
        self.positions = torch.zeros(slots, dtype=torch.long, device=self.device)  # [S]
        low = torch.finfo(self.dtype).min
        self.mask = torch.full((slots, 1, 1, length), low, dtype=self.dtype, device=self.device)  # [S, 1, 1, L]
        self.logits: torch.Tensor | None = None  # [S, V], sized by the first prefill
        self.eos = gen._eos.to(self.device)
        self.open_ids = torch.tensor(decoding.open_ids, dtype=torch.long, device=self.device)
        self.close_ids = torch.tensor(decoding.close_ids, dtype=torch.long, device=self.device)
        self.occupant: list[int | None] = [None] * slots  # the prompt each slot decodes
        self.deadline = [0] * slots  # step by which each occupied slot is surely done
        self.generators: dict[int, torch.Generator] = {}
        self.groups: list[tuple[torch.Tensor, torch.Generator]] = []
        self.results: list[list[int] | None] = [None] * len(prompts)
        self.stats = GenerationStats(sequences=len(prompts))
        self.clock = 0  # decode steps run: the ring column of the next write is clock % length
        self.token: torch.Tensor | None = None  # [W] the tokens just picked, fed to the next step
        self.refill_at = max(1, int(slots * gen.refill_share))

    def drive(self) -> list[list[int]]:
        """Run the queue to the end; the new ids per prompt, in input order."""
        pending = deque(sorted(range(len(self.prompts)), key=lambda i: (-len(self.prompts[i]), i)))
        next_check = 0
        while True:
            if self.clock >= next_check:
                if not self._check(pending):
                    break
                busy = [d for d, o in zip(self.deadline, self.occupant, strict=True) if o is not None]
                next_check = min(self.clock + self.gen.check_every, min(busy))
            self._pick_and_record()
            if not pending and self.clock + 1 >= max(self.deadline):
                self.clock += 1  # every row has used its whole budget: no step needed
                continue
            self._decode()
        return [row if row is not None else [] for row in self.results]

    # -------------------------------------------------------------------------- every step
    def _pick_and_record(self) -> None:
        """Pick each slot's next token, record it, and mark the rows that just ended."""
        width, new = self.cache.width, self.decoding.max_new_tokens
        live = ~self.done[:width]  # [W]
        token = self.gen._pick(self.logits[:width], self.decoding, self.groups)  # [W]
        token = torch.where(live, token, self.gen.pad_id)
        self.token = token
        at = torch.where(live, self.count[:width], new)  # finished rows write into the spare column
        self.out[:width].scatter_(1, at[:, None], token[:, None])
        count = self.count[:width]
        count += live
        stop = torch.isin(token, self.eos) | (count >= new)
        if self.decoding.reasoning_budget is not None:
            thinking = self.thinking[:width]
            thinking |= torch.isin(token, self.open_ids)
            thinking &= ~torch.isin(token, self.close_ids)
            stop |= (count >= self.decoding.reasoning_budget) & thinking
        self.done[:width] |= stop
        self.stats.slot_steps += width

    def _decode(self) -> None:
        """One decode step over the slots: every row writes its token's keys at the ring column."""
        width, column = self.cache.width, self.clock % self.cache.length
        self.cache.column.fill_(column)
        self.mask[:, :, :, column] = 0.0  # every busy row's next column
        logits = self.gen._run_step(self.token[:, None], self.positions[:width, None], self.mask[:width], self.cache)
        self.logits[:width].copy_(logits)
        self.positions[:width] += 1
        self.clock += 1
        self.stats.decode_steps += 1

    # ------------------------------------------------------------------------ at each check
    def _check(self, pending: deque) -> bool:
        """Read finished rows, refill free slots or narrow the batch; False when all is done."""
        width = self.cache.width
        done = self.done[:width].tolist()
        finished = [r for r in range(width) if done[r] and self.occupant[r] is not None]
        if finished:
            self._harvest(finished)
            self._regroup()  # a freed slot draws from no prompt's generator
        free = [r for r in range(width) if done[r]]
        if pending and free and len(free) >= min(self.refill_at, len(pending)):
            rows = free[: len(pending)]
            self._fill(rows, [pending.popleft() for _ in rows])
        busy = [r for r in range(width) if self.occupant[r] is not None]
        if self.narrow and not pending and busy and len(busy) <= width // 2:
            self._narrow(busy)
        return bool(busy)

    def _harvest(self, rows: list[int]) -> None:
        index = torch.tensor(rows, device=self.device)
        counts = self.count[index].tolist()
        tokens = self.out[index, : max(counts)].tolist()
        for row, n, ids in zip(rows, counts, tokens, strict=True):
            self.results[self.occupant[row]] = ids[:n]
            self.occupant[row] = None
            self.stats.tokens += n

    def _fill(self, rows: list[int], items: list[int]) -> None:
        """Prefill prompts ``items`` into slots ``rows`` behind the ring's current column."""
        prompts = [self.prompts[i] for i in items]
        inputs = fill_inputs(prompts, self.gen.pad_id, self.clock, self.cache.length, self.dtype, self.device)
        index = torch.tensor(rows, device=self.device)
        logits = self.gen._prefill(self.cache, index, inputs)  # [R, V]
        if self.logits is None:
            self.logits = logits.new_zeros((self.cache.slots, logits.shape[-1]))  # [S, V]
        self.logits[index] = logits
        self.mask[index, 0, 0] = inputs["row_mask"]
        self.positions[index] = torch.tensor([len(p) for p in prompts], device=self.device)
        self.count[index] = 0
        self.done[index] = False
        self.thinking[index] = torch.tensor([self.starts_thinking[i] for i in items], device=self.device)
        for row, item in zip(rows, items, strict=True):
            self.occupant[row] = item
            self.deadline[row] = self.clock + self.decoding.max_new_tokens
        self.stats.prefills += 1
        self.stats.prefill_tokens += inputs["input_ids"].numel()
        self._regroup()

    def _narrow(self, busy: list[int]) -> None:
        """Move the busy rows to the front and run the step that much narrower."""
        count = len(busy)
        width = next_power_of_two(count) if self.gen.compiled else count
        if width >= self.cache.width:
            return
        keep = torch.tensor(busy, device=self.device)
        for state in (self.out, self.count, self.done, self.thinking, self.positions, self.logits, self.mask):
            state[:count] = state.index_select(0, keep)
        self.cache.compact(keep)
        self.done[count:width] = True
        self.occupant = [self.occupant[r] for r in busy] + [None] * (len(self.occupant) - count)
        self.deadline = [self.deadline[r] for r in busy] + [0] * (len(self.deadline) - count)
        self.cache.width = width
        self.stats.narrowed += 1
        self._regroup()

    def _regroup(self) -> None:
        """With sampling: which busy rows draw from which seed's generator."""
        if self.decoding.temperature <= 0:
            return
        by_seed: dict[int, list[int]] = {}
        for row, item in enumerate(self.occupant):
            if item is not None:
                by_seed.setdefault(self.seeds[item], []).append(row)
        for seed in by_seed:
            if seed not in self.generators:
                self.generators[seed] = torch.Generator(device=self.device).manual_seed(seed)
        self.groups = [
            (torch.tensor(rows, device=self.device), self.generators[seed]) for seed, rows in sorted(by_seed.items())
        ]
