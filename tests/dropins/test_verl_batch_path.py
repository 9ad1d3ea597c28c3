"""Pairwise groups on verl's batch reward path, padding copies included.

With a reward model colocated with the policy, verl's trainer scores a whole batch through
``RewardLoopManager.compute_rm_score``: it pads the batch to a multiple of its worker count with
exact copies of the first rows (``pad_dataproto_to_divisor``), gives worker ``i`` chunk ``i``
and keeps the first ``len(batch)`` results. Here verl's own manager and three of its
``RewardLoopWorker`` processes run that path with ``reward.reward_model.enable: true`` (the
colocated reward-model server itself is replaced by nothing: the judge is an HTTP stand-in
named by ``judge.http.base_url``, whose verdict is a known function of what it is shown: the
response showing more working wins). Every expected reward is a win rate computed by hand.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="needs verl (CI installs it in .venv-dropins from ci/dropins/requirements.txt)")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from nemo_genrm.testing import cached_tiny_tokenizer  # noqa: E402
from nemo_genrm.testing.stand_in_judges import StandInServer, more_working_wins  # noqa: E402

pytestmark = pytest.mark.dropins

WORKERS = 3
SWITCH = Path(__file__).with_name("verl_config_switch.py")


class _NoRewardModelServer:
    """Stands in for verl's colocated reward-model server, which the HTTP judge does not use."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def get_router_address(self) -> None:
        return None

    def wake_up(self) -> None:
        pass

    def sleep(self) -> None:
        pass


def _free_worker_names() -> None:
    """Kill verl's reward-loop workers left by another module (their names are fixed)."""
    import ray

    for i in range(8):
        try:
            handle = ray.get_actor(f"reward_loop_worker_{i}")
        except ValueError:
            continue
        ray.kill(handle, no_restart=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                ray.get_actor(f"reward_loop_worker_{i}")
            except ValueError:
                break
            time.sleep(0.1)


SECTION = {"reward": {"mode": "pairwise_group", "pairwise_group": {"group_size": 4}}}  # group_wait_ms: 30 s


@pytest.fixture(scope="module")
def judge_section():
    """The genrm section every row uses: groups of 4, the HTTP stand-in judge."""
    with StandInServer(lambda body: more_working_wins(StandInServer.user_text(body))) as server:
        judge = {"backend": "http", "model_name": "judge", "http": {"base_url": server.base_url, "max_retries": 0}}
        yield {"judge": judge, "resources": {"gpus_per_replica": 0}, **SECTION}


@pytest.fixture(scope="module")
def manager(ray_cluster, judge_section):
    """verl's RewardLoopManager on its batch path: three workers, a colocated reward model."""
    from verl.experimental.reward_loop import reward_loop

    tokenizer = str(cached_tiny_tokenizer())
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": tokenizer, "tokenizer_path": None}},
            "reward": {
                "num_workers": WORKERS,
                "reward_model": {
                    "enable": True,
                    "enable_resource_pool": False,
                    "model_path": tokenizer,
                    "rollout": {"full_determinism": False, "max_num_seqs": 1},
                },
                "reward_manager": {
                    "source": "importlib",
                    "name": "GenRMRewardManager",
                    "module": {"path": "pkg://nemo_genrm.integrations.verl_manager"},
                },
                "custom_reward_function": {
                    "path": str(SWITCH),
                    "name": "compute_score",
                    "reward_kwargs": {"configs": {"g4": judge_section}},
                },
            },
        }
    )
    _free_worker_names()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reward_loop, "RewardModelManager", _NoRewardModelServer)
        loop_manager = reward_loop.RewardLoopManager(config)
    try:
        yield loop_manager
    finally:
        _free_worker_names()  # the next module's workers take these names


def _batch(rows: list[tuple[str, int]]):
    """A DataProto with one row per ``(uid, working)``, in order.

    Each response shows ``working`` reasons; equal working in one uid is the same text (a
    response sampled twice). Every row has one prompt and the same ``extra_info.index`` (as two
    data files numbered from 0 give): only verl's ``uid`` tells the groups apart.
    """
    from verl import DataProto

    tokenizer = AutoTokenizer.from_pretrained(str(cached_tiny_tokenizer()))
    prompt = tokenizer("Answer the question.", return_tensors="pt").input_ids[0]
    ids = [tokenizer("Answer: 7. " + "because " * w, add_special_tokens=False).input_ids for _, w in rows]
    width = max(len(i) for i in ids)
    tokens = torch.full((len(rows), width), tokenizer.pad_token_id)
    mask = torch.zeros(len(rows), len(prompt) + width, dtype=torch.long)
    for i, row in enumerate(ids):
        tokens[i, : len(row)] = torch.tensor(row)
        mask[i, : len(prompt) + len(row)] = 1
    return DataProto.from_dict(
        tensors={"prompts": prompt.unsqueeze(0).repeat(len(rows), 1), "responses": tokens, "attention_mask": mask},
        non_tensors={
            "data_source": np.array(["math"] * len(rows), dtype=object),
            "reward_model": np.array([{"ground_truth": "7"}] * len(rows), dtype=object),
            "extra_info": np.array([{"index": 0, "genrm_test_config": "g4"}] * len(rows), dtype=object),
            "uid": np.array([uid for uid, _ in rows], dtype=object),
        },
    )


def _groups(*groups: tuple[str, list[int]]) -> list[tuple[str, int]]:
    return [(uid, w) for uid, working in groups for w in working]


def _win_rates(working: list[int]) -> list[float]:
    """more_working_wins by hand: 1 per other response with less working, 1/2 per equal."""
    return [
        sum(1.0 if w > o else 0.5 if w == o else 0.0 for j, o in enumerate(working) if j != i) / (len(working) - 1)
        for i, w in enumerate(working)
    ]


def _score(manager, rows, judge_section):
    """verl's compute_rm_score on the rows: per row its score and reason, the seconds it took,
    and the shared judge's metrics of the batch's one judge call."""
    import ray

    from nemo_genrm.integrations.verl_groups import actor_name

    data = _batch(rows)
    start = time.monotonic()
    out = manager.compute_rm_score(data)
    seconds = time.monotonic() - start
    assert len(out) == len(data)  # verl keeps the first len(batch) results: the copies' are dropped
    metrics = ray.get(ray.get_actor(actor_name(judge_section)).metrics.remote())
    return out.batch["rm_scores"].sum(-1).tolist(), list(out.non_tensor_batch["genrm_reason"]), seconds, metrics


def test_padding_copies_are_never_ranked_counted_or_owed(manager, judge_section):
    """Batches padded to a multiple of 3 with copies of their first rows: training, validations
    below the group size, one with verl's legacy extra trajectories; and an unpadded batch whose
    last row is an honest twin of its first. Before, pairwise was refused on this path."""
    # Training: two groups of 4, the first holding a response sampled twice (working 1); 8 rows
    # padded to 9 with a copy of row 0, a third identical response.
    scores, reasons, _, metrics = _score(manager, _groups(("t0", [1, 1, 0, 2]), ("t1", [3, 0, 1, 2])), judge_section)
    assert scores == pytest.approx([0.5, 0.5, 0.0, 1.0, *_win_rates([3, 0, 1, 2])])
    assert reasons == ["judged"] * 8 and metrics["genrm/count/judged"] == 8  # the copy counted nowhere

    # Validations on the same prompts (verl draws uids per validation batch), masked at once:
    # one response per prompt (4 rows + 2 copies), and two (4 rows + copies of both of v0's,
    # which must not fill v0 up to a group of 4 that is ranked).
    for rows in (_groups(*[(f"v1-{p}", [p]) for p in range(4)]), _groups(("v2-0", [0, 1]), ("v2-1", [2, 3]))):
        scores, reasons, seconds, metrics = _score(manager, rows, judge_section)
        assert reasons == ["incomplete_group"] * 4 and scores == [0.0] * 4
        assert metrics["genrm/count/incomplete_group"] == 4 and metrics.get("genrm/count/judged", 0) == 0
        assert seconds < 20.0  # the whole batch came: nothing waits group_wait_ms (30 s)

    # The next training step, on the same prompts: nothing owed by the validations.
    rows = _groups(("t2", [2, 0, 1, 3]), ("t3", [0, 1, 2, 3]), ("t2", [3, 1]))  # + 2 extra trajectories
    scores, reasons, _, metrics = _score(manager, rows, judge_section)  # 10 rows + 2 copies
    assert scores == pytest.approx([*_win_rates([2, 0, 1, 3]), *_win_rates([0, 1, 2, 3]), 0.0, 0.0])
    assert reasons == ["judged"] * 8 + ["incomplete_group"] * 2  # past t2's size: masked, never a group

    # 12 rows (no padding), the last an honest twin of the first: ranked as a row of its group.
    rows = [("h0", 2), ("h0", 0), ("h0", 1), *_groups(("h1", [0, 1, 2, 3]), ("h2", [3, 2, 1, 0])), ("h0", 2)]
    scores, reasons, _, metrics = _score(manager, rows, judge_section)
    h0 = _win_rates([2, 0, 1, 2])
    assert scores == pytest.approx([*h0[:3], *_win_rates([0, 1, 2, 3]), *_win_rates([3, 2, 1, 0]), h0[3]])
    assert reasons == ["judged"] * 12 and metrics["genrm/count/judged"] == 12
