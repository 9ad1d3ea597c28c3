"""A group key names one prompt: data source, the framework's tag (with its field) and the prompt.

The stand-in judge is ``more_working_wins`` (more ``because`` wins, equal working draws), so
each expected win rate is computed by hand.
"""

from __future__ import annotations

import pytest

from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.samples.groups import PROMPT_FIELD, SOURCE_FIELD, UNIQUE_FIELD, group_key, prompt_messages
from nemo_genrm.testing.rule_judges import RuleJudge
from nemo_genrm.testing.stand_in_judges import more_working_wins

LOG = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Why?"},
    {"role": "assistant", "content": "x"},
]


def _key(meta, log=LOG, question="Why?"):
    return group_key(meta, log, question, "group_id")


# Each pair must name two different groups: (metadata a, metadata b, why they differ).
DIFFERENT = [
    ({"group_id": 9}, {"group_id": 10}, "another tag"),
    ({"group_id": ["uid", 9]}, {"group_id": ["index", 9]}, "uid 9 is not index 9"),
    ({"group_id": 0, SOURCE_FIELD: "gsm8k"}, {"group_id": 0, SOURCE_FIELD: "math"}, "two files, both from 0"),
    ({"group_id": 0, PROMPT_FIELD: [1, 2]}, {"group_id": 0, PROMPT_FIELD: [1, 3]}, "another prompt, one index"),
    ({"group_id": 0}, {}, "a tag against none"),
]


@pytest.mark.parametrize(("a", "b", "why"), DIFFERENT, ids=[case[2] for case in DIFFERENT])
def test_keys_that_name_different_prompts_differ(a, b, why):
    assert _key(a) != _key(b), why


def test_the_same_prompt_gets_the_same_key_and_its_question():
    meta = {"group_id": 3, SOURCE_FIELD: "s", PROMPT_FIELD: "p"}
    assert _key(dict(meta)) == _key(dict(meta))
    assert _key(meta).question == "Why?" and _key(meta).unique is False
    assert _key({**meta, UNIQUE_FIELD: True}).unique is True
    # The prompt named in the metadata wins over the log's; a tag that is no name is no tag.
    assert _key({PROMPT_FIELD: "p"}, log=LOG) == _key({PROMPT_FIELD: "p"}, log=[])
    assert _key({"group_id": True}) == _key({"group_id": {"a": 1}}) == _key({})


def test_the_logs_prompt_is_what_came_before_its_first_answer():
    later_turn = [*LOG, {"role": "user", "content": "More?"}, {"role": "assistant", "content": "y"}]
    assert prompt_messages(later_turn) == [["system", "Be brief."], ["user", "Why?"]]
    assert _key({}, log=later_turn) == _key({}, log=LOG)  # every turn of one rollout: one prompt
    other_system = [{"role": "system", "content": "Be long."}, *LOG[1:]]
    assert _key({}, log=other_system) != _key({}, log=LOG)
    assert prompt_messages("text") is None and prompt_messages([1, 2]) is None


def _env(pairwise: dict) -> GenRMEnvironmentImpl:
    cfg = {
        "judge": {"model_name": "stand-in", "backend": "http", "http": {"base_url": "http://stand-in/v1"}},
        "resources": {"gpus_per_replica": 0},
        "reward": {"mode": "pairwise_group", "pairwise_group": pairwise},
    }
    return GenRMEnvironmentImpl(cfg, judge=RuleJudge(more_working_wins))


@pytest.mark.parametrize("pairwise", [{}, {"group_size": 2, "group_wait_ms": 5000}], ids=["one call", "gathered"])
def test_one_question_under_two_prompts_is_two_groups(pairwise):
    """Rows of two data sets ask the same question under different system prompts, tagged 0 both:
    two groups of two, each ranked alone (one group of four would give 0, 1/3, 2/3, 1)."""
    env = _env(pairwise)
    responses = ["Answer: 4", "because. Answer: 4", "because because. Answer: 4", "because because because. Answer: 4"]
    logs = [
        [
            {"role": "system", "content": f"Data set {i % 2}."},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": r},
        ]
        for i, r in enumerate(responses)
    ]
    result = env.step(logs, [{"group_id": 0} for _ in logs])
    # Data set 0: working 0 and 2; data set 1: working 1 and 3.
    assert result.rewards.tolist() == pytest.approx([0.0, 0.0, 1.0, 1.0])
    assert [m["genrm"]["reason"] for m in result.metadata] == ["judged"] * 4


def test_the_mode_handed_no_groups_keys_them_as_the_environment_does():
    """The pairwise mode called without the environment's groups (one call's samples) keys them
    with samples/groups.py too: two data sources under one tag and question are two groups."""
    import time

    from nemo_genrm.modes import Counters
    from nemo_genrm.samples.metrics import StepTally

    env = _env({})
    responses = ["Answer: 4", "because. Answer: 4", "because because. Answer: 4", "because because because. Answer: 4"]
    logs = [[{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": r}] for r in responses]
    metas = [{"group_id": 0, SOURCE_FIELD: f"file{i % 2}"} for i in range(4)]
    call = env._prepare(logs, metas)
    ask = env._asker(StepTally(), False, time.perf_counter(), {})
    results = env._mode.judge(call.samples, call.metas, ask, Counters())
    # file0: working 0 and 2; file1: working 1 and 3 (one group of four would give 0, 1/3, 2/3, 1).
    assert [r.reward for r in results] == pytest.approx([0.0, 0.0, 1.0, 1.0])
