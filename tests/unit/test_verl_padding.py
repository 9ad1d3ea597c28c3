"""verl's padding copies are told apart by their place: the batch's last rows, repeating its first.

``pad_dataproto_to_divisor`` appends ``pad < workers`` rows to a batch of ``n``, row ``n + j``
copying row ``j % n``. Each case of :data:`CASES` lists a padded batch as row contents (``g.x``:
group ``g``, response ``x``; equal strings are identical rows) and the real row each row is, by
hand. Then whole padded batches go through :class:`PaddedBatches` and the real judge
environment, rows arriving in a shuffled order, with the stand-in judge ``more_working_wins``
(the response with more ``because`` wins, equal working draws): every reward is a win rate
computed by hand. verl's own padding runs through its batch path in
tests/dropins/test_verl_batch_path.py.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from nemo_genrm.integrations import verl as verl_dropin
from nemo_genrm.integrations.judge_reward import JudgeReward
from nemo_genrm.integrations.verl_padding import BatchSlot, PaddedBatches, padding_sources
from nemo_genrm.testing.rule_judges import RuleJudge
from nemo_genrm.testing.stand_in_judges import more_working_wins

CASES = [
    # (rows, workers, per row the real row it is or copies, why)
    ("a.0 a.0 a.1 b.0 b.1 b.2 c.0 c.1 c.2 a.0", 2, [*range(9), 0], "a copy of a row sampled twice"),
    ("a.0 a.1 b.0 b.1", 2, [0, 1, 2, 3], "no padding"),
    ("a.0 a.0 a.0 a.0", 4, [0, 0, 0, 0], "one row, copied three times"),
    ("a.0 a.1 a.0 a.1 a.0 a.1 a.0 a.1", 8, [0, 1, 0, 1, 0, 1, 0, 1], "two rows, copied three times each"),
    ("a.0 b.0 b.1 a.0", 4, [0, 1, 2, 3], "twins at both ends of an unpadded batch stay a group"),
    ("a.0 a.1 b.0 b.1 b.2 c.0 c.1 c.2 a.0", 3, [*range(9)], "a twin at the tail keeps its group whole"),
    ("a.0 a.1 b.0 b.1 b.2 b.3 c.0 c.1 c.2 c.3 a.0 a.1", 4, [*range(12)], "two twins at the tail keep their group"),
    ("a.0 a.1 a.2 b.0 b.1 b.2 a.9 a.0", 2, [*range(7), 0], "validation's extra trajectory, then a copy"),
    ("a.0 b.0 c.0 a.0", 2, [0, 1, 2, 0], "a validation at one response per prompt"),
    # val_kwargs.n: 3 below group_size: the copies must not fill group a up to a size it never had
    ("a.0 a.1 a.2 b.0 b.1 b.2 c.0 c.1 c.2 a.0 a.1 a.2", 4, [*range(9), 0, 1, 2], "copies of a short group"),
    ("a.0 a.1 b.0 b.1 a.0 a.1", 3, [0, 1, 2, 3, 0, 1], "copies of a whole group"),
    ("a.0 a.1 a.2 a.0", 2, [0, 1, 2, 0], "one group: the longest repeating tail is padding"),
]


@pytest.mark.parametrize(("rows", "workers", "sources", "why"), CASES, ids=[c[3] for c in CASES])
def test_padding_copies_map_to_the_rows_they_copy(rows, workers, sources, why):
    rows = rows.split()
    groups = [row.split(".")[0] for row in rows]
    assert len(rows) % workers == 0, "verl's padded batch is a multiple of its worker count"
    assert padding_sources(rows, groups, workers) == sources, why


def _response(working: int) -> str:
    return "Answer: 7. " + "because " * working


def _win_rates(working: list[int]) -> list[float]:
    """more_working_wins by hand: 1 per other response with less working, 1/2 per equal."""
    return [
        sum(1.0 if w > o else 0.5 if w == o else 0.0 for j, o in enumerate(working) if j != i) / (len(working) - 1)
        for i, w in enumerate(working)
    ]


def _reward(group_size: int, wait_ms: int = 30_000) -> tuple[JudgeReward, RuleJudge]:
    judge = RuleJudge(more_working_wins)
    section = {
        "judge": {"model_name": "stand-in", "backend": "http", "http": {"base_url": "http://stand-in/v1"}},
        "resources": {"gpus_per_replica": 0},
        "reward": {"mode": "pairwise_group", "pairwise_group": {"group_size": group_size, "group_wait_ms": wait_ms}},
    }
    return JudgeReward(section, judge=judge, per_sample="verl"), judge


def _padded(rows: list[tuple[str, int]], workers: int) -> list[tuple[str, int]]:
    """``rows`` padded as ``pad_dataproto_to_divisor`` pads a batch: copies of the first rows."""
    pad = -len(rows) % workers
    return rows + [rows[j % len(rows)] for j in range(pad)]


def _score(reward: JudgeReward, rows: list[tuple[str, int]], workers: int, *, drop: int | None = None, seed: int = 0):
    """Each row of the padded batch (``(uid, working)``) sent with its place, in a shuffled order
    (``drop``: a row that never comes); per row its judgement, and the seconds it took."""
    size = len(rows) // workers
    samples = [
        (
            (_response(w), "7", None, verl_dropin._mode_inputs(reward, None, "math", uid, [1, 2, 3])),
            BatchSlot(i // size, workers, i % size, size),
        )
        for i, (uid, w) in enumerate(rows)
    ]
    order = [i for i in range(len(rows)) if i != drop]
    random.Random(seed).shuffle(order)

    async def run():
        batches = PaddedBatches(reward, reward.config.reward.pairwise_group.group_wait_ms / 1000)
        out = await asyncio.gather(*(batches.judge(*samples[i]) for i in order))
        return dict(zip(order, out, strict=True))

    start = time.monotonic()
    by_row = asyncio.run(run())
    return [by_row.get(i) for i in range(len(rows))], time.monotonic() - start


@pytest.mark.parametrize("seed", [0, 1])
def test_a_padding_copy_gets_its_twins_judgement_and_is_never_ranked(seed):
    """Groups of 4 (one holds a response sampled twice) padded from 8 to 9 rows for 3 workers;
    the copy of row 0 may arrive first."""
    reward, judge = _reward(4)
    rows = [("t0", w) for w in (1, 1, 0, 2)] + [("t1", w) for w in (3, 0, 1, 2)]
    judgements, _ = _score(reward, _padded(rows, 3), 3, seed=seed)
    assert [j.reward for j in judgements] == pytest.approx([*_win_rates([1, 1, 0, 2]), *_win_rates([3, 0, 1, 2]), 0.5])
    assert judgements[8] == judgements[0]  # the copy: its original's judgement, which verl drops
    assert {j.reason for j in judgements} == {"judged"}
    metrics = reward.metrics()
    assert metrics["genrm/count/judged"] == 8  # the copy is counted nowhere
    assert metrics.get("genrm/count/incomplete_group", 0) == 0
    assert len(judge.seen) == 2 * 6  # 6 pairs in each group of 4: none with the copy
    reward.close()


def test_an_honest_twin_at_the_tail_is_ranked_as_a_row():
    """9 rows for 3 workers (no padding): the last row repeats the first, a response sampled
    twice in group a. Taken for a copy, it would leave group a short and masked."""
    reward, _ = _reward(3)
    rows = [("a", 2), ("a", 0), ("b", 0), ("b", 1), ("b", 2), ("c", 1), ("c", 1), ("c", 0), ("a", 2)]
    judgements, _ = _score(reward, rows, 3)
    assert [j.reward for j in judgements] == pytest.approx(
        [*_win_rates([2, 0, 2])[:2], *_win_rates([0, 1, 2]), *_win_rates([1, 1, 0]), _win_rates([2, 0, 2])[2]]
    )
    assert reward.metrics()["genrm/count/judged"] == 9
    reward.close()


@pytest.mark.parametrize(
    ("prompts", "per_prompt", "workers"), [(4, 1, 3), (3, 3, 4)], ids=["val_kwargs.n 1", "val_kwargs.n 3"]
)
def test_short_validation_groups_are_masked_at_once_whatever_their_copies(prompts, per_prompt, workers):
    """A validation below group_size: its groups are short, and the copies of its first rows
    (three of group v0 in the second case) must not fill v0 up to a group that is ranked."""
    reward, judge = _reward(4)
    rows = [(f"v{p}", w) for p in range(prompts) for w in range(per_prompt)]
    padded = _padded(rows, workers)
    assert len(padded) > len(rows)
    judgements, seconds = _score(reward, padded, workers)
    assert [(j.reward, j.reason, j.masked) for j in judgements] == [(0.0, "incomplete_group", True)] * len(padded)
    assert seconds < 5.0  # the whole batch came: nothing waits group_wait_ms (30 s)
    assert judge.seen == []
    assert reward.metrics()["genrm/count/incomplete_group"] == len(rows)  # the copies are counted nowhere
    reward.close()


def test_a_batch_missing_a_row_is_masked_after_group_wait_ms():
    reward, judge = _reward(4, wait_ms=300)
    rows = [("t0", w) for w in (1, 1, 0, 2)] + [("t1", w) for w in (3, 0, 1, 2)]
    judgements, seconds = _score(reward, _padded(rows, 3), 3, drop=5)
    assert judgements[5] is None
    masked = [(j.reward, j.reason, j.masked) for j in judgements if j is not None]
    assert masked == [(0.0, "incomplete_group", True)] * 8
    assert 0.3 <= seconds < 5.0 and judge.seen == []
    reward.close()
