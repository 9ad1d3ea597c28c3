"""A NeMo-RL data processor that hands the judge the raw question.

NeMo-RL's math processors put only ``ground_truth`` into ``extra_env_info`` and store the policy's
chat-templated prompt (prompt file included) as the user message. :func:`genrm_math_data_processor`
runs NeMo-RL's own processor for the row and adds ``extra_env_info["question"]``: the problem as
the dataset wrote it, which the GenRM environment shows the judge instead of the user message.
Name it in ``data.default.processor`` after :func:`nemo_genrm.integrations.nemo_rl.register`.
"""

from __future__ import annotations

from typing import Any

PROCESSOR_NAME = "genrm_math_data_processor"
"""The name :func:`nemo_genrm.integrations.nemo_rl.register` registers the processor under."""


def _raw_question(datum_dict: dict[str, Any]) -> tuple[str, str]:
    """(question, which NeMo-RL processor reads this row shape)."""
    if "messages" in datum_dict:  # OpenMathInstruct-2 style: [user, assistant]
        return str(datum_dict["messages"][0]["content"]), "math_hf_data_processor"
    return str(datum_dict["problem"]), "math_data_processor"


def genrm_math_data_processor(
    datum_dict: dict[str, Any],
    task_data_spec: Any,
    tokenizer: Any,
    max_seq_length: int,
    idx: int,
) -> dict[str, Any]:
    """NeMo-RL's math processor for the row, plus the raw question in ``extra_env_info``.

    Rows with ``messages`` go through ``math_hf_data_processor``, rows with ``problem`` and
    ``expected_answer`` through ``math_data_processor``; both are NeMo-RL's own.

    Args:
        datum_dict: One dataset row.
        task_data_spec: NeMo-RL's ``TaskDataSpec`` (prompt file, system prompt).
        tokenizer: The policy's tokenizer.
        max_seq_length: NeMo-RL's ``data.max_input_seq_length``.
        idx: The row's index.

    Returns:
        NeMo-RL's ``DatumSpec`` with ``extra_env_info = {"ground_truth": ..., "question": ...}``.
    """
    from nemo_rl.data import processors

    question, processor_name = _raw_question(datum_dict)
    datum = getattr(processors, processor_name)(datum_dict, task_data_spec, tokenizer, max_seq_length, idx)
    datum["extra_env_info"] = {**(datum.get("extra_env_info") or {}), "question": question}
    return datum


def register_processor(name: str = PROCESSOR_NAME) -> str:
    """Put :func:`genrm_math_data_processor` into NeMo-RL's ``PROCESSOR_REGISTRY``; idempotent.

    Args:
        name: The name for ``data.*.processor``.

    Returns:
        ``name``.

    Raises:
        ValueError: ``name`` is taken by another processor.
    """
    from nemo_rl.data.processors import PROCESSOR_REGISTRY
    from nemo_rl.data.processors import register_processor as nemo_rl_register

    current = PROCESSOR_REGISTRY.get(name)
    if current is None:
        nemo_rl_register(name, genrm_math_data_processor)
    elif current is not genrm_math_data_processor:
        raise ValueError(f"NeMo-RL processor name {name!r} is already registered for {current!r}")
    return name
