"""Question/answer data for GRPO: files, hub datasets, a built-in arithmetic set or the demo's digit additions.

Each example is a raw question and its reference answer. The driver renders the question into
the policy's chat-templated prompt (as NeMo-RL does), while the raw question and the reference
reach the environment as metadata (``question``, ``ground_truth``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nemo_genrm.config import ConfigError
from nemo_genrm.files.rows import read_hub_rows, read_rows
from nemo_genrm.grpo.config import DataConfig
from nemo_genrm.tasks.digit_addition import DEMO_DATASET, demo_splits

logger = logging.getLogger(__name__)

__all__ = [
    "BUILTIN_DATASET",
    "DataSplits",
    "PolicyPromptRenderer",
    "Prompt",
    "PromptSampler",
    "QAExample",
    "builtin_arithmetic",
    "load_splits",
]

BUILTIN_DATASET = "arithmetic"
_HUB_HINT = "offline, use data.train_data_path with a local file or data.dataset_name: arithmetic"


@dataclass(frozen=True)
class QAExample:
    """One question and its reference answer."""

    question: str
    answer: str


@dataclass(frozen=True)
class Prompt:
    """A question rendered for the policy.

    Attributes:
        text: The chat-templated prompt the policy continues (generation prompt included).
        question: The raw question (sent to the environment as ``metadata["question"]``).
        ground_truth: The reference answer (``metadata["ground_truth"]``).
    """

    text: str
    question: str
    ground_truth: str

    @property
    def metadata(self) -> dict[str, str]:
        """What the environment receives for a sample of this prompt."""
        return {"question": self.question, "ground_truth": self.ground_truth}


@dataclass(frozen=True)
class DataSplits:
    """Training and validation examples."""

    train: list[QAExample]
    val: list[QAExample]


def builtin_arithmetic(num_examples: int, seed: int) -> list[QAExample]:
    """A small, deterministic set of one-operation arithmetic questions.

    Args:
        num_examples: How many distinct questions to make.
        seed: Seeds the operands.

    Returns:
        Examples such as ``("What is 17 + 25?", "42")``.
    """
    rng = random.Random(seed)
    seen: set[str] = set()
    examples = []
    while len(examples) < num_examples:
        a, b = rng.randint(2, 49), rng.randint(2, 49)
        op = rng.choice("+-*")
        if op == "-" and b > a:
            a, b = b, a
        question = f"What is {a} {op} {b}?"
        if question in seen:
            continue
        seen.add(question)
        value = a + b if op == "+" else a - b if op == "-" else a * b
        examples.append(QAExample(question=question, answer=str(value)))
    return examples


def _usable(value: Any) -> bool:
    return value is not None and str(value).strip() != ""


def _to_examples(records: Sequence[dict[str, Any]], cfg: DataConfig, source: str) -> list[QAExample]:
    """Examples from records; rows with a missing, null or empty question or answer are dropped.

    Raises:
        ConfigError: There are no records, neither key is in any record, or no row is usable.
    """
    if not records:
        raise ConfigError(f"{source}: no examples")
    keys = (cfg.input_key, cfg.output_key)
    missing = [k for k in keys if not any(k in r for r in records)]
    if missing:
        found = ", ".join(sorted({k for r in records for k in r}))
        raise ConfigError(
            f"{source}: field(s) {missing} not found; set data.input_key / data.output_key to one of: {found}"
        )
    examples = [
        QAExample(str(r[cfg.input_key]), str(r[cfg.output_key]))
        for r in records
        if _usable(r.get(cfg.input_key)) and _usable(r.get(cfg.output_key))
    ]
    dropped = len(records) - len(examples)
    if not examples:
        raise ConfigError(
            f"{source}: none of the {len(records)} rows has both a non-empty {cfg.input_key!r} and {cfg.output_key!r}"
        )
    if dropped:
        logger.warning(
            "%s: dropped %d of %d rows with a missing, null or empty %r or %r",
            source,
            dropped,
            len(records),
            cfg.input_key,
            cfg.output_key,
        )
    return examples


def load_splits(cfg: DataConfig, seed: int) -> DataSplits:
    """Load training and validation examples as the ``data`` section says.

    Args:
        cfg: The ``data`` section.
        seed: Seeds the built-in set and the held-out split.

    Returns:
        The two splits (validation may be empty when ``val_fraction`` is 0 and none is given).

    Raises:
        ConfigError: A file or field is missing, or a hub dataset cannot be loaded.
    """
    val: list[QAExample] | None = None
    if cfg.train_data_path:
        train = _to_examples(read_rows(cfg.train_data_path, setting="data.train_data_path"), cfg, cfg.train_data_path)
        if cfg.val_data_path:
            val = _to_examples(read_rows(cfg.val_data_path, setting="data.val_data_path"), cfg, cfg.val_data_path)
    elif cfg.dataset_name == BUILTIN_DATASET:
        train = builtin_arithmetic(cfg.num_builtin_examples, seed)
    elif cfg.dataset_name == DEMO_DATASET:
        # The demo's own held-out questions, the ones its policy was never rewarded on.
        train_pairs, held_out = demo_splits()
        train = [QAExample(q, a) for q, a in train_pairs]
        val = [QAExample(q, a) for q, a in held_out]
    else:
        train = _to_examples(read_hub_rows(cfg.dataset_name, cfg.train_split, hint=_HUB_HINT), cfg, cfg.dataset_name)
        if cfg.val_split:
            val = _to_examples(read_hub_rows(cfg.dataset_name, cfg.val_split, hint=_HUB_HINT), cfg, cfg.dataset_name)
    if val is None:
        shuffled = list(train)
        random.Random(seed).shuffle(shuffled)
        n_val = int(round(len(shuffled) * cfg.val_fraction))
        if cfg.val_fraction > 0:
            n_val = min(max(n_val, 1), len(shuffled) - 1)
        train, val = shuffled[n_val:], shuffled[:n_val]
    logger.info("Data: %d training and %d validation examples", len(train), len(val))
    return DataSplits(train=train, val=val)


class PolicyPromptRenderer:
    """Renders questions with the policy's chat template, as NeMo-RL's data processors do."""

    def __init__(self, cfg: DataConfig, tokenizer: Any):
        template = Path(cfg.prompt_file).read_text(encoding="utf-8") if cfg.prompt_file else cfg.prompt
        if "{}" not in template:
            raise ConfigError(f"data.prompt / data.prompt_file must contain '{{}}' for the question, got {template!r}")
        self._template = template
        self._system = cfg.system_prompt
        self._tokenizer = tokenizer

    def __call__(self, example: QAExample) -> Prompt:
        """Render one example."""
        messages = [] if self._system is None else [{"role": "system", "content": self._system}]
        messages.append({"role": "user", "content": self._template.replace("{}", example.question, 1)})
        text = self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return Prompt(text=text, question=example.question, ground_truth=example.answer)

    def _length(self, text: str) -> int:
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def render_all(
        self,
        examples: Sequence[QAExample],
        max_prompt_tokens: int,
        limit_name: str = "policy.max_total_sequence_length minus policy.generation.max_new_tokens",
    ) -> list[Prompt]:
        """Render every example and drop those whose prompt exceeds ``max_prompt_tokens``.

        Args:
            examples: The examples.
            max_prompt_tokens: The longest prompt kept, in tokens.
            limit_name: The config key(s) the limit comes from (named in the warning).

        Returns:
            The rendered prompts that fit, in order; a warning counts the dropped ones.
        """
        prompts = [self(e) for e in examples]
        kept = [p for p in prompts if self._length(p.text) <= max_prompt_tokens]
        if len(kept) < len(prompts):
            logger.warning(
                "Dropped %d of %d prompts longer than %d tokens (%s)",
                len(prompts) - len(kept),
                len(prompts),
                max_prompt_tokens,
                limit_name,
            )
        return kept


class PromptSampler:
    """Draws prompts epoch by epoch in a seeded order; its position is part of a checkpoint."""

    def __init__(self, prompts: Sequence[Prompt], *, seed: int, shuffle: bool, max_epochs: int):
        if not prompts:
            raise ConfigError("the training split is empty: provide more data or lower data.val_fraction")
        self._prompts = list(prompts)
        self._seed, self._shuffle, self._max_epochs = seed, shuffle, max_epochs
        self.epoch, self.position = 0, 0
        self._order = self._make_order()

    def _make_order(self) -> list[int]:
        order = list(range(len(self._prompts)))
        if self._shuffle:
            random.Random(self._seed + self.epoch).shuffle(order)
        return order

    def next_batch(self, size: int) -> list[Prompt] | None:
        """The next ``size`` prompts, or ``None`` once ``max_epochs`` passes are done."""
        batch = []
        while len(batch) < size:
            if self.position >= len(self._order):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._make_order()
            if self.epoch >= self._max_epochs:
                return None
            batch.append(self._prompts[self._order[self.position]])
            self.position += 1
        return batch

    def state_dict(self) -> dict[str, int]:
        """Where the sampler is (saved in checkpoints)."""
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from a saved position."""
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._make_order()
