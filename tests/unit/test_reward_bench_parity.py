"""Parity with reward-bench 0.1.4, checked side by side with the installed package (test group).

The reference's own functions are taken from its installed source (``rewardbench/generative.py``
cannot be imported without API SDKs, so the named functions are compiled from its syntax tree),
and its results loader ``analysis/utils.load_results`` is called on the files this project
writes. No Ray and no model: an in-memory judge answers fixed texts.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from nemo_genrm.config import RewardBenchConfig, RewardBenchDataConfig
from nemo_genrm.evals.reward_bench.data import RewardBenchExample, load_examples
from nemo_genrm.evals.reward_bench.evaluator import RewardBenchEvaluator
from nemo_genrm.evals.reward_bench.preset import load_rewardbench_preset
from nemo_genrm.evals.reward_bench.scores import (
    PRIOR_SETS,
    SUBSETS,
    ExampleScore,
    RewardBenchScores,
)
from nemo_genrm.evals.reward_bench.synthetic import synthetic_examples
from nemo_genrm.judges.base import Generation
from nemo_genrm.judges.fitting import PROMPT_TOO_LONG
from nemo_genrm.testing.stand_ins import GenerateOnlyJudge
from nemo_genrm.verdicts import VerdictParser

REFERENCE_VERSION = "0.1.4"


def _reference_dir() -> Path:
    spec = importlib.util.find_spec("rewardbench")
    assert spec is not None and spec.submodule_search_locations, "rewardbench is in the test dependency group"
    return Path(next(iter(spec.submodule_search_locations)))


def reference_functions(module: str, *names: str) -> dict:
    """Named top-level functions of an installed rewardbench module, compiled from its source."""
    path = _reference_dir() / f"{module}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert {n.name for n in nodes} == set(names)
    namespace: dict = {"re": re}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    return namespace


class _ScriptedJudge(GenerateOnlyJudge):
    """Answers each request with ``answer(request_text)``; ``None`` is a prompt too long."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.calls = 0

    def generate(self, batch: Sequence) -> list[Generation]:
        self.calls += 1
        out = []
        for request in batch:
            text = self.answer("\n".join(m["content"] for m in request.messages))
            out.append(Generation(text) if text is not None else Generation(None, error=PROMPT_TOO_LONG))
        return out


def _cfg(tmp_path, **over) -> RewardBenchConfig:
    return RewardBenchConfig.model_validate(
        {"judge": {"model_name": "fake"}, "output_dir": str(tmp_path / "out"), **over}
    )


# -------------------------------------------------------------- 1. replies with <think> blocks
THINK_REPLIES = [
    "<think>A looks right [[A]]</think> On reflection [[B]]",  # reference: first A marker wins
    "<think>still thinking about [[B]]",  # unclosed block: the project reads nothing
    "<think>x</think>[[B]]",  # both read B
    "Plain [[A]]",  # both read A
    "[[B]] then [[A]]",  # reference: A; project: ambiguous
    "no verdict at all",
]


def test_preset_reads_replies_exactly_as_the_reference(tmp_path) -> None:
    process_judgement = reference_functions("generative", "process_judgement", "con_j_evaluate")["process_judgement"]
    evaluator = RewardBenchEvaluator(_cfg(tmp_path, prompt={"preset": "rewardbench"}))
    ours = []
    for reply in THINK_REPLIES:
        verdict = evaluator._verdict(_reply(reply))
        ours.append(verdict.value if verdict.value is not None else "error")
    assert ours == [process_judgement(r, None) for r in THINK_REPLIES] == ["A", "B", "B", "A", "A", "error"]


def test_project_default_stays_think_aware() -> None:
    parser = VerdictParser.from_config(RewardBenchConfig.model_validate({"judge": {"model_name": "f"}}).verdict)
    values = [parser.parse(r).value for r in THINK_REPLIES]
    # After the last </think> only; an unclosed block gives no verdict; both markers: none.
    assert values == ["B", None, "B", "A", None, None]


def _reply(text: str):
    from nemo_genrm.evals.reward_bench.evaluator import JudgeReply

    return JudgeReply(text, None, None)


# ---------------------------------------------------------------------- 2. request parameters
@pytest.mark.parametrize(("protocol", "tokens"), [("pairwise", 2048), ("rating", 1024)])
def test_preset_sends_the_reference_request_parameters(protocol: str, tokens: int) -> None:
    cfg = RewardBenchConfig.model_validate(
        {
            "judge": {"model_name": "f"},
            "prompt": {"preset": "rewardbench"},
            "protocol": protocol,
            "verdict": {"parser": "choice" if protocol == "pairwise" else "rating"},
        }
    )
    sampling = cfg.judge.sampling
    assert (sampling.max_new_tokens, sampling.temperature, sampling.top_p) == (tokens, 0.0, 1.0)
    plain = RewardBenchConfig.model_validate({"judge": {"model_name": "f"}})
    assert plain.judge.sampling.max_new_tokens == 16  # the project's terse prompt keeps its default


def test_user_max_new_tokens_is_kept_and_warned_about(tmp_path, caplog) -> None:
    cfg = _cfg(
        tmp_path, prompt={"preset": "rewardbench"}, judge={"model_name": "f", "sampling": {"max_new_tokens": 64}}
    )
    assert cfg.judge.sampling.max_new_tokens == 64
    with caplog.at_level(logging.WARNING):
        RewardBenchEvaluator(cfg)
    assert "cut off here and read by the reference" in caplog.text


# ------------------------------------------------------------ 3. results reward-bench can load
def test_reward_bench_loader_reads_our_results(tmp_path) -> None:
    from analysis.utils import load_results  # reward-bench's own loader

    examples = synthetic_examples(3)
    outcome = RewardBenchEvaluator(_cfg(tmp_path)).run(examples, _ScriptedJudge(lambda text: "[[A]]"))
    org, name = outcome.results["model"].split("/")
    target = tmp_path / "hub" / "eval-set" / org / f"{name}.json"
    target.parent.mkdir(parents=True)
    target.write_text(outcome.results_path.read_text())
    frame = load_results(tmp_path / "hub", subdir="eval-set/")
    assert list(frame["model"]) == ["local/fake"]
    row = frame.iloc[0]
    accuracy = outcome.scores.subset_accuracy()
    assert {s: row[s] for s in SUBSETS} == pytest.approx(accuracy)
    # The loader's average is the plain mean over subsets: no section or Score key inflates it.
    assert row["average"] == pytest.approx(sum(accuracy.values()) / len(accuracy))
    assert outcome.summary["Score"] == pytest.approx(outcome.scores.score)


# ------------------------------------------------------------------------- 4. long prompts
def test_long_prompts_are_skipped_counted_and_not_retried(tmp_path) -> None:
    examples = [dataclasses.replace(ex, chosen=f"{ex.chosen} <{ex.id}>") for ex in synthetic_examples(2)]
    long_ids = {ex.id for ex in examples if ex.subset in ("hep-go", "donotanswer")} | {examples[0].id}
    texts = {ex.id: ex.chosen for ex in examples}

    def answer(text: str):
        return None if any(texts[i] in text for i in long_ids) else "[[A]]"

    outcome = RewardBenchEvaluator(_cfg(tmp_path)).run(examples, _ScriptedJudge(answer))
    subsets = outcome.summary["nemo_genrm"]["subsets"]
    assert subsets["hep-go"]["skipped"] == 2 and subsets["hep-go"]["accuracy"] is None
    assert subsets[examples[0].subset]["skipped"] == 1 and subsets[examples[0].subset]["n"] == 1
    assert outcome.summary["nemo_genrm"]["skipped_too_long"] == 5 and outcome.scores.errors == 0
    assert "hep-go" not in outcome.results and outcome.summary["nemo_genrm"]["judge_errors"] == 0
    judge = _ScriptedJudge(lambda text: "[[A]]")
    again = RewardBenchEvaluator(_cfg(tmp_path)).run(examples, judge)
    assert judge.calls == 0 and again.scores.skipped == 5  # too long stays too long: not re-judged


def test_long_prompts_shorten_both_responses_alike(tmp_path) -> None:
    from nemo_genrm.judges.fitting import ELISION_MARKER
    from nemo_genrm.testing import cached_tiny_tokenizer

    tokenizer = str(cached_tiny_tokenizer())
    example = RewardBenchExample(id=7, subset="hep-go", prompt="Sort a list.", chosen="c" * 900, rejected="r" * 3000)
    short = RewardBenchExample(id=8, subset="hep-go", prompt="Hi.", chosen="fine", rejected="bad")
    cfg = _cfg(
        tmp_path,
        long_prompts="shorten",
        judge={"model_name": "fake", "tokenizer": tokenizer, "max_model_len": 600, "sampling": {"max_new_tokens": 8}},
    )
    evaluator = RewardBenchEvaluator(cfg)
    plan = evaluator.plan(example)
    cut = plan.shortened
    keep = cut["keep_chars"]
    assert 0 < keep < 900 and cut["chosen"] == [900, keep + len(ELISION_MARKER)]
    assert cut["rejected"] == [3000, keep + len(ELISION_MARKER)]  # the same rule for both
    assert evaluator.builder.fits(plan.requests)
    # One more character each would not fit: the cut is as small as it can be.
    assert not evaluator.builder.fits(
        evaluator.builder._requests(
            example, plan.placement, _shorten("c" * 900, keep + 1), _shorten("r" * 3000, keep + 1)
        )
    )
    assert evaluator.plan(short).shortened is None
    outcome = evaluator.run([example, short], _ScriptedJudge(lambda text: "[[A]]"))
    assert outcome.summary["nemo_genrm"]["subsets"]["hep-go"]["shortened"] == 1
    record = json.loads(outcome.examples_path.read_text().splitlines()[0])
    assert record["shortened"] == cut and record["skipped"] is False


def _shorten(text: str, keep: int) -> str:
    from nemo_genrm.judges.fitting import shorten

    return shorten(text, keep)


# ------------------------------------------------------------------- 5. the version recorded
def test_installed_reference_preset_records_its_source_version() -> None:
    preset = load_rewardbench_preset("pairwise")
    assert preset.version == REFERENCE_VERSION
    assert preset.source == str(_reference_dir() / "generative.py")
    assert preset.template.fields == ("question", "answer_a", "answer_b") or set(preset.template.fields) == {
        "question",
        "answer_a",
        "answer_b",
    }
    assert preset.multi_turn is not None and "question_2" in preset.multi_turn.fields


# -------------------------------------------------------------------------- 6. placement
def test_reference_random_placement_draws_like_the_reference(tmp_path) -> None:
    examples = synthetic_examples(1)
    evaluator = RewardBenchEvaluator(_cfg(tmp_path, placement="reference_random"))
    np.random.seed(123)
    placements = [evaluator.plan(ex).placement for ex in examples]
    np.random.seed(123)
    # run_generative.py: is_shuffled = np.random.rand() > 0.5 puts chosen at B.
    expected = ["chosen_b" if np.random.rand() > 0.5 else "chosen_a" for _ in examples]
    assert placements == expected
    seeded = RewardBenchEvaluator(_cfg(tmp_path / "s"))
    assert [seeded.plan(ex).placement for ex in examples] == [seeded.plan(ex).placement for ex in examples]


# ----------------------------------------------------------------------- 7. prior sets
def test_prior_sets_use_the_leaderboard_weights() -> None:
    # One example per subset: Chat 1, Chat Hard 0, Safety 1, Reasoning 0.5 (all its subsets 0.5);
    # prior sets: anthropic_helpful 1, anthropic_hhh 0, shp 1, summarize 1 -> Prior Sets 0.75;
    # mtbench_human 0 is reported but not in Prior Sets. Leaderboard average with weights
    # 2, 2, 2, 2, 1: (2 * (1 + 0 + 1 + 0.5) + 0.75) / 9 = 5.75 / 9.
    section_of = {"Chat": 1.0, "Chat Hard": 0.0, "Safety": 1.0, "Reasoning": 0.5}
    from nemo_genrm.evals.reward_bench.scores import SUBSET_TO_SECTION

    scores = [ExampleScore(i, s, section_of[SUBSET_TO_SECTION[s]]) for i, s in enumerate(SUBSETS)]
    prior = {"anthropic_helpful": 1.0, "anthropic_hhh": 0.0, "shp": 1.0, "summarize": 1.0, "mtbench_human": 0.0}
    scores += [ExampleScore(f"p{i}", s, v) for i, (s, v) in enumerate(prior.items())]
    result = RewardBenchScores.from_examples(scores)
    assert result.sections[PRIOR_SETS] == 0.75
    assert math.isclose(result.score, 5.75 / 9)
    assert set(result.subset_accuracy(pref_sets=True)) == set(prior)
    core_only = RewardBenchScores.from_examples(scores[: len(SUBSETS)])
    assert core_only.score == 2.5 / 4  # no prior sets: the plain mean of the four sections


def test_prior_sets_load_and_render_like_the_reference(tmp_path) -> None:
    rows = [
        {"id": 1, "subset": "shp", "prompt": [{"role": "user", "content": "q"}], "chosen": "c", "rejected": "r"},
        {
            "id": 1,
            "subset": "anthropic_helpful",
            "chosen": "c2",
            "rejected": "r2",
            "prompt": [
                {"role": "user", "content": "q1"},
                {"role": "assistant", "content": "a1"},
                {"role": "user", "content": "q2"},
            ],
        },
        {
            "id": 2,
            "subset": "anthropic_helpful",
            "chosen": "c",
            "rejected": "r",
            "prompt": [{"role": "user", "content": "x"}] * 5,
        },  # 6 messages: the reference drops it
        {"id": 3, "subset": "pku_safer", "prompt": "q", "chosen": "c", "rejected": "r"},  # left out
    ]
    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text("\n".join(json.dumps(r) for r in rows))
    core = tmp_path / "core.jsonl"
    core.write_text(json.dumps({"id": 1, "subset": "hep-go", "prompt": "p", "chosen": "c", "rejected": "r"}))
    data = RewardBenchDataConfig(path=str(core), pref_sets=True, pref_sets_path=str(prefs))
    examples = load_examples(data)
    assert [ex.id for ex in examples] == [1, "shp:1", "anthropic_helpful:1"]
    two_turn = examples[2]
    assert two_turn.turns == ("q1", "a1") and two_turn.prompt == "q2"
    evaluator = RewardBenchEvaluator(
        RewardBenchConfig.model_validate(
            {"judge": {"model_name": "f"}, "prompt": {"preset": "rewardbench"}, "output_dir": str(tmp_path / "o")}
        )
    )
    plan = evaluator.plan(two_turn)
    a, b = ("c2", "r2") if plan.placement == "chosen_a" else ("r2", "c2")
    expected = evaluator.preset.multi_turn.render(
        question_1="q1", question_2="q2", answer_a_1="a1", answer_b_1="a1", answer_a_2=a, answer_b_2=b
    )
    assert list(plan.requests[0].messages) == expected
    outcome = evaluator.run(examples, _ScriptedJudge(lambda text: "[[A]]"))
    pref_file = json.loads((tmp_path / "o" / "results_pref_sets.json").read_text())
    assert set(pref_file) == {"model", "model_type", "chat_template", "shp", "anthropic_helpful"}
    assert set(outcome.results) == {"model", "model_type", "chat_template", "hep-go"}


def test_prior_sets_from_the_hub_take_split_names_as_subsets(tmp_path, monkeypatch) -> None:
    import datasets

    def fake_hub(name, split=None, **kwargs):  # every split of allenai/pref-test-sets is a subset
        assert name == "allenai/pref-test-sets" and split is None
        row = {"id": 0, "prompt": [{"role": "user", "content": "q"}], "chosen": "c", "rejected": "r", "subset": "x"}
        return datasets.DatasetDict({s: datasets.Dataset.from_list([row]) for s in ("shp", "pku_better")})

    core = tmp_path / "core.jsonl"
    core.write_text(json.dumps({"id": 1, "subset": "hep-go", "prompt": "p", "chosen": "c", "rejected": "r"}))
    monkeypatch.setattr(datasets, "load_dataset", fake_hub)
    examples = load_examples(RewardBenchDataConfig(path=str(core), pref_sets=True))
    assert [(ex.id, ex.subset, ex.prompt) for ex in examples] == [(1, "hep-go", "p"), ("shp:0", "shp", "q")]
