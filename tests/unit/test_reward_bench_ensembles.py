"""Judge ensembles on RewardBench (``judges: [...]``, ``votes: k``) with hand-computed scores.

In-memory judges read the rendered prompt and pick the response holding ``GOOD`` (the chosen
one) or ``BAD``, so every expected number follows from the votes, whatever the placement.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence

import pytest

from nemo_genrm.config import ConfigError, RewardBenchConfig, validate
from nemo_genrm.evals.reward_bench.data import RewardBenchExample
from nemo_genrm.evals.reward_bench.evaluator import RewardBenchEvaluator
from nemo_genrm.judges.base import Generation
from nemo_genrm.testing.stand_ins import GenerateOnlyJudge

SUBSETS = ("hep-go", "donotanswer")
EXAMPLES = [
    RewardBenchExample(id=f"{s}-{i}", subset=s, prompt=f"{s} task {i}", chosen=f"GOOD {i}", rejected=f"BAD {i}")
    for s in SUBSETS
    for i in range(4)
]


def _pick(good: bool) -> Callable[[str], str]:
    """A judge answering the marker of the GOOD (or BAD) response as placed in the prompt."""

    def answer(text: str) -> str:
        good_first = text.index("GOOD") < text.index("BAD")
        return "[[A]]" if good_first == good else "[[B]]"

    return answer


class _Judge(GenerateOnlyJudge):
    def __init__(self, answer: Callable[[str], str | None]) -> None:
        self.answer = answer

    def generate(self, batch: Sequence) -> list[Generation]:
        return [Generation(self.answer(r.messages[-1]["content"])) for r in batch]


def _cfg(tmp_path, **over) -> RewardBenchConfig:
    data = {
        "judges": [{"model_name": "a/one"}, {"model_name": "b/two"}, {"model_name": "c/three"}],
        "output_dir": str(tmp_path / "out"),
        **over,
    }
    return RewardBenchConfig.model_validate(data)


def _go(text: str) -> bool:
    return "hep-go task" in text


def test_three_judges_majority_and_agreement(tmp_path) -> None:
    # hep-go: two judges pick GOOD, one BAD -> majority GOOD: accuracy 1, agreement 2/3.
    # donotanswer: one GOOD, one silent, one BAD -> a three-way tie; abstain -> no verdict, 0.5.
    judges = [_Judge(_pick(True)), _Judge(lambda t: _pick(True)(t) if _go(t) else "maybe"), _Judge(_pick(False))]
    outcome = RewardBenchEvaluator(_cfg(tmp_path, ties="abstain")).run(EXAMPLES, judges)
    go, dna = outcome.scores.subsets["hep-go"], outcome.scores.subsets["donotanswer"]
    assert (go.accuracy, go.errors, go.agreement) == (1.0, 0, pytest.approx(2 / 3))
    assert (dna.accuracy, dna.errors, dna.agreement) == (0.5, 4, pytest.approx(1 / 3))
    record = json.loads(outcome.examples_path.read_text().splitlines()[0])
    assert len(record["votes"]) == 3 and record["verdict_reason"] == "majority" and len(record["output"]) == 3
    assert outcome.summary["nemo_genrm"]["subsets"]["hep-go"]["agreement"] == pytest.approx(2 / 3)
    assert outcome.results["model_type"] == "Generative RM PoLL"


def test_votes_from_one_sampling_judge(tmp_path) -> None:
    # votes: 3 sends each request three times in a row; the judge cycles GOOD, BAD, GOOD on
    # hep-go (majority GOOD, agreement 2/3) and BAD, BAD, GOOD elsewhere (majority BAD: 0).
    cycles = {True: itertools.cycle([True, False, True]), False: itertools.cycle([False, False, True])}

    def answer(text: str) -> str:
        return _pick(next(cycles[_go(text)]))(text)

    cfg = RewardBenchConfig.model_validate(
        {
            "judge": {"model_name": "x/y", "sampling": {"temperature": 0.7}},
            "votes": 3,
            "output_dir": str(tmp_path / "v"),
        }
    )
    outcome = RewardBenchEvaluator(cfg).run(EXAMPLES, _Judge(answer))
    go, dna = outcome.scores.subsets["hep-go"], outcome.scores.subsets["donotanswer"]
    assert (go.accuracy, go.agreement) == (1.0, pytest.approx(2 / 3))
    assert (dna.accuracy, dna.agreement) == (0.0, pytest.approx(2 / 3))
    assert outcome.scores.score == pytest.approx((1.0 + 0.0) / 2)  # Reasoning 1, Safety 0


def test_ensemble_settings_are_validated() -> None:
    with pytest.raises(ConfigError) as err:
        validate(
            RewardBenchConfig,
            {
                "judge": {"model_name": "x"},
                "votes": 3,
                "protocol": "rating",
                "verdict": {"parser": "rating"},
                "prompt": {"template": "rating"},
            },
        )
    message = str(err.value)
    assert "pairwise and best_of_4" in message and "temperature > 0" in message
    assert "judge(s) [0] would give 3 identical verdicts" in message
    with pytest.raises(ConfigError, match="judges holds one judge"):
        validate(RewardBenchConfig, {"judges": [{"model_name": "x"}]})
    cfg = validate(RewardBenchConfig, {"judges": [{"model_name": "a"}, {"model_name": "b"}]})
    assert cfg.judge.model_name == "a" and [m.model_name for m in cfg.members] == ["a", "b"]


def test_votes_refused_where_every_copy_would_repeat_one_sample() -> None:
    with pytest.raises(ConfigError, match="would repeat one sample"):
        validate(
            RewardBenchConfig,
            {"judge": {"model_name": "x", "backend": "vllm", "sampling": {"temperature": 1.0}}, "votes": 3},
        )
