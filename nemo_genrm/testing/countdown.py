"""A causal LM that stops after a chosen number of tokens: a prompt's last token says how many.

For benchmarks and tests of decoding loops on replies of known, very different lengths (reasoning
judges: most stop in a few hundred tokens, some run to thousands). The network is a real
transformers decoder: every layer runs and every key is cached, so a step costs what the shape
costs. Its weights are set so greedy decoding counts down:

- the token ids ``first_id .. first_id + max_tokens - 1`` are the countdown tokens ``c_1 ..
  c_M``; greedily, ``c_n`` is followed by ``c_(n-1)``, ..., ``c_1``, then EOS: a prompt that ends
  with ``c_n`` (:func:`countdown_token`) gets a reply of exactly ``n`` tokens, EOS included;
- every attention output and MLP down projection is zero, so each block adds nothing and the
  residual stream at a position is the embedding of the token there (a bigram model, whatever
  the context, padding or engine);
- the countdown tokens keep random embeddings (nearly orthogonal in any width of 64 or more), and
  the output row of each token's successor is that token's normalised embedding times
  :data:`COUNTDOWN_LOGIT` / ``sqrt(hidden)``: after the final RMSNorm the successor's logit is
  :data:`COUNTDOWN_LOGIT`, every other chain token's a small fraction of it, every other token's 0.

:func:`wire_countdown` rewires any loaded decoder (a random model at a real model's shapes, for a
GPU benchmark); :func:`build_countdown_model` saves a tiny one with the tiny tokenizer (its ids
past the tokenizer's vocabulary decode to nothing).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import torch

COUNTDOWN_LOGIT = 30.0
FIRST_ID = 3
"""The first countdown token of the tiny model (ids 0-2 are the tiny tokenizer's special tokens)."""


def countdown_token(n: int, first_id: int = FIRST_ID) -> int:
    """The token that makes the model reply with exactly ``n`` tokens (``n >= 1``, EOS included)."""
    if n < 1:
        raise ValueError(f"a reply has at least one token (its EOS), got {n}")
    return first_id + n - 1


@torch.no_grad()
def wire_countdown(model: torch.nn.Module, *, first_id: int, max_tokens: int, eos_id: int, seed: int = 0) -> None:
    """Set ``model``'s weights so a prompt ending in :func:`countdown_token` ``(n)`` gets ``n`` tokens.

    Args:
        model: A transformers decoder with RMSNorm, ``o_proj`` and ``down_proj`` per layer (a
            head tied to the embeddings is given weights of its own).
        first_id: Id of the countdown token ``c_1``.
        max_tokens: Longest reply: ids ``first_id .. first_id + max_tokens - 1`` count down.
        eos_id: The EOS the countdown ends with (outside the countdown ids).
        seed: Seeds the countdown tokens' embeddings.

    Raises:
        ValueError: The ids do not fit the vocabulary, or EOS is one of them.
    """
    embed = model.get_input_embeddings().weight  # [V, H]
    ids = range(first_id, first_id + max_tokens)
    if ids.stop > embed.shape[0] or eos_id in ids:
        raise ValueError(
            f"countdown ids {ids.start}..{ids.stop - 1} need a vocabulary of {ids.stop} (have {embed.shape[0]}) "
            f"and an EOS outside them (got {eos_id})"
        )
    output = model.get_output_embeddings()
    if output.weight.data_ptr() == embed.data_ptr():  # tied (Qwen2.5-1.5B is): the head gets its own
        output.weight = torch.nn.Parameter(embed.detach().clone(), requires_grad=False)
        model.config.tie_word_embeddings = False
    head = output.weight  # [V, H]
    for layer in model.model.layers:
        for proj in (layer.self_attn.o_proj, layer.mlp.down_proj):
            proj.weight.zero_()  # blocks add nothing: the residual is the token embedding
            if proj.bias is not None:
                proj.bias.zero_()
    model.model.norm.weight.fill_(1.0)
    hidden = embed.shape[1]
    generator = torch.Generator().manual_seed(seed)
    chain = torch.randn(max_tokens, hidden, generator=generator)  # [M, H]
    chain = chain / chain.norm(dim=-1, keepdim=True)
    embed[first_id : first_id + max_tokens] = (chain * math.sqrt(hidden)).to(embed.dtype)
    head.zero_()
    # RMSNorm maps the embedding e (norm sqrt(H)) to itself; the successor's row . e = COUNTDOWN_LOGIT.
    rows = chain * (COUNTDOWN_LOGIT / math.sqrt(hidden))  # [M, H]
    head[first_id : first_id + max_tokens - 1] = rows[1:].to(head.dtype)  # c_n -> c_(n-1)
    head[eos_id] = rows[0].to(head.dtype)  # c_1 -> EOS


def build_countdown_model(path: str | os.PathLike, *, max_tokens: int = 2048, **spec: Any) -> Path:
    """Build and save a tiny countdown model (see the module docstring) with the tiny tokenizer.

    Args:
        path: Folder to write into (created if missing).
        max_tokens: Longest reply; the vocabulary grows to hold the countdown tokens.
        **spec: Fields of :class:`~nemo_genrm.testing.models.TinyModelSpec` (``hidden_size``,
            ``num_layers``, ``max_position_embeddings``...).

    Returns:
        ``path`` as a ``Path``.
    """
    from transformers import AutoModelForCausalLM

    from nemo_genrm.testing.models import TinyModelSpec, _hf_config, _save, _seeded_init_
    from nemo_genrm.testing.tokenizer import EOS_TOKEN, PAD_TOKEN, VOCAB_MULTIPLE, make_tiny_tokenizer

    model_spec = TinyModelSpec(**spec)
    tokenizer = make_tiny_tokenizer(model_spec.max_position_embeddings)
    vocab = max(len(tokenizer), -(-(FIRST_ID + max_tokens) // VOCAB_MULTIPLE) * VOCAB_MULTIPLE)
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    config = _hf_config(model_spec, vocab_size=vocab, eos_id=eos_id, pad_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN))
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    _seeded_init_(model, model_spec.seed)
    wire_countdown(model.eval(), first_id=FIRST_ID, max_tokens=max_tokens, eos_id=eos_id, seed=model_spec.seed)
    return _save(model, model_spec, path)
