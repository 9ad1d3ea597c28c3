"""Shared pieces of the tests that drive NeMo-RL's real code (imported only where it is usable)."""

from __future__ import annotations

from typing import Any

GENRM_TASK = "genrm"
MATH_TASK = "math"
QUESTION = "What is 6 times 7?"


def genrm_cfg(judge_path: str) -> dict[str, Any]:
    """``env.genrm`` for a tiny CPU judge: one replica, no GPU."""
    return {
        "judge": {"model_name": judge_path, "precision": "float32", "max_model_len": 1024},
        "resources": {"num_replicas": 1, "gpus_per_replica": 0, "cpus_per_replica": 1.0},
    }


def rows(n: int, task: str, question: str = QUESTION, answer: str = "42") -> list[dict[str, Any]]:
    """OpenMathInstruct-2 shaped rows, the shape NeMo-RL's ``math_hf_data_processor`` reads."""
    return [
        {
            "messages": [{"role": "user", "content": f"{question} (#{i})"}, {"role": "assistant", "content": answer}],
            "task_name": task,
        }
        for i in range(n)
    ]


def nemo_rl_batch(tokenizer: Any, data: list[dict[str, Any]]) -> Any:
    """A batch built as NeMo-RL builds one: processed dataset, then its ``rl_collate_fn``.

    GenRM rows go through ``genrm_math_data_processor``, math rows through NeMo-RL's own
    ``math_hf_data_processor``, each picked by the row's ``task_name``.
    """
    import datasets
    from nemo_rl.data.collate_fn import rl_collate_fn
    from nemo_rl.data.datasets import AllTaskProcessedDataset
    from nemo_rl.data.interfaces import TaskDataSpec
    from nemo_rl.data.processors import PROCESSOR_REGISTRY

    from nemo_genrm.integrations.nemo_rl_processor import PROCESSOR_NAME

    processors = {
        GENRM_TASK: (TaskDataSpec(task_name=GENRM_TASK), PROCESSOR_REGISTRY[PROCESSOR_NAME]),
        MATH_TASK: (TaskDataSpec(task_name=MATH_TASK), PROCESSOR_REGISTRY["math_hf_data_processor"]),
    }
    dataset = AllTaskProcessedDataset(
        datasets.Dataset.from_list(data),
        tokenizer,
        TaskDataSpec(task_name=GENRM_TASK),
        processors,
        max_seq_length=512,
    )
    return rl_collate_fn([dataset[i] for i in range(len(dataset))])
