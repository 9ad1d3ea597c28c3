"""compute_score inside verl's real reward loop (RewardLoopWorker -> naive reward manager).

verl's worker loads the function from ``reward.custom_reward_function`` as a training run does,
sees a coroutine function and awaits it once per response; the judge is the HTTP engine talking
to an OpenAI-compatible stand-in server. Runs where verl is installed (CI: .venv-dropins).
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("verl", reason="needs verl (CI installs it in .venv-dropins from ci/dropins/requirements.txt)")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from dropins_support import RuleServer, http_section  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from nemo_genrm.integrations import verl as verl_dropin  # noqa: E402
from nemo_genrm.testing import cached_tiny_tokenizer  # noqa: E402
from nemo_genrm.testing.stand_in_judges import (  # noqa: E402
    StandInServer,
    criterion_in_response,
    dead_base_url,
    more_working_wins,
    seeded_bit,
    seeded_verdict,
)

pytestmark = pytest.mark.dropins

ANSWERS = ["Answer: RIGHT", "Answer: WRONG", "Answer: CONFUSE", "Answer: CRASH", ""]


@pytest.fixture(autouse=True)
def _fresh_judges():
    yield
    verl_dropin.close_shared_rewards()


# nemo_genrm's reward manager, as docs/integrations.md configures it.
GENRM_MANAGER = {
    "source": "importlib",
    "name": "GenRMRewardManager",
    "module": {"path": "pkg://nemo_genrm.integrations.verl_manager"},
}
NAIVE_MANAGER = {"source": "register", "name": "naive"}


def _config(tokenizer_path: str, genrm_config, manager: dict | None = None) -> OmegaConf:
    return OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": tokenizer_path, "tokenizer_path": None}},
            "reward": {
                "reward_model": {"enable": False},
                "reward_manager": manager or NAIVE_MANAGER,
                "custom_reward_function": {
                    "path": "pkg://nemo_genrm.integrations.verl",
                    "name": "compute_score",
                    "reward_kwargs": {"genrm_config": genrm_config},
                },
            },
        }
    )


def _batch(tokenizer, answers: list[str]):
    """A DataProto shaped as verl's rollout hands it to the reward loop (left-padded prompts)."""
    from verl import DataProto

    prompt = tokenizer("What is 2+2?", return_tensors="pt").input_ids[0]
    rows = [tokenizer(a or " ", add_special_tokens=False).input_ids for a in answers]
    width = max(len(r) for r in rows) + 2
    responses = torch.full((len(rows), width), tokenizer.pad_token_id)
    mask = torch.zeros(len(rows), len(prompt) + width, dtype=torch.long)
    for i, ids in enumerate(rows):
        responses[i, : len(ids)] = torch.tensor(ids)
        mask[i, : len(prompt) + len(ids)] = 1
    prompts = prompt.unsqueeze(0).repeat(len(rows), 1)
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "attention_mask": mask},
        non_tensors={
            "data_source": np.array(["math"] * len(rows), dtype=object),
            "reward_model": np.array([{"ground_truth": "4"} for _ in rows], dtype=object),
            "extra_info": np.array([{"question": "What is 2+2?"} for _ in rows], dtype=object),
        },
    )


def _run(config, tokenizer, answers, router=None) -> list[dict]:
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    async def go():
        worker = RewardLoopWorker(config, reward_router_address=router)
        return await worker.compute_score_batch(_batch(tokenizer, answers))

    return asyncio.run(go())


def _check(outputs: list[dict]) -> None:
    scores = [o["reward_score"] for o in outputs]
    infos = [o["reward_extra_info"] for o in outputs]
    assert scores == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert [i["acc"] for i in infos] == [1.0, 0.0, None, None, 0.0]
    assert [i["genrm_reason"] for i in infos] == ["judged", "judged", "parse_failure", "judge_error", "no_answer"]
    assert [i["genrm_judge_failed"] for i in infos] == [0.0, 0.0, 1.0, 1.0, 0.0]
    assert [i["pred"] for i in infos] == ["RIGHT", "WRONG", "CONFUSE", "CRASH", ""]


def test_verl_reward_loop_awaits_compute_score_against_the_judge_service():
    tokenizer_path = str(cached_tiny_tokenizer())
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    with RuleServer() as server:
        outputs = _run(_config(tokenizer_path, http_section(server.base_url)), tokenizer, ANSWERS)
    _check(outputs)
    assert len(server.prompts) == 4  # the empty answer never reaches the judge
    assert all("What is 2+2?" in p and "4" in p for p in server.prompts)


def test_reward_router_address_serves_a_judge_without_base_url(tmp_path):
    """verl's own reward model router: the judge config names no URL, verl passes the address."""
    tokenizer_path = str(cached_tiny_tokenizer())
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    yaml = tmp_path / "genrm.yaml"
    OmegaConf.save(OmegaConf.create({"env": {"genrm": http_section(None)}}), yaml)
    with RuleServer() as server:
        outputs = _run(_config(tokenizer_path, str(yaml)), tokenizer, ANSWERS, router=server.address)
    _check(outputs)
    assert server.models and set(server.models) == {"judge"}


def test_compute_score_needs_a_judge_config():
    with pytest.raises(ValueError, match="genrm_config"):
        asyncio.run(verl_dropin.compute_score("math", "Answer: 4", "4", {}))


# ------------------------------------------------------------- modes, groups and masks
def _rows(
    tokenizer,
    responses: list[str],
    extra_infos: list[dict],
    ground_truth: str = "4",
    uids: list[str] | None = None,
    prompt_text: str = "Answer the question.",
):
    """A DataProto of ``responses`` with a row's own ``extra_info`` each (left-padded prompts),
    and verl's ``uid`` per row when given."""
    from verl import DataProto

    prompt = tokenizer(prompt_text, return_tensors="pt").input_ids[0]
    rows = [tokenizer(r or " ", add_special_tokens=False).input_ids for r in responses]
    width = max(len(r) for r in rows) + 2
    ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    mask = torch.zeros(len(rows), len(prompt) + width, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(prompt) + (len(row) if responses[i] else 0)] = 1
    non_tensors = {
        "data_source": np.array(["math"] * len(rows), dtype=object),
        "reward_model": np.array([{"ground_truth": ground_truth} for _ in rows], dtype=object),
        "extra_info": np.array(extra_infos, dtype=object),
    }
    if uids is not None:
        non_tensors["uid"] = np.array(uids, dtype=object)
    return DataProto.from_dict(
        tensors={"prompts": prompt.unsqueeze(0).repeat(len(rows), 1), "responses": ids, "attention_mask": mask},
        non_tensors=non_tensors,
    )


def _score_rows(section, tokenizer_path, responses, extra_infos, uids=None, manager=None):
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)

    async def go():
        worker = RewardLoopWorker(_config(tokenizer_path, section, manager), reward_router_address=None)
        return await worker.compute_score_batch(_rows(tokenizer, responses, extra_infos, uids=uids))

    return asyncio.run(go())


def _win_rates(scores: list[int]) -> list[float]:
    out = []
    for i, mine in enumerate(scores):
        others = [s for j, s in enumerate(scores) if j != i]
        out.append(sum(1.0 if mine > s else 0.5 if mine == s else 0.0 for s in others) / len(others))
    return out


def _pairwise_rule(body: dict) -> str:
    return more_working_wins(StandInServer.user_text(body))


@pytest.mark.parametrize("group", [4, 8])
def test_64_rows_in_groups_keep_every_group_whole_at_the_default_pool_size(group):
    """verl's reward loop awaits compute_score for all 64 rows at once; groups come by verl's uid,
    which nemo_genrm's reward manager passes on."""
    rows = 64
    working_of = [(7 * r + r // group) % group for r in range(rows)]  # distinct within a group
    responses = ["Answer: 7. " + "because " * w for w in working_of]
    # No question in extra_info (verl's own data has none); every file numbers its rows from 0.
    extra = [{"index": 0} for r in range(rows)]
    uids = [f"uid-{r // group}" for r in range(rows)]
    reward = {"mode": "pairwise_group", "pairwise_group": {"group_size": group}}
    with StandInServer(_pairwise_rule) as server:
        section = {**http_section(server.base_url), "reward": reward}
        outputs = _score_rows(section, str(cached_tiny_tokenizer()), responses, extra, uids, GENRM_MANAGER)
    expected = []
    for g in range(rows // group):
        expected += _win_rates(working_of[g * group : (g + 1) * group])
    assert [o["reward_score"] for o in outputs] == pytest.approx(expected)
    assert all(o["reward_extra_info"]["genrm_reason"] == "judged" for o in outputs)
    assert all(o["reward_extra_info"]["acc"] is None for o in outputs)  # no verdict in this mode


def test_reference_mode_judge_calls_are_not_capped_by_the_thread_pool():
    with StandInServer(lambda body: "1") as server:
        # The judge says 1 to all: the value-level verifier (default both) would veto the answers
        # that are not 4; this test counts judge calls, not verdicts.
        section = {**http_section(server.base_url), "coalesce": {"max_wait_ms": 500}, "reward": {"verifier": "none"}}
        outputs = _score_rows(
            section, str(cached_tiny_tokenizer()), [f"Answer: {i}" for i in range(64)], [{"question": "q?"}] * 64
        )
        metrics = verl_dropin.shared_reward(section).metrics()
    assert [o["reward_score"] for o in outputs] == [1.0] * 64
    assert metrics["genrm/num_samples"] == 64  # one judge call for the whole batch


def test_rubric_items_from_extra_info_and_masks():
    proof = "Because p^2 = 2q^2, the parity argument gives a contradiction. Answer: irrational"
    items = [{"criterion": "kw:contradiction", "weight": 2}, "kw:parity", "kw:induction"]

    def rule(body: dict) -> str:
        return criterion_in_response(StandInServer.user_text(body))

    with StandInServer(rule) as server:
        section = {**http_section(server.base_url), "reward": {"mode": "rubric"}}
        outputs = _score_rows(
            section, str(cached_tiny_tokenizer()), [proof, "Answer: irrational"], [{"rubric": items}, {"rubric": items}]
        )
    assert [o["reward_score"] for o in outputs] == pytest.approx([0.75, 0.0])
    with StandInServer(_pairwise_rule) as server:
        reward = {"mode": "pairwise_group", "pairwise_group": {"group_size": 4}}
        section = {**http_section(server.base_url), "reward": reward}
        masked = _score_rows(
            section,
            str(cached_tiny_tokenizer()),
            ["Answer: 7 because", "", "", ""],
            [{"index": 0}] * 4,
            ["u"] * 4,
            GENRM_MANAGER,
        )
    infos = [o["reward_extra_info"] for o in masked]
    assert [i["genrm_reason"] for i in infos] == ["incomplete_group", "no_answer", "no_answer", "no_answer"]
    assert [i["genrm_masked"] for i in infos] == [1.0, 0.0, 0.0, 0.0]


def test_votes_of_a_sampling_judge_disagree():
    with StandInServer(lambda body: seeded_verdict(StandInServer.user_text(body), body.get("seed"))) as server:
        section = {**http_section(server.base_url, sampling={"temperature": 0.9, "seed": 5}), "reward": {"votes": 5}}
        values = list(range(1, 17))
        outputs = _score_rows(
            section,
            str(cached_tiny_tokenizer()),
            [f"Answer: ans-{v}" for v in values],
            [{"question": "q?"}] * len(values),
        )
    majority = [1.0 if 2 * sum(seeded_bit(v, 5 + k) for k in range(5)) > 5 else 0.0 for v in values]
    assert [o["reward_score"] for o in outputs] == majority


def test_a_judge_gone_for_good_stops_the_reward_loop():
    from nemo_genrm.errors import JudgeUnavailableError

    section = {**http_section(dead_base_url()), "fault_tolerance": {"unavailable_grace_s": 0}}
    with pytest.raises(JudgeUnavailableError):
        _score_rows(section, str(cached_tiny_tokenizer()), ["Answer: 4"] * 4, [{"question": "q?"}] * 4)


def test_modes_that_cannot_be_fed_are_refused_with_what_is_missing():
    from nemo_genrm.config import ConfigError

    section = {**http_section("http://127.0.0.1:9/v1"), "reward": {"mode": "pairwise_group"}}
    with pytest.raises(ConfigError, match="group_size"):
        asyncio.run(verl_dropin.compute_score("math", "Answer: 4", "4", {"index": 0}, genrm_config=section))
    multi = {
        **http_section("http://127.0.0.1:9/v1", verdict_from="logprobs"),
        "reward": {"mode": "pairwise_group", "pairwise_group": {"group_size": 4}},
    }
    with pytest.raises(ConfigError, match="judge.tokenizer"):
        asyncio.run(verl_dropin.compute_score("math", "Answer: 4", "4", {"index": 0}, genrm_config=multi))


def test_exclude_unmeasured_keeps_flagged_rows_out_of_verls_grpo_update():
    """verl's own compute_advantage (GRPO) on a batch whose rows carry compute_score's flags.

    Group a: scores 1, 0, 0 (masked), 1. Without the masked row GRPO sees 1, 0, 1: mean 2/3,
    std (unbiased) sqrt(((1/3)^2 + (2/3)^2 + (1/3)^2) / 2) = sqrt(1/3), so the advantages are
    (1 - 2/3) / sqrt(1/3) = 1/sqrt(3) and (0 - 2/3) / sqrt(1/3) = -2/sqrt(3). Group b: 1, 0
    (judge failed), 0, 1 leaves 1, 0, 1 as well. The flagged rows get advantage 0.
    """
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    scores = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    rewards = torch.zeros(8, 3)  # [B, T]: the score on the last token, as verl's reward managers put it
    rewards[:, -1] = torch.tensor(scores)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": torch.ones(8, 3, dtype=torch.long)},
        non_tensors={
            "uid": np.array(["a"] * 4 + ["b"] * 4, dtype=object),
            "genrm_masked": np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
            "genrm_judge_failed": np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]),
        },
    )
    assert verl_dropin.exclude_unmeasured(data) == 2
    out = compute_advantage(data, adv_estimator="grpo", num_repeat=4)
    up, down = 1 / 3**0.5, -2 / 3**0.5
    expected = [up, down, 0.0, up, up, 0.0, down, up]
    assert out.batch["advantages"][:, -1].tolist() == pytest.approx(expected, abs=1e-5)
    assert out.batch["response_mask"][[2, 5]].sum() == 0  # none of their tokens enters the loss


def test_masks_reach_the_actors_loss_only_through_exclude_unmeasured():
    """verl's legacy trainer path after the reward: compute_advantage, then what _update_actor
    hands the actor (left_right_2_no_padding), then verl's own ppo_loss at ActorConfig's defaults.

    One group of 4 scored 1, 0, 0, 1 whose third row is a judge failure. verl's GRPO (unbiased
    std): mean 1/2, std sqrt(1/3), advantages +-(1/2)/sqrt(1/3) = +-0.866: the failure trains
    as a wrong answer, its log-probs get a gradient. Excluded, the group is 1, 0, 1 (advantages
    1/sqrt(3), -2/sqrt(3), as above), the failed row's advantage is 0 and its tokens leave the
    loss: no gradient, and the token mean is over the 6 tokens of the 3 others (the loss's own
    input ``response_mask``).
    """
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils import tensordict_utils as tu
    from verl.workers.config import ActorConfig
    from verl.workers.utils.losses import ppo_loss
    from verl.workers.utils.padding import left_right_2_no_padding

    rows, prompt_len, response_len = 4, 3, 2
    rewards = torch.zeros(rows, response_len)  # [B, R]: the score on the last token
    rewards[:, -1] = torch.tensor([1.0, 0.0, 0.0, 1.0])
    gradients = {}
    for exclude in (False, True):
        prompts = torch.arange(10, 10 + rows * prompt_len).view(rows, prompt_len)  # [B, P]
        responses = torch.arange(50, 50 + rows * response_len).view(rows, response_len)  # [B, R]
        data = DataProto.from_dict(
            tensors={
                "prompts": prompts,
                "responses": responses,
                "input_ids": torch.cat([prompts, responses], 1),
                "attention_mask": torch.ones(rows, prompt_len + response_len, dtype=torch.long),
                "position_ids": torch.arange(prompt_len + response_len).repeat(rows, 1),
                "response_mask": torch.ones(rows, response_len, dtype=torch.long),
                "token_level_rewards": rewards.clone(),
                "old_log_probs": torch.zeros(rows, response_len),
            },
            non_tensors={
                "uid": np.array(["g"] * rows, dtype=object),
                "genrm_judge_failed": np.array([0.0, 0.0, 1.0, 0.0]),
            },
        )
        if exclude:
            assert verl_dropin.exclude_unmeasured(data) == 1
        data = compute_advantage(data, adv_estimator="grpo", num_repeat=rows)
        up, down = (1 / 3**0.5, -2 / 3**0.5) if exclude else (0.5 * 3**0.5, -0.5 * 3**0.5)
        want = [up, down, 0.0 if exclude else down, up]
        assert data.batch["advantages"][:, -1].tolist() == pytest.approx(want, abs=1e-4)
        batch = left_right_2_no_padding(data.to_tensordict())  # as RayPPOTrainer._update_actor does
        tu.assign_non_tensor(
            batch, dp_size=1, batch_num_tokens=int(batch["response_mask"].sum()), global_batch_size=rows
        )
        log_probs = torch.zeros(rows * (prompt_len + response_len), requires_grad=True)  # the policy's, unpadded
        offsets = torch.arange(0, log_probs.numel() + 1, prompt_len + response_len)
        nested = torch.nested.nested_tensor_from_jagged(log_probs, offsets=offsets)
        config = ActorConfig(
            strategy="fsdp", ppo_mini_batch_size=rows, ppo_micro_batch_size_per_gpu=rows, rollout_n=rows
        )
        loss, _ = ppo_loss(config, {"log_probs": nested}, batch)
        loss.backward()
        gradients[exclude] = log_probs.grad.view(rows, -1).abs().sum(1).tolist()  # per row
    # Token mean of -A * ratio: each token's gradient is |A| / (tokens in the loss).
    assert gradients[False] == pytest.approx([0.5 * 3**0.5 * 2 / 8] * 4, abs=1e-4)
    assert gradients[True] == pytest.approx([2 / 3**0.5 / 6, 4 / 3**0.5 / 6, 0.0, 2 / 3**0.5 / 6], abs=1e-4)


def test_pairwise_on_the_batch_reward_path_is_refused_outside_verls_reward_loop_workers():
    """A reward model colocated with the policy (no resource pool of its own): verl scores the whole
    batch at once, padded with exact copies of its first rows, which only their place in the
    padded batch tells apart. A manager outside verl's RewardLoopWorker (no worker index) cannot
    say it: refused. Through verl's own workers: tests/dropins/test_verl_batch_path.py."""
    from nemo_genrm.config import ConfigError

    tokenizer_path = str(cached_tiny_tokenizer())
    section = {
        **http_section("http://127.0.0.1:9/v1"),
        "reward": {"mode": "pairwise_group", "pairwise_group": {"group_size": 4}},
    }
    config = _config(tokenizer_path, section, GENRM_MANAGER)
    config.reward.reward_model.enable = True  # enable_resource_pool left off: the batch path
    from verl.trainer.ppo.reward import load_reward_manager

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    rows = _rows(tokenizer, ["Answer: 7"], [{"index": 0}], uids=["u"])

    async def score():  # verl builds its manager on the loop that awaits it
        return await load_reward_manager(config, tokenizer).run_single(rows[0:1])

    with pytest.raises(ConfigError, match="enable_resource_pool"):
        asyncio.run(score())
    verl_dropin.close_shared_rewards()


def test_a_row_without_its_data_fields_says_why():
    """verl's V1 trainer hands a colocated reward model the prompt and response alone
    (``_compute_reward_colocate``: ``raw_prompt`` and tensors): a clear error, not a KeyError."""
    tokenizer_path = str(cached_tiny_tokenizer())
    section = {**http_section("http://127.0.0.1:9/v1"), "reward": {"mode": "reference"}}
    config = _config(tokenizer_path, section, GENRM_MANAGER)
    config.reward.reward_model.enable = True
    from verl.trainer.ppo.reward import load_reward_manager

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    rows = _rows(tokenizer, ["Answer: 7"], [{"index": 0}])
    rows.non_tensor_batch = {"raw_prompt": np.array([[{"role": "user", "content": "Q"}]], dtype=object)}

    async def score():
        return await load_reward_manager(config, tokenizer).run_single(rows[0:1])

    with pytest.raises(ValueError, match="data_source, reward_model.*enable_resource_pool"):
        asyncio.run(score())
