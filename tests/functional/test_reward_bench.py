"""RewardBench end to end: a fixed-verdict tiny judge through the real dtensor engine on Ray (CPU).

One engine is started for the module, a tiny judge whose every reply is ``[[A]] 7``: for the
pairwise protocol it always picks A, for the rating protocol it always rates 7, and with other
choice markers configured its replies hold no verdict. The dataset is synthetic (every subset
name, two examples each) and built here. Expected accuracies are derived in the test from the
placement coin, not taken from the evaluator.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import pytest

from nemo_genrm.config import RewardBenchConfig
from nemo_genrm.evals import RewardBenchEvaluator, chosen_at_a, open_judge
from nemo_genrm.evals.reward_bench.data import write_examples
from nemo_genrm.evals.reward_bench.scores import SUBSETS
from nemo_genrm.evals.reward_bench.synthetic import synthetic_examples
from nemo_genrm.judges.base import Judge

ROOT = Path(__file__).resolve().parents[2]
PER_SUBSET = 2
REPLY = "[[A]] 7"


def _cfg(model: str | Path, output_dir: Path, **over) -> RewardBenchConfig:
    data = {
        "judge": {
            "backend": "dtensor",
            "model_name": str(model),
            "precision": "float32",
            "max_model_len": 1024,
            "sampling": {"max_new_tokens": 8},
            "batching": {"max_batch_size": 8},
        },
        "resources": {"gpus_per_replica": 0},
        "output_dir": str(output_dir),
        **over,
    }
    return RewardBenchConfig.model_validate(data)


def _expected_chosen_at_a(examples, seed: int) -> dict[str, float]:
    """Per subset: the share of examples whose chosen response the coin put at A."""
    hits: dict[str, list[bool]] = defaultdict(list)
    for ex in examples:
        hits[ex.subset].append(chosen_at_a(seed, ex.id))
    return {s: sum(v) / len(v) for s, v in hits.items()}


def _records(path: Path) -> dict[str, dict]:
    return {str(r["id"]): r for r in map(json.loads, path.read_text().splitlines())}


@pytest.fixture(scope="module")
def examples():
    return synthetic_examples(PER_SUBSET)


@pytest.fixture(scope="module")
def always_a(ray_cluster, tiny_cache_dir, tmp_path_factory):
    """The tiny judge that answers ``[[A]] 7`` to everything, started once for the module."""
    from nemo_genrm.testing import cached_tiny_judge

    base = _cfg(cached_tiny_judge(REPLY), tmp_path_factory.mktemp("unused"))
    with open_judge(base) as judge:
        yield base.judge.model_name, judge


def test_always_a_accuracy_is_share_of_chosen_at_a(always_a, examples, tmp_path, caplog) -> None:
    model, judge = always_a
    caplog.set_level(logging.INFO, logger="nemo_genrm.evals.reward_bench")
    outcome = RewardBenchEvaluator(_cfg(model, tmp_path / "s0", seed=0)).run(examples, judge)
    expected = _expected_chosen_at_a(examples, seed=0)
    assert set(outcome.scores.subsets) == set(SUBSETS)
    for subset, score in outcome.scores.subsets.items():
        assert score.accuracy == pytest.approx(expected[subset]), subset
        assert score.errors == 0
    records = _records(outcome.examples_path)
    assert all(r["verdict"] == "A" and r["output"].strip() == REPLY for r in records.values())
    assert all(r["placement"] == ("chosen_a" if chosen_at_a(0, r["id"]) else "chosen_b") for r in records.values())
    # Off a terminal the progress lines (in a log file, or here) show the running accuracy.
    assert "acc=" in caplog.text

    # Same seed: same placements. Another seed: other placements, and accuracy follows them.
    again = RewardBenchEvaluator(_cfg(model, tmp_path / "s0b", seed=0)).run(examples, judge)
    assert {k: r["placement"] for k, r in _records(again.examples_path).items()} == {
        k: r["placement"] for k, r in records.items()
    }
    other = RewardBenchEvaluator(_cfg(model, tmp_path / "s1", seed=1)).run(examples, judge)
    other_records = _records(other.examples_path)
    assert any(other_records[k]["placement"] != records[k]["placement"] for k in records)
    expected1 = _expected_chosen_at_a(examples, seed=1)
    assert {s: v.accuracy for s, v in other.scores.subsets.items()} == pytest.approx(expected1)


def test_both_orders_always_a_is_never_consistent(always_a, examples, tmp_path) -> None:
    model, judge = always_a
    outcome = RewardBenchEvaluator(_cfg(model, tmp_path, both_orders=True)).run(examples, judge)
    expected = _expected_chosen_at_a(examples, seed=0)
    for subset, score in outcome.scores.subsets.items():
        assert score.position_consistency == 0.0  # A in both orders = a different response each time
        assert score.accuracy_both_orders == 0.5  # right in exactly one of the two orders
        assert score.accuracy == pytest.approx(expected[subset])  # headline: the coin's order only
    record = next(iter(_records(outcome.examples_path).values()))
    assert record["swapped"]["placement"] != record["placement"] and record["consistent"] is False


def test_verdict_from_logprobs_matches_text(always_a, examples, tmp_path) -> None:
    model, judge = always_a
    cfg = _cfg(model, tmp_path, judge={**_cfg(model, tmp_path).judge.model_dump(), "verdict_from": "logprobs"})
    outcome = RewardBenchEvaluator(cfg).run(examples, judge)
    expected = _expected_chosen_at_a(examples, seed=0)
    assert {s: v.accuracy for s, v in outcome.scores.subsets.items()} == pytest.approx(expected)
    record = next(iter(_records(outcome.examples_path).values()))
    assert record["output"]["[[A]]"] > 0.99  # label probabilities are kept as the raw output


class _Interrupted(Exception):
    pass


class _StopsAfter(Judge):
    """Delegates to a real judge, then fails on the n-th call (a crash mid-run)."""

    def __init__(self, judge: Judge, calls: int) -> None:
        self.judge, self.left = judge, calls

    def generate(self, batch: Sequence):
        self.left -= 1
        if self.left < 0:
            raise _Interrupted
        return self.judge.generate(batch)

    def score(self, batch, labels):
        return self.judge.score(batch, labels)

    def stats(self):
        return self.judge.stats()

    def reset_stats(self) -> None:
        self.judge.reset_stats()


def test_resume_after_interruption_equals_one_run(always_a, examples, tmp_path) -> None:
    model, judge = always_a
    cfg = _cfg(model, tmp_path / "resumed")
    with pytest.raises(_Interrupted):
        RewardBenchEvaluator(cfg).run(examples, _StopsAfter(judge, calls=2))
    jsonl = Path(cfg.output_dir) / "examples.jsonl"
    assert len(jsonl.read_text().splitlines()) == 16  # two flushed batches of 8
    with jsonl.open("a") as f:
        f.write('{"id": 999, "subset": "hep-')  # a line torn by the crash
    resumed = RewardBenchEvaluator(cfg).run(examples, judge)
    assert (resumed.resumed, resumed.judged) == (16, len(examples) - 16)
    single = RewardBenchEvaluator(_cfg(model, tmp_path / "single")).run(examples, judge)
    assert resumed.results == single.results and resumed.summary == single.summary
    assert _records(resumed.examples_path) == _records(single.examples_path)


def test_rating_protocol_all_sevens_are_ties(always_a, examples, tmp_path) -> None:
    model, judge = always_a  # rates every response 7
    cfg = _cfg(model, tmp_path, protocol="rating", prompt={"template": "rating"}, verdict={"parser": "rating"})
    outcome = RewardBenchEvaluator(cfg).run(examples, judge)
    assert outcome.scores.ties == len(examples) and outcome.scores.errors == 0
    assert all(v.accuracy == 0.5 for v in outcome.scores.subsets.values())
    assert outcome.summary["Score"] == 0.5
    record = next(iter(_records(outcome.examples_path).values()))
    assert record["verdict"] == {"chosen": 7, "rejected": 7} and record["tie"] is True


def _load_entry_point():
    spec = importlib.util.spec_from_file_location("run_reward_bench", ROOT / "examples" / "run_reward_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_entry_point_unparseable_judge_and_comparison(always_a, examples, tmp_path, capsys, monkeypatch) -> None:
    model, judge = always_a
    data = write_examples(tmp_path / "data.jsonl", examples)
    reference = tmp_path / "reference.json"
    # A reference where every subset scored 0.9: ours (0.5 everywhere) is 0.4 away.
    reference.write_text(json.dumps({"model": "ref", "model_type": "Generative RM", **{s: 0.9 for s in SUBSETS}}))
    entry = _load_entry_point()
    cfg = entry.parse_config(
        [
            "--config",
            str(ROOT / "examples" / "configs" / "reward_bench_tiny.yaml"),
            f"judge.model_name={model}",
            f"data.path={data}",
            f"output_dir={tmp_path / 'out'}",
            f"compare_to={reference}",
            # The judge answers [[A]] but is asked for [[X]]/[[Y]]: no reply holds a verdict.
            "verdict.choice_markers=['[[X]]','[[Y]]']",
        ]
    )
    opened = []

    @contextlib.contextmanager
    def reuse_started_judge(config):
        # open_judge itself is exercised by the fixture; this spares a second engine start.
        opened.append(config)
        yield [judge]

    monkeypatch.setattr("nemo_genrm.evals.open_judges", reuse_started_judge)  # the entry point imports it late
    assert entry.main(cfg) == 1  # beyond tolerance
    assert opened == [cfg]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    # No verdict: 0.5 per example, as the reference counts it, and every one counted as an error.
    assert all(results[s] == 0.5 for s in SUBSETS)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["nemo_genrm"]["errors"] == len(examples)
    assert all(v["errors"] == PER_SUBSET for v in summary["nemo_genrm"]["subsets"].values())
    record = json.loads((tmp_path / "out" / "examples.jsonl").read_text().splitlines()[0])
    assert (record["verdict"], record["verdict_reason"], record["score"]) == (None, "no_label", 0.5)
    printed = capsys.readouterr().out
    assert "-0.4000  !!" in printed and "Score" in printed
    assert (tmp_path / "out" / "comparison.png").read_bytes()[:4] == b"\x89PNG"


def test_entry_point_checks_inputs_before_starting_the_judge(examples, tmp_path, monkeypatch) -> None:
    from nemo_genrm.evals import ComparisonError, RewardBenchDataError

    entry = _load_entry_point()
    data = write_examples(tmp_path / "data.jsonl", examples)
    config = str(ROOT / "examples" / "configs" / "reward_bench_tiny.yaml")
    started = []
    monkeypatch.setattr("nemo_genrm.evals.open_judges", lambda cfg: started.append(cfg))
    missing_reference = entry.parse_config(
        ["--config", config, f"data.path={data}", f"compare_to={tmp_path / 'no.json'}"]
    )
    with pytest.raises(ComparisonError, match="does not exist"):
        entry.main(missing_reference)
    with pytest.raises(RewardBenchDataError, match="does not exist"):
        entry.main(entry.parse_config(["--config", config, f"data.path={tmp_path / 'none.jsonl'}"]))
    assert started == []


def test_reward_bench2_end_to_end(always_a, tmp_path) -> None:
    """RewardBench 2 through the real engine; every reply is ``[[A]] 7``.

    Best of four: A is right exactly where the seeded draw left the chosen response at A.
    Ties: every response is rated 7, so no correct answer beats an incorrect one (accuracy 0 for
    ref and tied prompts), no margin exceeds the spread (0 > 0 fails) and no spread is positive:
    the Ties score is 0.
    """
    from nemo_genrm.evals import RewardBench2Evaluator, examples_for
    from nemo_genrm.evals.reward_bench.v2 import chosen_position

    model, judge = always_a
    rows = [
        {
            "id": f"{s}{i}",
            "subset": s,
            "prompt": f"{s} question {i}",
            "chosen": [f"right {i}"],
            "rejected": [f"wrong {i}.{k}" for k in range(3)],
        }
        for s in ("Factuality", "Math")
        for i in range(4)
    ] + [
        {
            "id": f"{kind}:{i}",
            "subset": "Ties",
            "prompt": f"name a colour {i}",
            "chosen": ["red", "blue"][: 1 if kind == "ref" else 2],
            "rejected": ["seven", "nine"],
            "num_correct": 1 if kind == "ref" else 2,
        }
        for kind in ("ref", "tied")
        for i in range(2)
    ]
    data = tmp_path / "rb2.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows))
    cfg = _cfg(model, tmp_path / "v2", protocol="best_of_4", data={"path": str(data)})
    outcome = RewardBench2Evaluator(cfg).run(examples_for(cfg), judge)
    expected = {s: sum(chosen_position(0, f"{s}{i}") == 0 for i in range(4)) / 4 for s in ("Factuality", "Math")}
    assert {s: outcome.scores.subsets[s].accuracy for s in expected} == expected
    assert outcome.scores.subsets["Ties"].accuracy == 0.0 and outcome.scores.subsets["Ties"].errors == 0
    assert outcome.scores.score == pytest.approx((sum(expected.values()) + 0.0) / 3)
    assert json.loads(outcome.results_path.read_text())["Ties"] == 0.0


def test_ensemble_end_to_end(always_a, examples, tmp_path) -> None:
    """Three members (the same engine thrice) agree on A: the single judge's accuracy, agreement 1."""
    model, judge = always_a
    member = _cfg(model, tmp_path / "unused").judge.model_dump()
    cfg = _cfg(model, tmp_path / "poll", judges=[member, member, member])
    outcome = RewardBenchEvaluator(cfg).run(examples, [judge, judge, judge])
    expected = _expected_chosen_at_a(examples, seed=0)
    assert {s: v.accuracy for s, v in outcome.scores.subsets.items()} == expected
    assert all(v.agreement == 1.0 for v in outcome.scores.subsets.values())
    assert outcome.results["model_type"] == "Generative RM PoLL"
