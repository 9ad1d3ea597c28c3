"""RewardBench 2 (``protocol: best_of_4``), judged as reward-bench's ``run_generative_v2.py`` does.

Data: ``allenai/reward-bench-2`` (split ``test``) or a local JSONL/JSON/Parquet copy with
columns ``id``, ``subset``, ``prompt``, ``chosen`` and ``rejected`` (lists of texts) and
``num_correct`` (defaults to the number of chosen texts).

Every subset but Ties: one request shows the first chosen response and three rejected ones as
A-D. They start in that order and the chosen one is swapped with position ``k``: with
``placement: seeded`` ``k`` is drawn from a hash of ``seed`` and the id, with
``placement: reference_random`` from ``numpy.random.randint(0, 4)`` as the reference does.
Scores: 1, 0, or 0.25 without a verdict (see :mod:`.v2_scores`).

Ties: every response is rated alone (the reference's ``ratings_prompt_ties`` under the preset,
else the project's rating prompt); an unread rating is -1 and enters the subset's statistics,
as in the reference.

With ``prompt.preset: rewardbench`` the prompts come from the installed package's
``generative_v2.py`` and replies are read as the reference reads them (the first of ``[[A]]``..
``[[D]]`` anywhere in the reply). Without it the project's four-way prompt asks for one marker,
and a reply is read after its last ``</think>`` and must hold exactly one marker.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nemo_genrm.config import RewardBenchConfig
from nemo_genrm.evals.reward_bench.data import HUB_HINT, RewardBenchDataError, select
from nemo_genrm.evals.reward_bench.evaluator import JudgeReply, RewardBenchEvaluator
from nemo_genrm.evals.reward_bench.judge_requests import RequestPlan
from nemo_genrm.evals.reward_bench.preset import load_rewardbench2_preset, reference_choice_of, reference_rating
from nemo_genrm.evals.reward_bench.scores import ExampleScore, RewardBenchScores, SubsetScore, subset_score
from nemo_genrm.evals.reward_bench.v2_scores import (
    LETTERS,
    TIES,
    UNREAD_RATING,
    V2_SUBSETS,
    arrangement,
    best_of_4_score,
    overall_score,
    ties_score,
)
from nemo_genrm.files.rows import read_hub_rows, read_rows
from nemo_genrm.judges.base import JudgeRequest
from nemo_genrm.judges.fitting import PROMPT_TOO_LONG
from nemo_genrm.prompts import JudgeTemplate, defuse_tokens, load_template
from nemo_genrm.verdicts import VerdictParser, strip_think
from nemo_genrm.verdicts.voting import majority

logger = logging.getLogger(__name__)

MARKERS = tuple(f"[[{letter}]]" for letter in LETTERS)
FOUR_WAY = JudgeTemplate(
    name="best_of_4",
    system=(
        "You are a careful evaluator. Read a user's request and four candidate responses, and "
        "decide which single response serves the user best: correct, complete and on point."
    ),
    user=(
        "## Request\n{question}\n\n## Response A\n{response_a}\n\n## Response B\n{response_b}\n\n"
        "## Response C\n{response_c}\n\n## Response D\n{response_d}\n\n"
        "Answer with the marker of the best response only: [[A]], [[B]], [[C]] or [[D]]."
    ),
)


@dataclass(frozen=True)
class RewardBench2Example:
    """One RewardBench 2 example: one prompt, several chosen and rejected responses."""

    id: Any
    subset: str
    prompt: str
    chosen: tuple[str, ...]
    rejected: tuple[str, ...]
    num_correct: int

    @property
    def key(self) -> str:
        """The id as text."""
        return str(self.id)


def rows_to_v2_examples(rows: Sequence[Mapping[str, Any]], source: str = "data") -> list[RewardBench2Example]:
    """Validate RewardBench 2 rows.

    Raises:
        RewardBenchDataError: Listing every bad row (missing column, texts that are not lists of
            text, fewer than three rejected responses outside Ties, a repeated id).
    """
    problems, examples, seen = [], [], set()
    for index, row in enumerate(rows):
        where = f"{source}: row {index} (id {row.get('id')!r})"
        missing = [c for c in ("id", "subset", "prompt", "chosen", "rejected") if row.get(c) is None]
        if missing:
            problems.append(f"{where}: missing column(s) {', '.join(missing)}")
            continue
        lists = {c: row[c] for c in ("chosen", "rejected")}
        bad = [c for c, v in lists.items() if isinstance(v, str) or not all(isinstance(t, str) for t in v)]
        if bad:
            problems.append(f"{where}: {', '.join(bad)} must be lists of texts")
            continue
        if row["subset"] != TIES and (len(lists["chosen"]) < 1 or len(lists["rejected"]) < 3):
            problems.append(f"{where}: best-of-4 needs a chosen and three rejected responses")
            continue
        if str(row["id"]) in seen:
            problems.append(f"{where}: id used twice")
            continue
        seen.add(str(row["id"]))
        num_correct = int(row["num_correct"]) if row.get("num_correct") is not None else len(lists["chosen"])
        examples.append(
            RewardBench2Example(
                row["id"],
                row["subset"],
                str(row["prompt"]),
                tuple(lists["chosen"]),
                tuple(lists["rejected"]),
                num_correct,
            )
        )
    if problems:
        raise RewardBenchDataError("\n".join([f"{len(problems)} bad RewardBench 2 row(s)", *problems[:20]]))
    return examples


def load_v2_examples(cfg: RewardBenchConfig) -> list[RewardBench2Example]:
    """The RewardBench 2 examples ``cfg.data`` names (local file first, else the hub)."""
    data = cfg.data
    if data.path:
        rows, source = read_rows(data.path, error=RewardBenchDataError), str(data.path)
    else:
        rows = read_hub_rows(data.hf_name, data.split, hint=HUB_HINT, error=RewardBenchDataError)  # type: ignore[arg-type]
        source = f"{data.hf_name}[{data.split}]"
    return select(rows_to_v2_examples(rows, source), data.subsets, data.limit)  # type: ignore[arg-type]


def chosen_position(seed: int, example_id: object) -> int:
    """The seeded position (0-3) the chosen response is swapped to."""
    return hashlib.sha256(f"{seed}\x1f{example_id}".encode()).digest()[0] % len(LETTERS)


class RewardBench2Evaluator(RewardBenchEvaluator):
    """Judges RewardBench 2 examples and writes results as :class:`RewardBenchEvaluator` does.

    Args:
        cfg: The evaluation config (``protocol: best_of_4``).
    """

    def __init__(self, cfg: RewardBenchConfig) -> None:
        self.cfg = cfg
        self.output_dir = Path(cfg.output_dir)
        self.requests_per_example = len(LETTERS)  # Ties examples send one request per response
        self.preset = None
        self.v2_preset = load_rewardbench2_preset() if cfg.prompt.preset == "rewardbench" else None
        if self.v2_preset is not None:
            self.four_way, self.ties_template = self.v2_preset.four_way, self.v2_preset.ties
        else:
            self.four_way = FOUR_WAY
            self.ties_template = load_template("rating", provided_fields=("question", "response"))
        self.rating_parser = VerdictParser(parser="rating", rating_min=1, rating_max=10)
        self.neutralise = cfg.prompt.neutralise and self.v2_preset is None

    def _text(self, text: str) -> str:
        return defuse_tokens(text, markers=MARKERS) if self.neutralise else text

    def plan(self, example: RewardBench2Example) -> RequestPlan:  # type: ignore[override]
        """Ties: one rating request per response; otherwise one four-way request."""
        if example.subset == TIES:
            requests = [self._rating_request(example.prompt, r) for r in (*example.chosen, *example.rejected)]
            return RequestPlan(None, requests)
        if self.cfg.placement == "reference_random":
            position = int(np.random.randint(0, len(LETTERS)))
        else:
            position = chosen_position(self.cfg.seed, example.key)
        shown = [self._text(t) for t in arrangement(example.chosen[0], example.rejected, position)]
        answers = {f"answer_{c}": t for c, t in zip("abcd", shown, strict=True)}
        responses = {f"response_{c}": t for c, t in zip("abcd", shown, strict=True)}
        messages = self.four_way.render(question=example.prompt, **answers, **responses)
        return RequestPlan(LETTERS[position], [JudgeRequest(messages=tuple(messages))])

    def _rating_request(self, prompt: str, response: str) -> JudgeRequest:
        text = self._text(response)
        messages = self.ties_template.render(prompt=prompt, completion=text, question=prompt, response=text)
        return JudgeRequest(messages=tuple(messages))

    def _choice(self, reply: JudgeReply) -> str | None:
        if self.v2_preset is not None:
            return reference_choice_of(reply.text, MARKERS)
        body = strip_think(reply.text) if reply.text is not None else None
        found = {letter for letter, marker in zip(LETTERS, MARKERS, strict=True) if body and marker in body}
        return found.pop() if len(found) == 1 else None

    def _rating(self, reply: JudgeReply) -> int:
        if reply.text is None:
            return UNREAD_RATING
        rating = (
            reference_rating(reply.text) if self.v2_preset is not None else self.rating_parser.parse(reply.text).value
        )
        return UNREAD_RATING if rating is None else int(rating)

    def record_for(self, example, plan, ballots) -> dict[str, Any]:  # type: ignore[override]
        """The per-example record: a four-way verdict and score, or the Ties ratings."""
        replies = [r for ballot in ballots for r in ballot]
        head = {
            "id": example.id,
            "subset": example.subset,
            "protocol": "best_of_4",
            "skipped": any(r.error == PROMPT_TOO_LONG for r in replies),
            "shortened": None,
            "judge_error": next((r.error for r in replies if r.error is not None), None),
        }
        if example.subset == TIES:
            ratings = [self._rating(ballot[0]) for ballot in ballots]
            return {
                **head,
                "placement": None,
                "score": None,
                "ratings": ratings,
                "num_correct": example.num_correct,
                "error": UNREAD_RATING in ratings,
                "output": [b[0].output for b in ballots],
            }
        votes = [self._choice(r) for r in ballots[0]]
        result = majority(votes, ties=self.cfg.ties)
        record = {
            **head,
            "placement": plan.placement,
            "verdict": result.verdict,
            "score": best_of_4_score(result.verdict, LETTERS.index(plan.placement)),
            "error": result.verdict is None,
            "output": [r.output for r in ballots[0]],
        }
        if len(votes) > 1:
            record.update(votes=votes, agreement=result.agreement)
        return record

    def _scores(self, records: Sequence[dict[str, Any]]) -> RewardBenchScores:
        """Per-subset scores (Ties by the reference's formula) and their mean as ``Score``."""
        by_subset: dict[str, list[ExampleScore]] = {}
        for r in records:
            if r["subset"] != TIES:
                by_subset.setdefault(r["subset"], []).append(ExampleScore.from_record(r))
        order = [s for s in V2_SUBSETS if s in by_subset] + sorted(s for s in by_subset if s not in V2_SUBSETS)
        subsets = {s: subset_score(by_subset[s]) for s in order}
        ties = [r for r in records if r["subset"] == TIES]
        if ties:
            kept = [r for r in ties if not r["skipped"]]
            value = ties_score([(r["id"], r["ratings"], r["num_correct"]) for r in kept]) if kept else None
            subsets[TIES] = SubsetScore(
                n=len(kept), accuracy=value, errors=sum(r["error"] for r in kept), skipped=len(ties) - len(kept)
            )
        scored = {k: v.accuracy for k, v in subsets.items() if v.accuracy is not None}
        return RewardBenchScores(subsets=subsets, sections={}, score=overall_score(scored))

    def _details(self, scores: RewardBenchScores, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
        prompt = self.v2_preset.describe() if self.v2_preset else {"template": self.four_way.name, "preset": None}
        positions = {letter: sum(r["placement"] == letter for r in records) for letter in LETTERS}
        return {
            **scores.details(),
            "benchmark": "RewardBench 2",
            "protocol": "best_of_4",
            "seed": self.cfg.seed,
            "placement": self.cfg.placement,
            "chosen_positions": positions,
            "prompt": prompt,
            "judge_errors": sum(r["judge_error"] not in (None, PROMPT_TOO_LONG) for r in records),
        }


def evaluator_for(cfg: RewardBenchConfig) -> RewardBenchEvaluator:
    """The evaluator of the config's protocol (RewardBench 2 for ``best_of_4``)."""
    return RewardBench2Evaluator(cfg) if cfg.protocol == "best_of_4" else RewardBenchEvaluator(cfg)


def examples_for(cfg: RewardBenchConfig) -> list:
    """The examples of the config's benchmark (see :func:`load_v2_examples`, ``load_examples``)."""
    from nemo_genrm.evals.reward_bench.data import load_examples

    return load_v2_examples(cfg) if cfg.protocol == "best_of_4" else load_examples(cfg.data)
