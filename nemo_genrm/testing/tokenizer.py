"""A tiny byte-level BPE tokenizer with a ChatML chat template, built offline in milliseconds.

The tokenizer is trained with the ``tokenizers`` library on the small embedded corpus in
:mod:`nemo_genrm.testing._corpus`, so it needs no download and is identical on every run (the
BPE trainer breaks ties deterministically; a test builds it twice and compares the files).

Layout of the vocabulary:

- ids 0, 1, 2: the special tokens ``<|endoftext|>`` (padding), ``<|im_start|>`` and
  ``<|im_end|>`` (end of a turn, the EOS the models stop on);
- the 256 byte-level symbols, so any UTF-8 text can be encoded and decoded exactly;
- the learned merges;
- :data:`JUDGE_TOKENS` (``[[A]]``, ``[[B]]``, ``Judgement:``) as ordinary (non-special) added
  tokens, so they survive ``skip_special_tokens`` and are one token each;
- reserved special tokens that pad the size to a multiple of :data:`VOCAB_MULTIPLE`, so the
  vocabulary (and the model's embedding rows) split evenly under tensor parallelism and every id
  the model can emit decodes to a real token.

Digits are always split one per token (a ``Digits`` pre-tokenizer runs before the byte-level
one), as in the Qwen tokenizers: ``"10"`` is ``["1", "0"]`` and ``" 1"`` is ``["Ġ", "1"]``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from nemo_genrm.testing._corpus import CORPUS

logger = logging.getLogger(__name__)

PAD_TOKEN = "<|endoftext|>"
IM_START_TOKEN = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, IM_START_TOKEN, EOS_TOKEN)
JUDGE_TOKENS = ("[[A]]", "[[B]]", "Judgement:")
VOCAB_MULTIPLE = 64
# Size asked of the BPE trainer (bytes + specials + merges); the corpus supports about 970.
_BPE_VOCAB_SIZE = 704
_RESERVED_TEMPLATE = "<|reserved_{}|>"

# ChatML: every turn is "<|im_start|>{role}\n{content}<|im_end|>\n"; the generation prompt is
# "<|im_start|>assistant\n", so a prompt always ends with the same "\n" token whatever it holds.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)


def _train_bpe() -> Tokenizer:
    """Train the byte-level BPE core on the embedded corpus.

    Returns:
        A ``tokenizers.Tokenizer`` holding the special tokens, the byte alphabet and the merges.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_BPE_VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS.strip().splitlines(), trainer)
    return tok


def make_tiny_tokenizer(model_max_length: int = 4096):
    """Build the tiny tokenizer in memory.

    Args:
        model_max_length: The ``model_max_length`` recorded in the tokenizer config.

    Returns:
        A ``transformers`` fast tokenizer (``PreTrainedTokenizerFast``) with the chat template,
        ``eos_token="<|im_end|>"`` and ``pad_token="<|endoftext|>"``.
    """
    from transformers import PreTrainedTokenizerFast

    tok = _train_bpe()
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in JUDGE_TOKENS])
    n_reserved = -tok.get_vocab_size() % VOCAB_MULTIPLE
    tok.add_special_tokens([AddedToken(_RESERVED_TEMPLATE.format(i), special=True) for i in range(n_reserved)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=model_max_length,
        padding_side="left",
    )


def build_tiny_tokenizer(path: str | os.PathLike, *, model_max_length: int = 4096) -> Path:
    """Build the tiny tokenizer and save it so ``AutoTokenizer.from_pretrained(path)`` loads it.

    Writes ``tokenizer.json`` and a ``tokenizer_config.json`` that holds the chat template,
    the EOS and pad tokens and ``clean_up_tokenization_spaces=False`` (needed for
    ``decode(encode(x)) == x``). The padding side is left, as batched generation needs.

    Args:
        path: Folder to write into (created if missing).
        model_max_length: The ``model_max_length`` recorded in the tokenizer config.

    Returns:
        ``path`` as a ``Path``.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = make_tiny_tokenizer(model_max_length=model_max_length)
    tokenizer.save_pretrained(str(path), save_jinja_files=False)
    _make_config_portable(path / "tokenizer_config.json")
    logger.debug("Built tiny tokenizer (vocab %d) in %s", len(tokenizer), path)
    return path


def _make_config_portable(config_path: Path) -> None:
    """Name the generic fast-tokenizer class, which transformers 4.x and 5.x both resolve.

    transformers 5 records its own backend class name, which a 4.x install (for example the
    one a vLLM environment pins) cannot load.
    """
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
