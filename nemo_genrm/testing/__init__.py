"""Tiny tokenizers, models and fixed-verdict judges, built offline for tests and demos.

Everything here is built locally in well under a second (after imports) and needs no model hub:

- :func:`build_tiny_tokenizer`: byte-level BPE with ChatML special tokens and chat template;
- :func:`build_tiny_model`: a tiny Qwen2 or Llama causal LM with seeded random weights;
- :func:`build_fixed_verdict_judge`: a tiny judge whose weights make it answer a fixed text;
- :func:`cached_tiny_tokenizer`, :func:`cached_tiny_model`, :func:`cached_tiny_judge`: the
  same, built once into a cache folder and reused (:func:`cached_artifact` for other builders,
  such as the trained demo models of :mod:`nemo_genrm.demo`).

Stand-in judges (import them from their modules), each a known function of what it is shown:

- :mod:`~nemo_genrm.testing.stand_in_base`: ``GenerateOnlyJudge``, the base of an in-process
  stand-in that only writes replies;
- :mod:`~nemo_genrm.testing.tagged_value_judges`: ``RuleJudge`` and its rules, reading tagged
  values (``ans-<n>``, ``kw:<word>``) in the prompt, for the reward modes;
- :mod:`~nemo_genrm.testing.tagged_value_workers`: the same rules as an engine worker
  (``RuleWorker``) for the real replica pool on Ray;
- :mod:`~nemo_genrm.testing.integrity_judges`: the reward-integrity judges, which read the whole
  responses shown (working, criteria) or honour their seed, and ``StandInServer``, an
  OpenAI-compatible server that answers by such a rule;
- :mod:`~nemo_genrm.testing.gullible` and :mod:`~nemo_genrm.testing.literal`: the red team's
  judges, which obey injected verdicts or read answers literally.

And :mod:`~nemo_genrm.testing.slow_client`: ``trickled_head``, a client that sends a request head
a header at a time and never finishes it, for the serve edge's header timeout.
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
