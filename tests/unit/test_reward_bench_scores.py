"""RewardBench scoring, data loading, comparison and the evaluator's bookkeeping (no Ray, no models).

The evaluator tests here drive :class:`RewardBenchEvaluator` with an in-memory judge that
answers a fixed text, so the counting rules are checked without an engine; the same rules are
checked end to end through the real dtensor engine in tests/functional/test_reward_bench.py.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence

import pytest

from nemo_genrm.config import ConfigError, RewardBenchConfig, RewardBenchDataConfig
from nemo_genrm.evals.reward_bench.compare import ComparisonError, compare, load_reference, plot_comparison
from nemo_genrm.evals.reward_bench.data import (
    RewardBenchDataError,
    load_examples,
    rows_to_examples,
    select,
    write_examples,
)
from nemo_genrm.evals.reward_bench.evaluator import RewardBenchEvaluator
from nemo_genrm.evals.reward_bench.scores import (
    EXAMPLE_COUNTS,
    SUBSET_MAPPING,
    SUBSETS,
    ExampleScore,
    RewardBenchScores,
    chosen_at_a,
    pairwise_score,
    rating_score,
    section_scores,
)
from nemo_genrm.evals.reward_bench.synthetic import synthetic_examples
from nemo_genrm.judges.base import Generation
from nemo_genrm.testing.stand_ins import GenerateOnlyJudge


# ------------------------------------------------------------------------------ constants
def test_reference_constants() -> None:
    # 23 subsets in 4 sections; every subset has a weight; math-prm weighs as much as the
    # six HumanEvalPack subsets together (6 * 164 = 984).
    assert len(SUBSETS) == 23 and set(SUBSETS) == set(EXAMPLE_COUNTS)
    assert EXAMPLE_COUNTS["math-prm"] == sum(EXAMPLE_COUNTS[s] for s in SUBSET_MAPPING["Reasoning"][1:]) == 984


# --------------------------------------------------------------------------- per example
@pytest.mark.parametrize(
    ("choice", "placement", "expected"),
    [
        ("A", "chosen_a", 1.0),  # picked A, chosen was at A
        ("B", "chosen_a", 0.0),  # picked B, the rejected one
        ("B", "chosen_b", 1.0),  # picked B, chosen was at B
        ("A", "chosen_b", 0.0),  # picked A, the rejected one
        (None, "chosen_a", 0.5),  # no verdict: the reference's "effectively a tie"
        (None, "chosen_b", 0.5),  # ... whatever the placement (never 1 - x of a failure)
    ],
)
def test_pairwise_score(choice: str | None, placement: str, expected: float) -> None:
    assert pairwise_score(choice, placement) == expected


def test_pairwise_score_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="placement"):
        pairwise_score("A", "left")
    with pytest.raises(ValueError, match="choice"):
        pairwise_score("C", "chosen_a")


@pytest.mark.parametrize(
    ("chosen", "rejected", "expected"),
    [
        (8, 3, 1.0),  # chosen rated higher
        (3, 8, 0.0),  # rejected rated higher
        (7, 7, 0.5),  # tie
        (None, 3, 0.5),  # chosen unparseable
        (8, None, 0.5),  # rejected unparseable
        (None, None, 0.5),  # both unparseable
    ],
)
def test_rating_score(chosen: int | None, rejected: int | None, expected: float) -> None:
    assert rating_score(chosen, rejected) == expected


def test_placement_coin_is_reproducible_fair_and_seeded() -> None:
    ids = range(2000)
    seed0 = [chosen_at_a(0, i) for i in ids]
    assert seed0 == [chosen_at_a(0, i) for i in ids]  # same seed, same placement
    assert [chosen_at_a(0, str(i)) for i in ids] == seed0  # ids compare as text (resume from JSON)
    seed1 = [chosen_at_a(1, i) for i in ids]
    assert seed1 != seed0
    # Roughly fair and roughly independent across seeds (binomial sd of 2000 flips is ~22).
    assert 900 < sum(seed0) < 1100
    assert 900 < sum(a == b for a, b in zip(seed0, seed1, strict=True)) < 1100


# ------------------------------------------------------------------------------ sections
def test_section_weighting_by_hand() -> None:
    acc = {"alpacaeval-easy": 1.0, "mt-bench-easy": 0.5, "math-prm": 0.5, "hep-python": 1.0}
    sections = section_scores(acc)
    # Chat: (1.0 * 100 + 0.5 * 28) / (100 + 28) = 114 / 128 = 0.890625
    assert sections["Chat"] == pytest.approx(0.890625)
    # Reasoning: (0.5 * 984 + 1.0 * 164) / (984 + 164) = 656 / 1148 = 4 / 7 (math-prm up-weighted)
    assert sections["Reasoning"] == pytest.approx(4 / 7)
    # No Safety or Chat Hard subset present: left out (the reference would report 0).
    assert set(sections) == {"Chat", "Reasoning"}


def test_math_prm_is_half_of_reasoning() -> None:
    acc = {s: 1.0 for s in SUBSET_MAPPING["Reasoning"]} | {"math-prm": 0.0}
    # (0 * 984 + 6 * 164 * 1.0) / (984 + 6 * 164) = 984 / 1968 = 0.5
    assert section_scores(acc)["Reasoning"] == pytest.approx(0.5)


def test_scores_from_examples() -> None:
    examples = [
        ExampleScore(1, "alpacaeval-easy", 1.0),
        ExampleScore(2, "alpacaeval-easy", 0.5, error=True),
        ExampleScore(3, "refusals-dangerous", 0.0),
        ExampleScore(4, "refusals-dangerous", 1.0),
        ExampleScore(5, "refusals-dangerous", 0.5, tie=True),
    ]
    scores = RewardBenchScores.from_examples(examples)
    assert list(scores.subsets) == ["alpacaeval-easy", "refusals-dangerous"]  # reference order
    assert scores.subsets["alpacaeval-easy"].accuracy == 0.75  # (1 + 0.5) / 2
    assert scores.subsets["refusals-dangerous"].accuracy == 0.5  # (0 + 1 + 0.5) / 3
    assert (scores.errors, scores.ties, scores.num_examples) == (1, 1, 5)
    # One subset per section: the section equals the subset; Score = mean(0.75, 0.5).
    assert scores.sections == {"Chat": 0.75, "Safety": 0.5}
    assert scores.score == 0.625
    assert scores.flat()["Score"] == 0.625
    assert "alpacaeval-easy" in scores.table()
    with pytest.raises(ValueError, match="twice"):
        RewardBenchScores.from_examples(examples + [ExampleScore("1", "alpacaeval-easy", 1.0)])


def test_position_consistency_and_both_orders_accuracy() -> None:
    # Always-A judge in both orders: each example scores 1 in one order and 0 in the other.
    examples = [
        ExampleScore(i, "hep-go", float(i % 2), swapped_score=float(1 - i % 2), consistent=False) for i in range(4)
    ]
    sub = RewardBenchScores.from_examples(examples).subsets["hep-go"]
    assert sub.position_consistency == 0.0
    assert sub.accuracy_both_orders == 0.5


# ---------------------------------------------------------------------------------- data
def _rows() -> list[dict]:
    return [
        {"id": 7, "subset": "hep-go", "prompt": "p", "chosen": "c", "rejected": "r", "chosen_model": "x"},
        {"id": 8, "subset": "donotanswer", "prompt": "p2", "chosen": "c2", "rejected": "r2"},
    ]


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_load_local_file_formats(tmp_path, suffix: str) -> None:
    path = tmp_path / f"data{suffix}"
    if suffix == ".jsonl":
        path.write_text("\n".join(json.dumps(r) for r in _rows()) + "\n")
    elif suffix == ".json":
        path.write_text(json.dumps(_rows()))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(
            pa.Table.from_pylist([{k: v for k, v in r.items() if k != "chosen_model"} for r in _rows()]), path
        )
    examples = load_examples(RewardBenchDataConfig(path=str(path)))
    assert [(e.id, e.subset, e.chosen) for e in examples] == [(7, "hep-go", "c"), (8, "donotanswer", "c2")]


def test_load_column_oriented_json(tmp_path) -> None:
    path = tmp_path / "cols.json"
    path.write_text(json.dumps({k: [r[k] for r in _rows()] for k in ("id", "subset", "prompt", "chosen", "rejected")}))
    assert [e.id for e in load_examples(RewardBenchDataConfig(path=str(path)))] == [7, 8]


def test_bad_rows_name_row_and_column() -> None:
    rows = _rows() + [
        {"id": 9, "subset": "hep-go", "prompt": "p"},
        {"id": 7, "subset": "hep-go", "prompt": "p", "chosen": "c", "rejected": 3},
    ]
    with pytest.raises(RewardBenchDataError) as err:
        rows_to_examples(rows, "mine.jsonl")
    text = str(err.value)
    assert "row 2 (id 9): missing column 'chosen'" in text
    assert "row 2 (id 9): missing column 'rejected'" in text
    assert "row 3 (id 7): column 'rejected' must be text" in text


def test_duplicate_ids_rejected() -> None:
    with pytest.raises(RewardBenchDataError, match="already used by row 0"):
        rows_to_examples(_rows() + [_rows()[0]])


def test_subsets_filter_and_limit(tmp_path) -> None:
    examples = synthetic_examples(3)
    assert len(examples) == 3 * 23 and {e.subset for e in examples} == set(SUBSETS)
    kept = select(examples, ["hep-go", "math-prm"], limit=4)
    assert [e.subset for e in kept] == ["math-prm"] * 3 + ["hep-go"]  # file order, then the first 4
    with pytest.raises(ConfigError, match="nope not in the data"):
        select(examples, ["nope"])
    path = write_examples(tmp_path / "s.jsonl", examples)
    assert load_examples(RewardBenchDataConfig(path=str(path), limit=5)) == examples[:5]


def test_missing_file_and_bad_suffix(tmp_path) -> None:
    with pytest.raises(RewardBenchDataError, match="does not exist"):
        load_examples(RewardBenchDataConfig(path=str(tmp_path / "none.jsonl")))
    (tmp_path / "x.csv").write_text("a")
    with pytest.raises(RewardBenchDataError, match="must end in"):
        load_examples(RewardBenchDataConfig(path=str(tmp_path / "x.csv")))


# ---------------------------------------------------------------------------- comparison
def test_comparison_table_and_exit_code(tmp_path) -> None:
    ours = {"alpacaeval-easy": 0.90, "mt-bench-easy": 0.50, "hep-go": 0.80}
    ref_path = tmp_path / "ref.json"
    # reward-bench's own results shape: model fields and subsets at the top level.
    ref_path.write_text(
        json.dumps(
            {
                "model": "ref",
                "model_type": "Generative RM",
                "chat_template": None,
                "alpacaeval-easy": 0.91,
                "mt-bench-easy": 0.50,
                "hep-go": 0.80,
                "donotanswer": 0.4,
            }
        )
    )
    reference = load_reference(ref_path)
    within = compare(ours, reference, tolerance=0.02)
    assert within.ok and within.exit_code == 0
    names = [r.name for r in within.rows]
    assert names == ["alpacaeval-easy", "mt-bench-easy", "hep-go", "Chat", "Reasoning", "Score"]
    chat = next(r for r in within.rows if r.name == "Chat")
    # Chat from the common subsets: ours (0.90*100 + 0.50*28)/128 = 0.8125; ref (0.91*100 + 0.50*28)/128 = 0.8203125
    assert chat.ours == pytest.approx(0.8125) and chat.reference == pytest.approx(0.8203125)
    assert within.missing == ("donotanswer",)
    assert "-0.0100" in within.table() and "donotanswer" in within.table()
    beyond = compare(ours, reference, tolerance=0.005)
    assert not beyond.ok and beyond.exit_code == 1
    # Deltas: alpacaeval-easy -0.01, Chat -0.0078, Reasoning 0, Score (-0.0078 + 0) / 2 = -0.0039.
    assert [r.name for r in beyond.failures] == ["alpacaeval-easy", "Chat"]
    assert "!!" in beyond.table()
    png = plot_comparison(beyond, tmp_path / "cmp.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_comparison_errors(tmp_path) -> None:
    with pytest.raises(ComparisonError, match="does not exist"):
        load_reference(tmp_path / "none.json")
    (tmp_path / "r.json").write_text(json.dumps({"hep-go": 0.5}))
    with pytest.raises(ComparisonError, match="nothing to compare"):
        compare({"donotanswer": 0.5}, load_reference(tmp_path / "r.json"))


# ----------------------------------------------------------------- evaluator bookkeeping
class _TextJudge(GenerateOnlyJudge):
    """An in-memory judge that answers every request with the same text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = 0

    def generate(self, batch: Sequence) -> list[Generation]:
        self.calls += 1
        return [Generation(self.text) for _ in batch]


def _cfg(tmp_path, **over) -> RewardBenchConfig:
    data = {"judge": {"model_name": "fake"}, "output_dir": str(tmp_path / "out"), **over}
    return RewardBenchConfig.model_validate(data)


def test_unparseable_judge_scores_half_and_counts_errors(tmp_path) -> None:
    examples = synthetic_examples(1)
    outcome = RewardBenchEvaluator(_cfg(tmp_path)).run(examples, _TextJudge("maybe"))
    assert all(s.accuracy == 0.5 and s.errors == 1 for s in outcome.scores.subsets.values())
    assert outcome.summary["nemo_genrm"]["errors"] == len(examples)
    assert outcome.summary["Score"] == 0.5
    record = json.loads(outcome.examples_path.read_text().splitlines()[0])
    assert record["verdict"] is None and record["verdict_reason"] == "no_label" and record["output"] == "maybe"


def test_rating_ties_score_half(tmp_path) -> None:
    cfg = _cfg(tmp_path, protocol="rating", prompt={"template": "rating"}, verdict={"parser": "rating"})
    outcome = RewardBenchEvaluator(cfg).run(synthetic_examples(1), _TextJudge("7"))
    assert outcome.scores.ties == 23 and outcome.scores.errors == 0
    assert all(s.accuracy == 0.5 for s in outcome.scores.subsets.values())
    record = json.loads(outcome.examples_path.read_text().splitlines()[0])
    assert record["verdict"] == {"chosen": 7, "rejected": 7} and record["tie"] is True


def test_resume_refuses_other_settings(tmp_path) -> None:
    examples = synthetic_examples(1)[:3]
    RewardBenchEvaluator(_cfg(tmp_path, seed=0)).run(examples, _TextJudge("[[A]]"))
    with pytest.raises(ConfigError, match="different seed"):
        RewardBenchEvaluator(_cfg(tmp_path, seed=1)).run(examples, _TextJudge("[[A]]"))
    moved = [dataclasses.replace(ex, subset="donotanswer") for ex in examples]
    with pytest.raises(ConfigError, match="different data"):
        RewardBenchEvaluator(_cfg(tmp_path, seed=0)).run(moved, _TextJudge("[[A]]"))


def test_resume_with_torn_run_config_is_a_config_error(tmp_path) -> None:
    # A run config cut short (a kill mid-write, before writes were atomic) must give a clear
    # ConfigError naming the file, not a JSONDecodeError out of the evaluator.
    examples = synthetic_examples(1)[:3]
    outcome = RewardBenchEvaluator(_cfg(tmp_path)).run(examples, _TextJudge("[[A]]"))
    meta = next(p for p in outcome.examples_path.parent.iterdir() if p.suffix == ".json" and "config" in p.name)
    meta.write_text(meta.read_text()[:20])
    with pytest.raises(ConfigError, match="cannot be read"):
        RewardBenchEvaluator(_cfg(tmp_path)).run(examples, _TextJudge("[[A]]"))
    assert not list(outcome.examples_path.parent.glob(".*.tmp"))  # no temporary file left behind


def test_results_json_is_reference_shaped(tmp_path) -> None:
    outcome = RewardBenchEvaluator(_cfg(tmp_path)).run(synthetic_examples(2), _TextJudge("[[B]]"))
    data = json.loads(outcome.results_path.read_text())
    # reward-bench's keys only: the model (with an organisation), its type, the chat template and
    # one number per subset; sections and Score would be averaged with the subsets by its loader.
    assert set(data) == {"model", "model_type", "chat_template", *SUBSETS}
    assert data["model"] == "local/fake" and data["model_type"] == "Generative RM" and data["chat_template"] is None
    assert outcome.results_path.read_text() == json.dumps(data, indent=4, sort_keys=True)  # reward-bench's dump
    summary = json.loads(outcome.summary_path.read_text())
    assert {"Chat", "Chat Hard", "Safety", "Reasoning", "Score"} <= set(summary) and summary["model"] == "local/fake"
    placements = summary["nemo_genrm"]["placements"]
    # Always-B judge: correct exactly where chosen sat at B.
    assert math.isclose(sum(data[s] * 2 for s in SUBSETS), placements["chosen_b"])


class _FailingJudge(_TextJudge):
    """Every call fails in the engine (a transient error, not a bad reply)."""

    def generate(self, batch: Sequence) -> list[Generation]:
        self.calls += 1
        return [Generation(None, error="http_timeout") for _ in batch]


def test_resume_rejudges_engine_errors_not_parse_errors(tmp_path) -> None:
    examples = synthetic_examples(1)
    failed = RewardBenchEvaluator(_cfg(tmp_path)).run(examples, _FailingJudge("unused"))
    assert failed.summary["nemo_genrm"]["judge_errors"] == len(examples)
    again = RewardBenchEvaluator(_cfg(tmp_path)).run(examples, _TextJudge("[[A]]"))
    assert again.judged == len(examples) and again.resumed == 0
    assert again.summary["nemo_genrm"]["judge_errors"] == 0 and again.scores.errors == 0
    # An unparseable reply is a final answer: a further resume leaves it alone.
    other = tmp_path / "other"
    RewardBenchEvaluator(_cfg(other)).run(examples, _TextJudge("maybe"))
    judge = _TextJudge("[[A]]")
    resumed = RewardBenchEvaluator(_cfg(other)).run(examples, judge)
    assert resumed.judged == 0 and judge.calls == 0 and resumed.scores.errors == len(examples)
