"""Pairwise groups through verl's real reward-loop workers: several processes, one ranking per group.

verl (0.9.1) starts ``reward.num_workers`` RewardLoopWorker actors (8 by default). Its batch
path (``RewardLoopManager.compute_rm_score``) cuts the batch into one contiguous chunk per
worker, and its streaming path (the agent loop) scores each trajectory when it finishes, on a
worker picked at random; either way a group's responses reach different processes at different
times. Each expected reward is a win rate computed by hand from the stand-in judge's rule (the
response showing more working wins).

Two workers in the session's Ray cluster serve every test here: verl's own
``RewardLoopManager`` starts them with ``verl_config_switch.compute_score`` as the custom
reward function, which calls nemo_genrm's ``compute_score`` with the config a row names.
"""

from __future__ import annotations

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

WORKERS = 2
SWITCH = Path(__file__).with_name("verl_config_switch.py")


def _section(base_url: str, group: int, **pairwise) -> dict:
    return {
        "judge": {"backend": "http", "model_name": "judge", "http": {"base_url": base_url, "max_retries": 0}},
        "resources": {"gpus_per_replica": 0},
        "reward": {"mode": "pairwise_group", "pairwise_group": {"group_size": group, **pairwise}},
    }


@pytest.fixture(scope="module")
def judge_server():
    with StandInServer(lambda body: more_working_wins(StandInServer.user_text(body))) as server:
        yield server


@pytest.fixture(scope="module")
def manager(ray_cluster, judge_server):
    """verl's RewardLoopManager with two RewardLoopWorker processes (no verl reward model)."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    configs = {f"g{g}": _section(judge_server.base_url, g) for g in (3, 4, 8)}  # group_wait_ms: 30 s
    configs["g4-wait1s"] = _section(judge_server.base_url, 4, group_wait_ms=1000)
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": str(cached_tiny_tokenizer()), "tokenizer_path": None}},
            "reward": {
                "num_workers": WORKERS,
                "reward_model": {"enable": False, "enable_resource_pool": False},
                "reward_manager": {
                    "source": "importlib",
                    "name": "GenRMRewardManager",
                    "module": {"path": "pkg://nemo_genrm.integrations.verl_manager"},
                },
                "custom_reward_function": {
                    "path": str(SWITCH),
                    "name": "compute_score",
                    "reward_kwargs": {"configs": configs},
                },
            },
        }
    )
    yield RewardLoopManager(config)


def _batch(group: int, groups: int, first_index: int, config: str | None = None, uid: str = "uid"):
    """``groups`` groups of ``group`` responses, as verl hands rows to the reward loop.

    The working shown differs within a group (so every pair has a winner); each group is one
    ``uid`` (verl draws one per prompt and step), and its rows carry the dataset row's
    ``extra_info.index`` as verl's preprocessing writes it (no question). ``config`` names the
    switch's config (default ``g<group>``); ``uid`` prefixes the uids (a new step draws new ones).

    Returns:
        The DataProto and the hand-computed win rate of each row.
    """
    from verl import DataProto

    tokenizer = AutoTokenizer.from_pretrained(str(cached_tiny_tokenizer()))
    rows = group * groups
    working = [(5 * r + r // group) % group for r in range(rows)]  # a permutation within each group
    responses = ["Answer: 7. " + "because " * w for w in working]
    prompt = tokenizer("Answer the question.", return_tensors="pt").input_ids[0]
    ids = [tokenizer(r, add_special_tokens=False).input_ids for r in responses]
    width = max(len(i) for i in ids)
    tokens = torch.full((rows, width), tokenizer.pad_token_id)
    mask = torch.zeros(rows, len(prompt) + width, dtype=torch.long)
    for i, row in enumerate(ids):
        tokens[i, : len(row)] = torch.tensor(row)
        mask[i, : len(prompt) + len(row)] = 1
    extra = [{"index": first_index + r // group, "genrm_test_config": config or f"g{group}"} for r in range(rows)]
    data = DataProto.from_dict(
        tensors={"prompts": prompt.unsqueeze(0).repeat(rows, 1), "responses": tokens, "attention_mask": mask},
        non_tensors={
            "data_source": np.array(["math"] * rows, dtype=object),
            "reward_model": np.array([{"ground_truth": "7"}] * rows, dtype=object),
            "extra_info": np.array(extra, dtype=object),
            "uid": np.array([f"{uid}-{first_index + r // group}" for r in range(rows)], dtype=object),
        },
    )
    expected = []
    for g in range(groups):
        mine = working[g * group : (g + 1) * group]
        # win rate: each other response beaten counts 1 (no ties: the working differs)
        expected += [sum(w > o for o in mine) / (group - 1) for w in mine]
    return data, expected


@pytest.mark.parametrize("group", [4, 8])
def test_batch_chunks_cut_groups_yet_every_group_is_ranked_whole(manager, group):
    """compute_rm_score: 5 groups over 2 workers, chunks of 2.5 groups: the middle group is cut."""
    data, expected = _batch(group, groups=5, first_index=1000 * group)
    out = manager.compute_rm_score(data)
    scores = out.batch["rm_scores"].sum(-1).tolist()
    assert scores == pytest.approx(expected)
    assert list(out.non_tensor_batch["genrm_reason"]) == ["judged"] * len(expected)
    assert list(out.non_tensor_batch["genrm_masked"]) == [0.0] * len(expected)


def test_streaming_rows_on_random_workers_at_different_times(manager):
    """The agent loop's path: one row per call, on any worker, as each trajectory finishes.

    Every group (of 4 and of 8) alternates between the two workers, and its rows come in two
    waves 0.3 s apart: no process ever holds a whole group.
    """
    import time

    import ray

    batches = [_batch(4, groups=2, first_index=5000), _batch(8, groups=2, first_index=6000)]
    rows = [(data[i : i + 1], want) for data, expected in batches for i, want in enumerate(expected)]
    workers = manager.reward_loop_workers
    refs = []
    for wave in (0, 1):
        for n, (row, _) in enumerate(rows):
            if n % 2 == wave:
                refs.append((n, workers[(n // 2) % WORKERS].compute_score.remote(row)))
        time.sleep(0.3)
    results = dict(zip([n for n, _ in refs], ray.get([ref for _, ref in refs]), strict=True))
    assert [results[n]["reward_score"] for n in range(len(rows))] == pytest.approx([want for _, want in rows])
    assert {results[n]["reward_extra_info"]["genrm_reason"] for n in results} == {"judged"}


def test_rows_past_a_uids_group_never_open_or_owe_a_group(manager):
    """verl's legacy validation pads its generation batch to the agent workers with copies of its
    first rows (pad_dataproto_to_divisor): they are generated too, so the first prompt's uid
    gets more trajectories than rollout.n, each scored on its own as it finishes.

    Here the 3 rows of each group come first (ranked whole), then 2 more trajectories of the
    first group's uid: each is masked at once as late, opening no group (which would wait
    group_wait_ms, 30 s by default, for members that never come) and owing nothing: the next
    step asks the same prompts under verl's new uids and is ranked whole.
    """
    import time

    import ray

    workers = manager.reward_loop_workers
    data, expected = _batch(3, groups=3, first_index=8000)
    got = ray.get([workers[i % WORKERS].compute_score.remote(data[i : i + 1]) for i in range(len(data))])
    assert [g["reward_score"] for g in got] == pytest.approx(expected)
    extra, _ = _batch(3, groups=1, first_index=8000)  # the first group's uid again, other texts
    start = time.monotonic()
    late = ray.get([workers[i % WORKERS].compute_score.remote(extra[i + 1 : i + 2]) for i in range(2)])
    assert time.monotonic() - start < 30.0  # a group of their own would wait group_wait_ms (30 s)
    assert [g["reward_extra_info"]["genrm_reason"] for g in late] == ["incomplete_group"] * 2
    assert [g["reward_extra_info"]["genrm_masked"] for g in late] == [1.0] * 2
    data, expected = _batch(3, groups=3, first_index=8000, uid="next-step")
    got = ray.get([workers[i % WORKERS].compute_score.remote(data[i : i + 1]) for i in range(len(data))])
    assert [g["reward_score"] for g in got] == pytest.approx(expected)
    assert [g["reward_extra_info"]["genrm_masked"] for g in got] == [0.0] * 9


def test_validation_at_n_1_then_training_on_the_same_rows(manager):
    """verl's default val_kwargs.n is 1: each validation prompt is a group of one (its own uid).

    Those groups are short and masked (as documented); the training step that follows asks the
    same index values under new uids, four rollouts each: every group is ranked whole (before,
    validation's debts on the bare index masked 16 of 16).
    """
    val, _ = _batch(4, groups=4, first_index=9000, config="g4-wait1s", uid="val")
    rows = [val[i : i + 1] for i in range(0, 16, 4)]  # one rollout per prompt
    from verl import DataProto

    out = manager.compute_rm_score(DataProto.concat(rows))
    assert list(out.non_tensor_batch["genrm_reason"]) == ["incomplete_group"] * 4
    assert list(out.non_tensor_batch["genrm_masked"]) == [1.0] * 4
    train, expected = _batch(4, groups=4, first_index=9000, config="g4-wait1s", uid="train")
    out = manager.compute_rm_score(train)
    assert out.batch["rm_scores"].sum(-1).tolist() == pytest.approx(expected)
    assert list(out.non_tensor_batch["genrm_masked"]) == [0.0] * 16


def test_the_shared_judge_raises_the_packages_own_errors(ray_cluster, judge_server):
    """A judge the actor cannot start is raised to the worker as the package's ConfigError."""
    import asyncio

    from nemo_genrm.config import ConfigError, GenRMConfig, validate
    from nemo_genrm.integrations.verl_groups import gathered_reward

    # Multi-token pairwise markers scored from logprobs over HTTP: refused when the judge starts.
    section = _section(judge_server.base_url, 4)
    section["judge"]["verdict_from"] = "logprobs"
    reward = gathered_reward(section, validate(GenRMConfig, section, prefix="env.genrm"))
    with pytest.raises(ConfigError, match="judge.tokenizer") as raised:
        asyncio.run(reward.ajudge(["Answer: 7"], None, None, [{"group_id": 0}]))
    assert raised.type is ConfigError  # unwrapped from Ray's RayTaskError


def _wait_dead(handle) -> None:
    """Return once calls on ``handle`` fail (Ray kills an actor, and what it owns, asynchronously)."""
    import time

    import ray

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get(handle.metrics.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.1)
    raise AssertionError("the shared judge actor is still alive")


def test_a_dead_shared_judge_is_started_again_by_the_next_call(manager, judge_server):
    """The shared actor dies between two steps, with the process that owns it.

    verl's workers hold a handle on the actor after a step. It is killed, created again by
    another process (as by the first worker that asks), and that owner dies, taking the actor
    with it (Ray ends a non-detached actor with its owner). The next step's calls find their
    handles dead, get the actor again (one of them creates it) and every row still gets its
    group's win rate.
    """
    import ray

    from nemo_genrm.config import GenRMConfig, validate
    from nemo_genrm.integrations.verl_groups import GatheredReward, actor_name

    section = _section(judge_server.base_url, 4)
    name = actor_name(section)

    def step(first_index: int) -> None:
        data, expected = _batch(4, groups=3, first_index=first_index)
        assert manager.compute_rm_score(data).batch["rm_scores"].sum(-1).tolist() == pytest.approx(expected)

    step(7000)  # both workers hold a handle on the actor now
    first = ray.get_actor(name)
    ray.kill(first, no_restart=True)
    _wait_dead(first)
    owner = ray.remote(num_cpus=0)(GatheredReward).remote(section, validate(GenRMConfig, section, prefix="env.genrm"))
    assert ray.get(owner.metrics.remote()) is not None  # the owner created the actor and reached it
    owned = ray.get_actor(name)
    ray.kill(owner, no_restart=True)
    _wait_dead(owned)
    step(7100)
    assert ray.get(ray.get_actor(name).metrics.remote()) is not None
