"""Tiny causal LMs (Qwen2 or Llama architecture) and fixed-verdict judges, built offline.

Two builders, both writing a folder that ``AutoModelForCausalLM.from_pretrained`` and vLLM
load (safetensors weights, ``config.json``, ``generation_config.json`` whose EOS is
``<|im_end|>``, and the tiny tokenizer from :mod:`nemo_genrm.testing.tokenizer`):

- :func:`build_tiny_model`: random weights drawn from one seeded generator, so the same
  arguments give the same weights bit for bit;
- :func:`build_fixed_verdict_judge`: the same network with weights set so that greedy decoding
  of any chat prompt yields a chosen text and then EOS.

How the fixed judge works. Every attention output projection and MLP down projection is zero,
so each block adds nothing and the residual stream at a position is just the embedding of the
token there: the network becomes a bigram model, whatever the prompt length, padding or
engine. The tokens ``t1..tn`` of the text each get their own basis direction ``e_i`` as
embedding; every other token (EOS, padding, the prompt's closing newline, ...) shares ``e_0``.
The final RMSNorm keeps a basis vector's direction (it only rescales it to norm ``sqrt(H)``),
and the untied ``lm_head`` is zero on those coordinates except one entry per step: the row of
``t1`` reads ``e_0``, the row of ``t(i+1)`` reads ``e_i`` and the row of EOS reads ``e_n``,
each giving a logit of :data:`CHAIN_LOGIT` against 0 for every other token. Hence:
any token outside the text -> ``t1`` -> ... -> ``tn`` -> EOS, with probability
``1 / (1 + (V - 1) * exp(-CHAIN_LOGIT))`` (about ``1 - 7e-11``) at every step.

Limits: the tokens of the text must be distinct, not special, and not the newline token that
ends the ChatML generation prompt (otherwise the prompt's last token would already be inside the
chain), and the text may have at most ``hidden_size - 1`` tokens. A prompt whose last token is
one of the text's tokens continues the chain from there instead of starting it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from nemo_genrm.dtypes import DTYPES
from nemo_genrm.testing.tokenizer import (
    EOS_TOKEN,
    PAD_TOKEN,
    build_tiny_tokenizer,
    make_tiny_tokenizer,
)

logger = logging.getLogger(__name__)

Arch = Literal["qwen2", "llama"]
ARCHS: tuple[str, ...] = ("qwen2", "llama")
MIN_HEAD_DIM = 32  # vLLM's attention kernels reject smaller heads
CHAIN_LOGIT = 30.0
# Random logits get this standard deviation, so greedy decoding of the random model has
# clear winners and engines that differ by rounding still agree on the argmax most of the time.
_RANDOM_LOGIT_STD = 3.0
_BIAS_STD = 0.02


@dataclass(frozen=True)
class TinyModelSpec:
    """Architecture and size of a tiny model; validated on creation.

    The defaults give a head size of 32 and two query and two key/value heads, so tensor
    parallelism of 2 (transformers ``tp_plan="auto"`` or vLLM) splits the heads evenly.

    Attributes:
        arch: ``"qwen2"`` (biases on q/k/v) or ``"llama"`` (no biases).
        hidden_size: Model width; also caps a fixed judge's text at ``hidden_size - 1`` tokens.
        num_layers: Number of decoder blocks.
        num_heads: Query heads; ``hidden_size / num_heads`` must be at least 32.
        num_kv_heads: Key/value heads; must divide ``num_heads``.
        intermediate_size: MLP width.
        max_position_embeddings: Longest sequence the rotary embedding is configured for.
        seed: Seed of the generator that draws every weight.
        dtype: Dtype of the saved weights (``float32``, ``bfloat16`` or ``float16``).
    """

    arch: Arch = "qwen2"
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    num_kv_heads: int = 2
    intermediate_size: int = 128
    max_position_embeddings: int = 4096
    seed: int = 0
    dtype: str = "float32"

    def __post_init__(self) -> None:
        problems = []
        if self.arch not in ARCHS:
            problems.append(f"arch={self.arch!r} is not one of {list(ARCHS)}")
        for name in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size"):
            if getattr(self, name) < 1:
                problems.append(f"{name}={getattr(self, name)} must be at least 1")
        if self.dtype not in DTYPES:
            problems.append(f"dtype={self.dtype!r} is not one of {list(DTYPES)}")
        if not problems:
            if self.hidden_size % self.num_heads:
                problems.append(f"hidden_size={self.hidden_size} is not divisible by num_heads={self.num_heads}")
            elif self.hidden_size // self.num_heads < MIN_HEAD_DIM:
                problems.append(
                    f"head size {self.hidden_size // self.num_heads} is below {MIN_HEAD_DIM} "
                    "(vLLM rejects it); raise hidden_size or lower num_heads"
                )
            if self.num_heads % self.num_kv_heads:
                problems.append(f"num_heads={self.num_heads} is not divisible by num_kv_heads={self.num_kv_heads}")
        if problems:
            raise ValueError("Invalid tiny model spec: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        """All fields, defaults included, as a plain dict (used as the cache key)."""
        return dataclasses.asdict(self)


def build_tiny_model(path: str | os.PathLike, **spec: Any) -> Path:
    """Build a tiny randomly initialised causal LM with its tokenizer and save it to ``path``.

    Weights are drawn from a ``torch.Generator`` seeded with ``seed``, parameter by parameter
    in name order: embeddings N(0, 1), linear layers N(0, 1/fan_in), biases N(0, 0.02), norms 1,
    and ``lm_head`` scaled so the logits have a standard deviation of about 3.

    Args:
        path: Folder to write into (created if missing).
        **spec: Fields of :class:`TinyModelSpec` (``arch``, ``hidden_size``, ``num_layers``,
            ``num_heads``, ``num_kv_heads``, ``intermediate_size``, ``max_position_embeddings``,
            ``seed``, ``dtype``); the same fields give bit-identical weights.

    Returns:
        ``path`` as a ``Path``.

    Raises:
        ValueError: If the sizes are inconsistent or the head size is below 32.
    """
    model_spec = TinyModelSpec(**spec)
    model = _new_model(model_spec, make_tiny_tokenizer(model_spec.max_position_embeddings))
    return _save(model, model_spec, path)


def build_fixed_verdict_judge(path: str | os.PathLike, text: str, **spec: Any) -> Path:
    """Build a tiny judge that greedily answers ``text`` then EOS for any chat prompt.

    The behaviour lives in the weights (see the module docstring), so every engine that loads
    the checkpoint reproduces it; at the end of a generation prompt the probability of the
    text's first token is about ``1 - 7e-11``.

    Args:
        path: Folder to write into (created if missing).
        text: What the judge answers, e.g. ``"1"``, ``"[[A]]"`` or ``"Judgement: 1"``. May be
            empty (the judge then answers EOS at once).
        **spec: Fields of :class:`TinyModelSpec` (``arch``, ``hidden_size``, ``seed``, ...).

    Returns:
        ``path`` as a ``Path``.

    Raises:
        ValueError: If the text cannot be a chain (a repeated token, a special token, the
            newline token, or more than ``hidden_size - 1`` tokens), or the spec is invalid.
    """
    model_spec = TinyModelSpec(**spec)
    tokenizer = make_tiny_tokenizer(model_spec.max_position_embeddings)
    text_ids = fixed_verdict_token_ids(tokenizer, text, max_tokens=model_spec.hidden_size - 1)
    model = _new_model(model_spec, tokenizer)
    _wire_chain(model, text_ids, eos_id=tokenizer.convert_tokens_to_ids(EOS_TOKEN))
    logger.debug("Fixed-verdict judge %r uses token ids %s", text, text_ids)
    return _save(model, model_spec, path)


def fixed_verdict_token_ids(tokenizer, text: str, *, max_tokens: int) -> list[int]:
    """Token ids of ``text``, checked to form a chain a fixed-verdict judge can follow.

    Args:
        tokenizer: The tiny tokenizer (a ``transformers`` tokenizer with its chat template).
        text: The judge's answer.
        max_tokens: Longest chain the model width allows (``hidden_size - 1``).

    Returns:
        The ids of ``text`` without special tokens added.

    Raises:
        ValueError: If a token repeats, a token is special, a token is the one that ends the
            generation prompt, the text has more than ``max_tokens`` tokens, or it does not
            decode back to itself.
    """
    ids = tokenizer.encode(text, add_special_tokens=False)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    prompt_end = _generation_prompt_last_id(tokenizer)
    problems = []
    repeated = sorted({t for t in tokens if tokens.count(t) > 1})
    if repeated:
        problems.append(f"tokens {repeated} occur more than once (the chain needs distinct tokens)")
    special_ids = {i for i, added in tokenizer.added_tokens_decoder.items() if added.special}
    special = sorted({t for t, i in zip(tokens, ids, strict=True) if i in special_ids})
    if special:
        problems.append(f"special tokens {special} cannot be generated as text")
    if prompt_end in ids:
        problems.append(
            f"the token {tokenizer.decode([prompt_end])!r} ends every generation prompt, so the text may not contain it"
        )
    if len(ids) > max_tokens:
        problems.append(f"{len(ids)} tokens exceed the limit of {max_tokens} (hidden_size - 1)")
    if tokenizer.decode(ids) != text:
        problems.append("the text does not decode back to itself")
    if problems:
        raise ValueError(f"Cannot build a fixed-verdict judge for {text!r}: " + "; ".join(problems))
    return ids


def new_tiny_model(spec: TinyModelSpec, tokenizer) -> torch.nn.Module:
    """An unsaved float32 model of ``spec`` with the seeded weights of :func:`build_tiny_model`.

    For builders that train the model further (the demo's judge and policy) before saving it
    with :func:`save_tiny_model`.
    """
    return _new_model(spec, tokenizer)


def save_tiny_model(model: torch.nn.Module, spec: TinyModelSpec, path: str | os.PathLike) -> Path:
    """Save ``model`` as :func:`build_tiny_model` saves its models (weights, configs, tokenizer)."""
    return _save(model, spec, path)


def _generation_prompt_last_id(tokenizer) -> int:
    """The token that ends every ChatML prompt built with ``add_generation_prompt=True``."""
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
        )
        for content in ("a", "Question: 2 + 2?\n")
    ]
    last = {tokenizer.encode(p, add_special_tokens=False)[-1] for p in prompts}
    if len(last) != 1:
        raise RuntimeError(f"Generation prompts end with different tokens {sorted(last)}")
    return last.pop()


def _hf_config(spec: TinyModelSpec, vocab_size: int, eos_id: int, pad_id: int):
    """The transformers config of ``spec``."""
    from transformers import LlamaConfig, Qwen2Config

    config_cls = Qwen2Config if spec.arch == "qwen2" else LlamaConfig
    return config_cls(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_position_embeddings,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )


def _new_model(spec: TinyModelSpec, tokenizer):
    """A float32 model of ``spec`` with seeded weights (see :func:`build_tiny_model`)."""
    from transformers import AutoModelForCausalLM

    config = _hf_config(
        spec,
        vocab_size=len(tokenizer),
        eos_id=tokenizer.convert_tokens_to_ids(EOS_TOKEN),
        pad_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
    )
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    _seeded_init_(model, spec.seed)
    return model.eval()


@torch.no_grad()
def _seeded_init_(model: torch.nn.Module, seed: int) -> None:
    """Overwrite every parameter from one generator, visiting parameters in name order."""
    gen = torch.Generator().manual_seed(seed)
    hidden = model.config.hidden_size
    for name, param in sorted(model.named_parameters()):
        if name.endswith("norm.weight"):
            param.fill_(1.0)
        elif name.endswith(".bias"):
            param.normal_(0.0, _BIAS_STD, generator=gen)
        elif "embed_tokens" in name:
            param.normal_(0.0, 1.0, generator=gen)
        elif name.startswith("lm_head"):
            # Normed hidden states have unit RMS, so a row std of s gives logits of std s*sqrt(H).
            param.normal_(0.0, _RANDOM_LOGIT_STD / math.sqrt(hidden), generator=gen)
        else:
            param.normal_(0.0, 1.0 / math.sqrt(param.shape[-1]), generator=gen)


@torch.no_grad()
def _wire_chain(model: torch.nn.Module, text_ids: list[int], eos_id: int) -> None:
    """Set weights so any token outside ``text_ids`` -> text_ids[0] -> ... -> EOS (greedy)."""
    for layer in model.model.layers:
        for proj in (layer.self_attn.o_proj, layer.mlp.down_proj):
            proj.weight.zero_()  # blocks add nothing: the residual is the token embedding
            if proj.bias is not None:
                proj.bias.zero_()
    model.model.norm.weight.fill_(1.0)
    embed = model.get_input_embeddings().weight  # [V, H]
    head = model.get_output_embeddings().weight  # [V, H]
    hidden = embed.shape[1]
    n_coords = len(text_ids) + 1  # e_0 for "outside the text", e_i for text_ids[i - 1]
    embed.zero_()
    embed[:, 0] = 1.0  # every token starts the chain ...
    for i, tok in enumerate(text_ids, start=1):
        embed[tok, 0] = 0.0  # ... except the text's own tokens, which continue it
        embed[tok, i] = 1.0
    # RMSNorm maps a unit basis vector to sqrt(H) times itself (eps is negligible).
    head[:, :n_coords] = 0.0
    successors = [*text_ids, eos_id]
    for coord, nxt in enumerate(successors):
        head[nxt, coord] = CHAIN_LOGIT / math.sqrt(hidden)


def _save(model, spec: TinyModelSpec, path: str | os.PathLike) -> Path:
    """Save weights (safetensors), configs and tokenizer of a tiny model into ``path``."""
    from transformers import GenerationConfig

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model = model.to(DTYPES[spec.dtype])
    model.generation_config = GenerationConfig(
        bos_token_id=None,
        eos_token_id=model.config.eos_token_id,
        pad_token_id=model.config.pad_token_id,
    )
    model.save_pretrained(str(path))
    build_tiny_tokenizer(path, model_max_length=spec.max_position_embeddings)
    logger.debug("Saved tiny %s model (%s) to %s", spec.arch, spec.to_dict(), path)
    return path
