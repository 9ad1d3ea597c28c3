"""A RewardBench-style evaluation of the demo judge on synthetic pairs of the demo task.

Each example is a question of the demo task with a chosen response (its right answer, written in
one of the formats a policy might use) and a rejected one (a wrong answer, hard negatives
included: off by one, the reference with a digit added, an operand). The demo judge is a
consistency judge: it needs the reference, which a RewardBench request does not carry apart. So
the evaluation uses RewardBench's ``rating`` protocol with ratings 0 and 1 and a template derived
at run time from the demo's judge prompt (the built-in ``consistency_compact``), whose ``{question}`` field takes the
question together with the reference: the request the judge sees is then, token for token, the
prompt the environment would build for that answer. The chosen response wins when it is rated 1
and the rejected one 0; equal ratings score 0.5, as RewardBench counts ties.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import yaml

from nemo_genrm.config import PromptConfig, VerdictConfig
from nemo_genrm.demo.judge import DEMO_TEMPLATE
from nemo_genrm.demo.task import judge_example
from nemo_genrm.evals.reward_bench.data import RewardBenchExample
from nemo_genrm.guard.injection import NONCE_ALPHABET, NONCE_LENGTH, fence
from nemo_genrm.prompts import PromptBuilder, load_template, template_labels_from_config
from nemo_genrm.tasks.digit_addition import all_questions

__all__ = ["DEMO_SUBSET", "RATING_NONCE", "demo_pairwise_examples", "demo_rating_config", "demo_rating_template"]

DEMO_SUBSET = "math-prm"
"""The RewardBench subset the pairs are filed under (RewardBench's own maths subset)."""
_RATING_TEMPLATE = "demo_consistency_rating.yaml"
RATING_NONCE = NONCE_ALPHABET[-1] * NONCE_LENGTH
"""The fence nonce written into the rating template (a RewardBench request has no per-prompt one)."""


def _joiner() -> tuple[str, str, str | None]:
    """The consistency template's user text, what lies between question and reference, the system text."""
    template = load_template(DEMO_TEMPLATE, labels=template_labels_from_config(VerdictConfig()))
    user = template.user
    start, end = user.index("{question}") + len("{question}"), user.index("{reference}")
    return user, user[start:end], template.system


def demo_rating_template(folder: str | Path) -> Path:
    """Write the rating template derived from the demo's judge prompt into ``folder``.

    ``{question}`` and ``{reference}`` with the text between them become one ``{question}``
    (see :func:`demo_pairwise_examples`), and ``{candidate}`` becomes ``{response}`` inside the
    fence the environment puts around a candidate, with :data:`RATING_NONCE`.

    Returns:
        The template file's path.
    """
    user, joiner, system = _joiner()
    rating_user = user.replace("{question}" + joiner + "{reference}", "{question}").replace(
        "{candidate}", fence("{response}", RATING_NONCE).text
    )
    path = Path(folder) / _RATING_TEMPLATE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"system": system, "user": rating_user}, allow_unicode=True), encoding="utf-8")
    return path


def demo_pairwise_examples(n: int = 100, seed: int = 0) -> list[RewardBenchExample]:
    """``n`` pairs (right answer chosen, wrong answer rejected) in RewardBench's schema.

    Responses are drawn as the judge's training cases are (:func:`~nemo_genrm.demo.task.judge_example`),
    then cut with the environment's extractor, since a RewardBench request carries the response
    as it is. Responses the extractor finds nothing in, or that hold judge-format text (which
    the environment defangs with the verdict's labels and markers, and a rating request with
    neither), are drawn again, so both paths show the judge the same text.

    Args:
        n: Number of pairs.
        seed: Seeds the questions and responses (use another seed than the judge's training).

    Returns:
        The examples, all in :data:`DEMO_SUBSET`, ids ``0 .. n-1``.
    """
    rng = random.Random(seed)
    builder = PromptBuilder(PromptConfig(template=DEMO_TEMPLATE), VerdictConfig())
    _, joiner, _ = _joiner()
    questions = all_questions()
    examples = []
    for i in range(n):
        question = rng.choice(questions)
        drawn: dict[bool, str] = {}
        while len(drawn) < 2:
            case = judge_example(rng, question)
            extracted = builder.extract(case.response)
            # The environment's prompt shows the response as build() defuses it; a rating request
            # shows it as written, so only responses the defence leaves alone show both the same.
            plain = extracted.ok and builder.neutralise_candidate(extracted.text) == extracted.text
            if plain and case.label not in drawn:
                drawn[case.label] = extracted.text
        examples.append(
            RewardBenchExample(
                id=i,
                subset=DEMO_SUBSET,
                prompt=question[0] + joiner + question[1],
                chosen=drawn[True],
                rejected=drawn[False],
            )
        )
    return examples


def demo_rating_config(judge_dir: str | Path, output_dir: str | Path) -> dict[str, Any]:
    """A ``RewardBenchConfig`` mapping that rates with the demo judge through the dtensor engine.

    Args:
        judge_dir: The demo judge's folder.
        output_dir: Where the evaluation writes (the rating template goes there too).
    """
    return {
        "judge": {
            "backend": "dtensor",
            "model_name": str(judge_dir),
            "precision": "float32",
            "max_model_len": 1024,
            "sampling": {"max_new_tokens": 4},
            "batching": {"max_batch_size": 64},
        },
        "resources": {"gpus_per_replica": 0},
        "protocol": "rating",
        "prompt": {"template": str(demo_rating_template(output_dir))},
        "verdict": {"parser": "rating", "rating_min": 0, "rating_max": 1},
        "output_dir": str(output_dir),
    }
