"""Tiny tokenizers, models and fixed-verdict judges, built offline for tests and demos.

Everything here is built locally in well under a second (after imports) and needs no model hub:

- :func:`build_tiny_tokenizer`: byte-level BPE with ChatML special tokens and chat template;
- :func:`build_tiny_model`: a tiny Qwen2 or Llama causal LM with seeded random weights;
- :func:`build_fixed_verdict_judge`: a tiny judge whose weights make it answer a fixed text;
- :func:`cached_tiny_tokenizer`, :func:`cached_tiny_model`, :func:`cached_tiny_judge`: the
  same, built once into a cache folder and reused (:func:`cached_artifact` for other builders,
  such as the trained demo models of :mod:`nemo_genrm.demo`).
"""

from nemo_genrm.testing.cache import (
    BUILDER_VERSION,
    CACHE_ENV_VAR,
    cached_artifact,
    cached_tiny_judge,
    cached_tiny_model,
    cached_tiny_tokenizer,
    default_cache_dir,
)
from nemo_genrm.testing.models import (
    CHAIN_LOGIT,
    TinyModelSpec,
    build_fixed_verdict_judge,
    build_tiny_model,
    fixed_verdict_token_ids,
    new_tiny_model,
    save_tiny_model,
)
from nemo_genrm.testing.tokenizer import (
    CHAT_TEMPLATE,
    EOS_TOKEN,
    IM_START_TOKEN,
    JUDGE_TOKENS,
    PAD_TOKEN,
    build_tiny_tokenizer,
    make_tiny_tokenizer,
)

__all__ = [
    "BUILDER_VERSION",
    "CACHE_ENV_VAR",
    "CHAIN_LOGIT",
    "CHAT_TEMPLATE",
    "EOS_TOKEN",
    "IM_START_TOKEN",
    "JUDGE_TOKENS",
    "PAD_TOKEN",
    "TinyModelSpec",
    "build_fixed_verdict_judge",
    "build_tiny_model",
    "build_tiny_tokenizer",
    "cached_artifact",
    "cached_tiny_judge",
    "cached_tiny_model",
    "cached_tiny_tokenizer",
    "default_cache_dir",
    "fixed_verdict_token_ids",
    "make_tiny_tokenizer",
    "new_tiny_model",
    "save_tiny_model",
]
