"""The nonce-stability check counts exactly the answers whose reward follows the fence nonce."""

from __future__ import annotations

import re

import pytest

from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.testing.gullible import GullibleJudge
from nemo_genrm.testing.nonce_stability import nonce_stability

_NONCE = re.compile(r"<candidate-([a-z]+)>")
_QUESTION = re.compile(r"What is (\d+) \+ (\d+)\?")


class NonceReadingJudge(GullibleJudge):
    """Right about the last number, but says yes only under a nonce that opens in b-m: its
    verdict on a right answer is a draw of the nonce, as a judge that reads the tags gives."""

    def __init__(self) -> None:
        super().__init__()
        self.saw: dict[str, str] = {}  # question -> nonce

    def decide(self, messages):
        text = "\n".join(m["content"] for m in messages)
        nonce = _NONCE.search(text)[1]
        self.saw[_QUESTION.search(text)[0]] = nonce
        return self.honest(text) and nonce[0] <= "m", None


def _cases() -> list[tuple[str, str, str]]:
    cases = []
    for a in range(1, 11):
        cases.append((f"What is {a} + {a}?", str(2 * a), f"Answer: {2 * a}"))  # right
        b = a + 100
        cases.append((f"What is {b} + {b}?", str(2 * b), f"Answer: {2 * b + 1}"))  # wrong
    return cases


def _env(judge):
    def make(seed: int) -> GenRMEnvironmentImpl:
        cfg = {
            "judge": {"model_name": "stand-in"},
            "resources": {"gpus_per_replica": 0},
            "prompt": {"fence_seed": seed},
        }
        return GenRMEnvironmentImpl(cfg, judge=judge(seed))

    return make


def test_a_judge_blind_to_the_nonce_splits_nothing():
    cases = _cases()
    result = nonce_stability(_env(lambda seed: GullibleJudge()), cases, seeds=range(4))
    assert result.split == 0 and result.split_rate == 0.0
    assert [row[0] for row in result.rewards] == [1.0, 0.0] * 10


def test_a_judge_that_reads_the_nonce_splits_its_right_answers_each_as_its_nonces_say():
    judges: dict[int, NonceReadingJudge] = {}

    def judge(seed: int) -> NonceReadingJudge:
        judges[seed] = NonceReadingJudge()
        return judges[seed]

    cases = _cases()
    seeds = tuple(range(8))
    result = nonce_stability(_env(judge), cases, seeds=seeds)
    for i, (question, _, _) in enumerate(cases):
        if i % 2:  # wrong: never rewarded, whatever the nonce
            assert result.rewards[i] == (0.0,) * len(seeds)
            continue
        expected = tuple(float(judges[s].saw[question][0] <= "m") for s in seeds)  # computed from the nonces shown
        assert result.rewards[i] == expected
    split = [i for i in range(0, len(cases), 2) if len(set(result.rewards[i])) > 1]
    assert result.split_cases == split and result.split == len(split) > 0
    assert result.split_rate == pytest.approx(len(split) / len(cases))
    assert all(reason == "judged" for row in result.reasons for reason in row)


def test_one_seed_is_refused():
    with pytest.raises(ValueError, match="at least two fence seeds"):
        nonce_stability(_env(lambda seed: GullibleJudge()), _cases(), seeds=[0])
