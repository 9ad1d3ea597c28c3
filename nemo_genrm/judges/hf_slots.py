"""A KV cache of fixed slots whose rows each hold one sequence, refilled as sequences finish.

:class:`SlotCache` is what lets the static-cache loop of :mod:`nemo_genrm.judges.hf_generation`
batch continuously: ``slots`` rows by ``length`` columns of keys and values per layer,
preallocated once. Every decode step writes its new keys at one shared column for all rows (a
ring: the column advances by one per step, modulo ``length``), so the step keeps one shape and
can be compiled and replayed as a CUDA graph. A row's sequence lives in a contiguous run of
columns of that ring, ending at the current column; the attention mask of each row
(:meth:`SlotCache.decode_mask`) shows that row its own run only. Which columns a row occupies
does not matter to attention: the rotary position of each token (``position_ids``, per row) was
applied to its key before the key was cached, and the softmax over keys is order-free.

Refilling a slot prefills the new prompt in one forward pass whose keys are written straight
into that slot's row, in the columns just behind the ring's current one (:meth:`SlotCache.filling`),
so its first decode step continues the ring like every other row. A row never outgrows the ring
(``prompt + new tokens <= length``), so it never overwrites its own prompt.

Only decoders whose layers all use full attention fit this layout (a sliding-window layer would
need its own ring); :func:`supports_slots` tells them apart. The model must accept a 4-D
additive attention mask (every transformers decoder with ``sdpa`` or ``eager`` attention does).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from transformers import Cache

try:  # transformers >= 4.56
    from transformers.cache_utils import CacheLayerMixin
except ImportError:  # pragma: no cover - older transformers have no layer classes
    CacheLayerMixin = object  # type: ignore[assignment,misc]


def supports_slots(model_config) -> bool:
    """Whether every layer of the model attends over its whole context (no sliding window)."""
    text = model_config.get_text_config(decoder=True) if hasattr(model_config, "get_text_config") else model_config
    types = getattr(text, "layer_types", None)
    if types is not None:
        return all(kind == "full_attention" for kind in types)
    return not (getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True))


class _SlotLayer(CacheLayerMixin):
    """One layer's keys and values, ``[slots, kv_heads, length, head_dim]``, allocated on first use."""

    is_compileable = True
    is_sliding = False

    def __init__(self, slots: int, length: int):
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None
        self.is_initialized = False
        self.slots, self.max_cache_len = slots, length

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        # The heads come from the first keys: under tensor parallelism a rank holds its share only.
        shape = (self.slots, key_states.shape[1], self.max_cache_len)
        self.keys = key_states.new_zeros((*shape, key_states.shape[-1]))
        self.values = value_states.new_zeros((*shape, value_states.shape[-1]))
        if not torch.compiler.is_compiling():
            # Fixed addresses: a CUDA graph replays reads and writes of these very tensors.
            torch._dynamo.mark_static_address(self.keys)
            torch._dynamo.mark_static_address(self.values)
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):  # pragma: no cover - SlotCache.update writes
        raise NotImplementedError("SlotCache writes its layers itself")

    def get_mask_sizes(self, *args, **kwargs) -> tuple[int, int]:
        return self.max_cache_len, 0

    def get_seq_length(self, *args, **kwargs) -> int:
        return 0  # positions are always passed per row; nothing reads this

    def get_max_length(self) -> int:
        return self.max_cache_len

    def get_max_cache_shape(self) -> int:
        return self.max_cache_len

    def reset(self) -> None:
        if self.is_initialized:
            self.keys.zero_()
            self.values.zero_()

    def nbytes(self) -> int:
        if not self.is_initialized:
            return 0
        return sum(t.numel() * t.element_size() for t in (self.keys, self.values))


class SlotCache(Cache):
    """Keys and values of ``slots`` sequences in a ring of ``length`` columns (module docstring).

    Args:
        num_layers: Decoder layers of the model.
        slots: Rows (the widest batch the decode step runs).
        length: Columns of the ring: at least the longest prompt plus the new tokens.
        device: Where the write column lives (the model's device).
    """

    def __init__(self, num_layers: int, slots: int, length: int, device: torch.device):
        layers = [_SlotLayer(slots, length) for _ in range(num_layers)]
        try:
            super().__init__(layers=layers)
        except TypeError:  # pragma: no cover - transformers whose Cache takes no layers
            super().__init__()
            self.layers = layers
        self.slots, self.length = slots, length
        self.width = slots  # rows the decode step runs (narrowed while the last rows drain)
        self.column = torch.zeros(1, dtype=torch.long, device=device)  # where a decode step writes
        if not torch.compiler.is_compiling():
            torch._dynamo.mark_static_address(self.column)
        self._fill: tuple[torch.Tensor, torch.Tensor] | None = None

    # ------------------------------------------------------------------ the model's interface
    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        """Write this step's keys and values; return what attention reads.

        While filling, ``key_states`` is ``[R, H, P, D]`` for the refilled rows: it is written into
        their rows and returned as is (a prompt attends to itself only). While decoding it is
        ``[width, H, 1, D]``, written at :attr:`column`, and the whole ring is returned.
        """
        layer = self.layers[layer_idx]
        if not layer.is_initialized:
            layer.lazy_initialization(key_states, value_states)
        if self._fill is not None:
            rows, cols = self._fill  # [R], [P]
            index = (rows[:, None], slice(None), cols[None, :])
            layer.keys[index] = key_states.transpose(1, 2)  # [R, P, H, D]
            layer.values[index] = value_states.transpose(1, 2)
            return key_states, value_states
        width = key_states.shape[0]  # from the input's shape: one graph can serve every width
        keys, values = layer.keys[:width], layer.values[:width]  # [W, H, L, D]
        keys.index_copy_(2, self.column, key_states)
        values.index_copy_(2, self.column, value_states)
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return 0

    def get_mask_sizes(self, *args, **kwargs) -> tuple[int, int]:
        return self.length, 0

    def get_max_cache_shape(self, layer_idx: int = 0) -> int:
        return self.length

    @property
    def is_compileable(self) -> bool:
        return True

    # ------------------------------------------------------------------ the loop's interface
    @contextmanager
    def filling(self, rows: torch.Tensor, cols: torch.Tensor):
        """Within this block the model's forward writes a prefill into ``rows`` at ``cols``."""
        self._fill = (rows, cols)
        try:
            yield
        finally:
            self._fill = None

    def compact(self, keep: torch.Tensor) -> None:
        """Move the rows ``keep`` (ascending) to the front: row ``keep[i]`` becomes row ``i``."""
        count = keep.numel()
        for layer in self.layers:
            if layer.is_initialized:
                layer.keys[:count] = layer.keys.index_select(0, keep)
                layer.values[:count] = layer.values.index_select(0, keep)

    def reset(self) -> None:
        """Zero every row (a kept cache reused by the next call)."""
        for layer in self.layers:
            layer.reset()
        self.width = self.slots

    def nbytes(self) -> int:
        """Device bytes of the keys and values."""
        return sum(layer.nbytes() for layer in self.layers)


def fill_inputs(
    prompts: list[list[int]], pad_id: int, clock: int, length: int, dtype: torch.dtype, device: torch.device
) -> dict[str, torch.Tensor]:
    """Inputs of one prefill of ``prompts`` into the ring just behind column ``clock``.

    The prompts are left-padded to the widest, ``P`` tokens; position ``j`` goes to ring column
    ``(clock - P + j) % length``, so each prompt ends right behind ``clock`` (its padding lands in
    columns its row never shows).

    Returns:
        ``input_ids`` and ``position_ids`` ``[R, P]``, the additive ``attention_mask``
        ``[R, 1, P, P]`` (causal, padding hidden), ``cols`` ``[P]`` and the rows' decode-mask
        rows ``row_mask`` ``[R, length]`` (0 on the prompt's columns, the dtype's minimum elsewhere).
    """
    rows, width = len(prompts), max(len(p) for p in prompts)
    ids = torch.full((rows, width), pad_id, dtype=torch.long)  # [R, P]
    valid = torch.zeros((rows, width), dtype=torch.bool)  # [R, P]
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        valid[row, width - len(prompt) :] = True
    positions = (valid.long().cumsum(-1) - 1).clamp(min=0)  # [R, P]
    causal = torch.ones((width, width), dtype=torch.bool).tril()  # [P, P]
    # A padding query sees itself only, so no softmax row is empty (its output is never read).
    seen = causal & (valid[:, None, :] | torch.eye(width, dtype=torch.bool))  # [R, P, P]
    low = torch.finfo(dtype).min
    mask = torch.zeros((rows, 1, width, width), dtype=dtype).masked_fill(~seen[:, None], low)  # [R, 1, P, P]
    cols = (clock - width + torch.arange(width)) % length  # [P]
    row_mask = torch.full((rows, length + 1), low, dtype=dtype)  # [R, L+1]: the last column takes the padding
    row_mask.scatter_(1, torch.where(valid, cols, length), 0.0)
    return {
        "input_ids": ids.to(device),
        "position_ids": positions.to(device),
        "attention_mask": mask.to(device),
        "cols": cols.to(device),
        "row_mask": row_mask[:, :length].to(device),
    }
