"""Where ``--engine nemo_rl`` takes its questions from: NeMo-RL's ``data.train`` or this package's keys.

NeMo-RL's own data section (``data.train``, ``data.validation``, ``data.default``) is loaded by
NeMo-RL's ``setup_response_data``; this module only decides which section gives the data
(:func:`uses_nemo_rl_data`: never both) and finds the prompt files NeMo-RL's configs name
relative to its checkout. This package's keys (``dataset_name``, ``train_data_path``, ...) become
NeMo-RL datasets here (:func:`build_datasets`), each sample carrying ``question`` and
``ground_truth`` as ``extra_env_info``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

from nemo_genrm.config import ConfigError
from nemo_genrm.grpo.config import DataConfig
from nemo_genrm.grpo.data import PolicyPromptRenderer, QAExample

logger = logging.getLogger(__name__)

TASK_NAME = "genrm"
"""The task (and env) name of this package's samples under NeMo-RL."""


def nemo_rl_root() -> Path | None:
    """The folder holding the installed ``nemo_rl`` package: a NeMo-RL checkout's root, where
    its ``examples/configs`` and ``examples/prompts`` are (``None`` without NeMo-RL)."""
    spec = importlib.util.find_spec("nemo_rl")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve().parents[1]


def uses_nemo_rl_data(data: dict[str, Any], source: str) -> bool:
    """Whether NeMo-RL's ``data.train`` gives the questions (else this package's ``data`` keys).

    Raises:
        ConfigError: Both name training data: the engine would have to drop one of them.
    """
    ours = sorted(k for k in data if k in DataConfig.model_fields and k != "shuffle")
    nemo_rl = data.get("train") is not None
    if nemo_rl and ours:
        keys = ", ".join(f"data.{k}" for k in ours)
        raise ConfigError(
            [
                f"data.train ({describe_train(data['train'])}, NeMo-RL's datasets) and {keys} (this package's) "
                "both say what to train on, and --engine nemo_rl uses one: remove "
                f"{keys} to train on data.train, or set data.train: null (override: data.train=null) to "
                f"train on {keys}"
            ],
            source=source,
        )
    return nemo_rl


def as_nemo_rl_train(data: DataConfig) -> dict[str, Any]:
    """NeMo-RL's ``data.train`` entry saying what this package's keys train on.

    NeMo-RL's ``MasterConfig`` needs a ``data.train``; with this package's keys it records their
    source (the datasets themselves are built by :func:`build_datasets`, not by NeMo-RL).
    """
    source = {"data_path": data.train_data_path} if data.train_data_path else {"dataset_name": data.dataset_name}
    return {**source, "input_key": data.input_key, "output_key": data.output_key, "env_name": TASK_NAME}


def describe_train(train: Any) -> str:
    """The dataset names (or paths) of NeMo-RL's ``data.train``, for messages and logs."""
    entries = train if isinstance(train, list) else [train]
    names = [str(e.get("dataset_name") or e.get("data_path")) for e in entries if isinstance(e, dict)]
    return ", ".join(names) or "set"


def find_nemo_rl_prompt_files(data: dict[str, Any]) -> None:
    """Prompt files NeMo-RL's configs name relative to its checkout (``examples/prompts/cot.txt``),
    found there when they are not under the working directory; resolved in place."""
    root = nemo_rl_root()
    entries = [data.get("default"), *_as_list(data.get("train")), *_as_list(data.get("validation"))]
    for entry in (e for e in entries if isinstance(e, dict)):
        for key in ("prompt_file", "system_prompt_file"):
            value = entry.get(key)
            if not isinstance(value, str) or os.path.isabs(value) or os.path.exists(value) or root is None:
                continue
            if (root / value).is_file():
                entry[key] = str(root / value)
                logger.info("--engine nemo_rl: %s %r read from the NeMo-RL checkout: %s", key, value, entry[key])


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _process(datum: dict[str, Any], task_spec: Any, tokenizer: Any, max_seq_length: int, idx: int) -> dict[str, Any]:
    """A NeMo-RL data processor for rows rendered by :func:`_rows` (prompt already templated).

    Raises:
        ValueError: The prompt is longer than ``max_seq_length`` (:func:`_rows` drops those).
    """
    ids = tokenizer(datum["text"], return_tensors="pt", add_special_tokens=False)["input_ids"][0]  # [P]
    if len(ids) > max_seq_length:
        raise ValueError(f"prompt {idx} has {len(ids)} tokens, over max_input_seq_length {max_seq_length}")
    return {
        "message_log": [{"role": "user", "content": datum["text"], "token_ids": ids}],
        "length": len(ids),
        "extra_env_info": {"question": datum["question"], "ground_truth": datum["answer"]},
        "loss_multiplier": 1.0,
        "idx": idx,
        "task_name": TASK_NAME,
    }


def _rows(examples: list[QAExample], builder: PolicyPromptRenderer, max_len: int) -> list[dict[str, str]]:
    """Render each example; prompts over ``max_len`` tokens are dropped here (and counted in a
    warning), as the built-in driver does, so no sample reaches NeMo-RL shortened or masked."""
    return [
        {"text": p.text, "question": p.question, "answer": p.ground_truth, "task_name": TASK_NAME}
        for p in builder.render_all(examples, max_len, "data.max_input_seq_length")
    ]


def build_datasets(
    data: DataConfig, train: list[QAExample], val: list[QAExample], max_len: int, tokenizer: Any
) -> tuple[Any, Any]:
    """NeMo-RL datasets (train, validation or ``None``) of this package's examples, each prompt
    rendered with the policy's chat template (``data.prompt``) and routed to the GenRM env.

    Raises:
        ConfigError: Every prompt is longer than ``max_len`` tokens.
    """
    import datasets
    from nemo_rl.data.datasets import AllTaskProcessedDataset
    from nemo_rl.data.interfaces import TaskDataSpec

    spec = TaskDataSpec(task_name=TASK_NAME)
    processors = {TASK_NAME: (spec, _process)}
    builder = PolicyPromptRenderer(data, tokenizer)

    def build(examples: list[QAExample]) -> Any:
        rows = _rows(examples, builder, max_len)
        if not rows:
            raise ConfigError([f"every prompt is longer than data.max_input_seq_length ({max_len}) tokens"])
        return AllTaskProcessedDataset(
            datasets.Dataset.from_list(rows), tokenizer, spec, processors, max_seq_length=max_len
        )

    return build(train), (build(val) if val else None)
