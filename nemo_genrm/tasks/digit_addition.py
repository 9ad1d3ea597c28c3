"""The digit-addition task: its questions, its fixed held-out split and its exact-match checker.

Questions are ``What is a + b?`` for digits ``a`` and ``b`` whose sum is a digit too (55
questions, answers 0-9, one token each). A fixed, seeded quarter of them is held out from GRPO
training (:func:`demo_splits`). The checker (:func:`exact_match`) is what a run measures apart
from the judge: the judge never sees it. This is the default run's (the demo's) task; the GRPO
driver and the demo both read it here, so neither imports the other for it.
"""

from __future__ import annotations

import random

from nemo_genrm.prompts import extract_answer

__all__ = ["DEMO_DATASET", "all_questions", "demo_splits", "exact_match"]

DEMO_DATASET = "digit_addition"
"""``data.dataset_name`` of the task."""
_HELD_OUT_FRACTION = 0.25
_SPLIT_SEED = 1234


def all_questions() -> list[tuple[str, str]]:
    """Every ``(question, answer)`` of the task, in a fixed order."""
    return [(f"What is {a} + {b}?", str(a + b)) for a in range(10) for b in range(10 - a)]


def demo_splits() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The GRPO training questions and the held-out ones (a fixed, seeded quarter).

    Returns:
        ``(train, held_out)`` lists of ``(question, answer)``.
    """
    questions = all_questions()
    random.Random(_SPLIT_SEED).shuffle(questions)
    n_held = int(len(questions) * _HELD_OUT_FRACTION)
    return questions[n_held:], questions[:n_held]


def exact_match(response: str, reference: str) -> bool:
    """The checker a run measures apart from the judge: the stated final value is the reference.

    The final value is found as the judge's extractor finds it (``Answer:`` line, ``\\boxed{}``,
    else a bare last line) and must be exactly the reference digits, nothing else; a response
    that hedges (several distinct final values, ``8 or 9``) or withdraws its answer matches nothing.
    """
    answer = extract_answer(response, reference=reference)
    return answer.ok and answer.value is not None and answer.value.rstrip(".") == reference
