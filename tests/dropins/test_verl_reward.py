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

pytestmark = pytest.mark.dropins

ANSWERS = ["Answer: RIGHT", "Answer: WRONG", "Answer: CONFUSE", "Answer: CRASH", ""]


@pytest.fixture(autouse=True)
def _fresh_judges():
    yield
    verl_dropin.close_shared_rewards()


def _config(tokenizer_path: str, genrm_config) -> OmegaConf:
    return OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": tokenizer_path, "tokenizer_path": None}},
            "reward": {
                "reward_model": {"enable": False},
                "reward_manager": {"source": "register", "name": "naive"},
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
