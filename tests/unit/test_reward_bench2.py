"""RewardBench 2 (``protocol: best_of_4``) on a synthetic dataset with hand-computed scores.

The Ties formula is also checked side by side with reward-bench 0.1.4's own ``sample_stats`` and
``process_single_model`` (compiled from its installed ``rewardbench/utils.py``, which cannot be
imported without its training dependencies).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from nemo_genrm.config import ConfigError, RewardBenchConfig, validate
from nemo_genrm.evals.reward_bench.compare import compare, load_reference
from nemo_genrm.evals.reward_bench.data import RewardBenchDataError
from nemo_genrm.evals.reward_bench.v2 import (
    RewardBench2Evaluator,
    chosen_position,
    examples_for,
    rows_to_v2_examples,
)
from nemo_genrm.evals.reward_bench.v2_scores import arrangement, best_of_4_score, ties_score
from nemo_genrm.judges.base import Generation
from nemo_genrm.testing.stand_ins import GenerateOnlyJudge

# Ties ratings, chosen (correct) first: ref:0 [9 | 5 3], tied:0 [8 6 | 7 2], ref:1 [7 | 8 1],
# tied:1 [9 9 | 4 4].
#   ref:0 accurate (9 > 5), margin 4;        tied:0 not accurate (6 < 7), margin -1, spread 2;
#   ref:1 not accurate (7 < 8), margin -1;   tied:1 accurate (9 > 4), margin 5, spread 0.
#   accuracy ref 1/2, tied 1/2; preferred: tied margin > spread for prompt 1 only -> 1/2;
#   hard (min of both margins > spread): -1 > 2 no, -1 > 0 no -> 0;
#   margin score: spread > 0 only for prompt 0: ratio min(4, -1) / 2 = -0.5 -> tanh(-1.5).
TIES_EXPECTED = 0.3 * 0.5 + 0.3 * 0.5 + 0.2 * 0.5 + 0.2 * 0.0 + 0.01 * math.tanh(-1.5)
TIES_ROWS = [
    ("ref:0", [9], [5, 3]),
    ("tied:0", [8, 6], [7, 2]),
    ("ref:1", [7], [8, 1]),
    ("tied:1", [9, 9], [4, 4]),
]


def _rows() -> list[dict]:
    rows = [
        {
            "id": f"f{i}",
            "subset": "Factuality",
            "prompt": f"fact question {i}",
            "chosen": [f"GOOD f{i}"],
            "rejected": [f"BAD1 f{i}", f"BAD2 f{i}", f"BAD3 f{i}"],
            "num_correct": 1,
        }
        for i in range(4)
    ] + [
        {
            "id": f"o{i}",
            "subset": "Focus",
            "prompt": f"focus question {i}",
            "chosen": [f"GOOD o{i}"],
            "rejected": [f"BAD1 o{i}", f"BAD2 o{i}", f"BAD3 o{i}"],
        }
        for i in range(2)
    ]
    for tie_id, correct, incorrect in TIES_ROWS:
        texts = [f"answer {tie_id} {k} rate={r}" for k, r in enumerate(correct + incorrect)]
        rows.append(
            {
                "id": tie_id,
                "subset": "Ties",
                "prompt": f"ties question {tie_id}",
                "chosen": texts[: len(correct)],
                "rejected": texts[len(correct) :],
                "num_correct": len(correct),
            }
        )
    return rows


class _V2Judge(GenerateOnlyJudge):
    """Factuality: names the GOOD response; Focus: no verdict; Ties: the rating hidden in the text."""

    def generate(self, batch: Sequence) -> list[Generation]:
        out = []
        for request in batch:
            text = request.messages[-1]["content"]
            if "rate=" in text:
                rating = re.search(r"rate=(\d+)", text).group(1)
                out.append(Generation("Looks fine.\n" + rating))
            elif "fact question" in text:
                blocks = re.split(r"## Response ([ABCD])\n", text)[1:]
                letter = next(blocks[i] for i in range(0, len(blocks), 2) if "GOOD" in blocks[i + 1])
                out.append(Generation(f"<think>maybe [[A]]</think>[[{letter}]]"))
            else:
                out.append(Generation("I cannot decide."))
        return out


def _cfg(tmp_path, **over) -> RewardBenchConfig:
    return validate(
        RewardBenchConfig,
        {"judge": {"model_name": "org/judge"}, "protocol": "best_of_4", "output_dir": str(tmp_path / "out"), **over},
    )


def test_scores_by_hand(tmp_path) -> None:
    data = tmp_path / "rb2.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in _rows()))
    cfg = _cfg(tmp_path, data={"path": str(data)})
    outcome = RewardBench2Evaluator(cfg).run(examples_for(cfg), _V2Judge())
    subsets = outcome.scores.subsets
    assert subsets["Factuality"].accuracy == 1.0 and subsets["Factuality"].errors == 0
    assert subsets["Focus"].accuracy == 0.25 and subsets["Focus"].errors == 2  # no verdict: 0.25
    assert subsets["Ties"].accuracy == pytest.approx(TIES_EXPECTED)
    assert outcome.scores.score == pytest.approx((1.0 + 0.25 + TIES_EXPECTED) / 3)
    assert outcome.results == {
        "model": "org/judge",
        "model_type": "Generative RM",
        "chat_template": None,
        "Factuality": 1.0,
        "Focus": 0.25,
        "Ties": pytest.approx(TIES_EXPECTED),
    }
    assert outcome.summary["Score"] == pytest.approx(outcome.scores.score)
    positions = outcome.summary["nemo_genrm"]["chosen_positions"]
    assert sum(positions.values()) == 6 and positions == {
        letter: sum("ABCD"[chosen_position(0, ex_id)] == letter for ex_id in ["f0", "f1", "f2", "f3", "o0", "o1"])
        for letter in "ABCD"
    }
    # compare_to on v2 results: subsets and the mean of the common ones.
    comparison = compare(outcome.scores.flat(), load_reference(outcome.results_path), 0.0)
    assert comparison.ok and [r.name for r in comparison.rows] == ["Factuality", "Focus", "Ties", "Score"]


# The reference's own numpy means warn on an empty list (its NaN case, kept here too).
@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
def test_ties_formula_matches_the_reference() -> None:
    path = Path(next(iter(importlib.util.find_spec("rewardbench").submodule_search_locations))) / "utils.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("sample_stats", "process_single_model")
    ]
    from datasets import Dataset

    namespace = {"np": np, "math": math, "Dataset": Dataset}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    rng = np.random.default_rng(0)
    for trial in range(30):
        rows, ours = [], []
        for pid in range(int(rng.integers(1, 5))):
            for kind in ("ref", "tied"):
                if rng.random() < 0.2:
                    continue
                n_correct = 1 if kind == "ref" else int(rng.integers(1, 4))
                ratings = [int(r) for r in rng.choice([-1, *range(1, 11)], size=n_correct + int(rng.integers(1, 4)))]
                rows.append({"id": f"{kind}:{pid}", "scores": ratings, "num_correct": n_correct})
                ours.append((f"{kind}:{pid}", ratings, n_correct))
        if not rows:
            continue
        _, reference = namespace["process_single_model"](rows)
        ours_score = ties_score(ours)
        assert (math.isnan(reference) and math.isnan(ours_score)) or ours_score == pytest.approx(reference), trial


@pytest.mark.parametrize(("position", "shown"), [(0, "CRST"), (1, "RCST"), (2, "SRCT"), (3, "TRSC")])
def test_arrangement_swaps_chosen_into_place(position: int, shown: str) -> None:
    assert "".join(arrangement("C", ["R", "S", "T"], position)) == shown
    assert best_of_4_score("ABCD"[position], position) == 1.0
    assert best_of_4_score("ABCD"[(position + 1) % 4], position) == 0.0 and best_of_4_score(None, position) == 0.25


def test_preset_reads_replies_like_the_reference(tmp_path) -> None:
    evaluator = RewardBench2Evaluator(_cfg(tmp_path, prompt={"preset": "rewardbench"}))
    from nemo_genrm.evals.reward_bench.evaluator import JudgeReply

    # The reference takes the first of [[A]]..[[D]] anywhere in the reply, think blocks included.
    assert evaluator._choice(JudgeReply("<think>[[C]]</think> so [[B]]", None, None)) == "B"
    assert evaluator.v2_preset.version == "0.1.4" and evaluator.v2_preset.source.endswith("generative_v2.py")
    project = RewardBench2Evaluator(_cfg(tmp_path / "p"))
    assert project._choice(JudgeReply("<think>[[C]]</think> so [[B]]", None, None)) == "B"
    assert project._choice(JudgeReply("[[C]] or [[B]]", None, None)) is None  # two markers: no verdict
    example = rows_to_v2_examples(_rows())[0]
    np.random.seed(5)
    placement = RewardBench2Evaluator(_cfg(tmp_path / "r", placement="reference_random")).plan(example).placement
    np.random.seed(5)
    assert placement == "ABCD"[np.random.randint(0, 4)]


def test_bad_rows_and_settings_are_reported() -> None:
    with pytest.raises(RewardBenchDataError) as err:
        rows_to_v2_examples(
            [
                {"id": 1, "subset": "Math", "prompt": "p", "chosen": "text", "rejected": ["a", "b", "c"]},
                {"id": 2, "subset": "Math", "prompt": "p", "chosen": ["c"], "rejected": ["a"]},
            ]
        )
    assert "must be lists of texts" in str(err.value) and "three rejected" in str(err.value)
    with pytest.raises(ConfigError) as err:
        validate(
            RewardBenchConfig,
            {"judge": {"model_name": "x"}, "protocol": "best_of_4", "both_orders": True, "data": {"pref_sets": True}},
        )
    assert "both_orders" in str(err.value) and "pref_sets" in str(err.value)


def test_list_columns_load_from_parquet_and_the_hub(tmp_path, monkeypatch) -> None:
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _rows()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rb2.parquet")
    from_parquet = examples_for(_cfg(tmp_path, data={"path": str(tmp_path / "rb2.parquet")}))
    assert [(e.id, e.chosen, e.rejected, e.num_correct) for e in from_parquet] == [
        (r["id"], tuple(r["chosen"]), tuple(r["rejected"]), r.get("num_correct", 1)) for r in rows
    ]
    asked = []

    def fake_hub(name, split=None, **kwargs):  # the hub is out of reach here: serve the same rows
        asked.append((name, split))
        return datasets.Dataset.from_list(rows)

    monkeypatch.setattr(datasets, "load_dataset", fake_hub)
    cfg = _cfg(tmp_path, data={"hf_name": "allenai/reward-bench-2", "split": "test", "subsets": ["Ties"]})
    from_hub = examples_for(cfg)
    assert asked == [("allenai/reward-bench-2", "test")]
    assert [e.id for e in from_hub] == [r[0] for r in TIES_ROWS]
