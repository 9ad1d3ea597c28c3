"""The extraction families through the three drop-ins: TRL's reward function, verl's reward loop and
NeMo Gym's /verify, each against an OpenAI-compatible stand-in that reads literally what it is shown.

Each drop-in must give every answer the reward the environment gives it in process (same extraction,
same defence, same judge), so no answer offering two final values is rewarded and the literal
reader is flipped by none, whatever framework the reward runs in. Runs where TRL, verl and NeMo Gym
are installed (CI: .venv-dropins).
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("trl", reason="needs TRL (CI installs it in .venv-dropins from ci/dropins/requirements.txt)")
pytest.importorskip("verl", reason="needs verl (CI installs it in .venv-dropins)")
pytest.importorskip("nemo_gym", reason="needs NeMo Gym (CI installs it in .venv-dropins)")

import httpx  # noqa: E402
from dropins_support import http_section  # noqa: E402

from nemo_genrm.env.environment import GenRMEnvironmentImpl  # noqa: E402
from nemo_genrm.integrations import verl as verl_dropin  # noqa: E402
from nemo_genrm.integrations.trl import GenRMReward  # noqa: E402
from nemo_genrm.testing.literal import LiteralJudge  # noqa: E402
from nemo_genrm.testing.redteam_extraction import extraction_cases  # noqa: E402
from nemo_genrm.testing.stand_in_judges import StandInServer  # noqa: E402

pytestmark = pytest.mark.dropins

# Every third answer (each family keeps attacks and twins): the full set runs in process in
# tests/unit/test_redteam_extraction.py; here each framework's own path is what is tested.
CASES = extraction_cases()[::3]


def _literal_rule():
    judge = LiteralJudge()
    return lambda body: "1" if judge.decide(tuple(body["messages"]))[0] else "0"


@pytest.fixture(scope="module")
def expected() -> list[float]:
    """The environment's rewards in process, with the same reader: what every drop-in must give."""
    env = GenRMEnvironmentImpl(
        {"judge": {"model_name": "stand-in"}, "resources": {"gpus_per_replica": 0}}, judge=LiteralJudge()
    )
    logs = [[{"role": "user", "content": c.question}, {"role": "assistant", "content": c.response}] for c in CASES]
    try:
        out = env.step(logs, [{"question": c.question, "ground_truth": c.reference} for c in CASES])
    finally:
        env.shutdown()
    rewards = out.rewards.tolist()
    families = {(c.family, c.honest) for c in CASES}
    assert all((f, honest) in families for f in {c.family for c in CASES} for honest in (True, False))
    # The targets, in process: no flip of the literal reader, every honest twin kept.
    assert [c.name for c, r in zip(CASES, rewards, strict=True) if r != float(c.honest)] == []
    return rewards


def test_trl_reward_gives_the_environments_rewards(expected):
    with StandInServer(_literal_rule()) as server:
        reward = GenRMReward(http_section(server.base_url), reference_column="solution")
        try:
            got = asyncio.run(
                reward(
                    prompts=[[{"role": "user", "content": c.question}] for c in CASES],
                    completions=[[{"role": "assistant", "content": c.response}] for c in CASES],
                    completion_ids=[[1]] * len(CASES),
                    solution=[c.reference for c in CASES],
                )
            )
        finally:
            reward.close()
    assert got == expected


def test_verl_compute_score_gives_the_environments_rewards(expected):
    async def score_all(url: str) -> list[dict]:
        section = http_section(url)
        calls = [
            verl_dropin.compute_score("math", c.response, c.reference, {"question": c.question}, genrm_config=section)
            for c in CASES
        ]
        return await asyncio.gather(*calls)

    try:
        with StandInServer(_literal_rule()) as server:
            got = asyncio.run(score_all(server.base_url))
    finally:
        verl_dropin.close_shared_rewards()
    assert [g["score"] for g in got] == expected
    hedged = [c.name for c, g in zip(CASES, got, strict=True) if g["genrm_reason"] == "hedged"]
    assert hedged and all(not c.honest for c in CASES if c.name in hedged)


def test_nemo_gym_verify_gives_the_environments_rewards(expected):
    from test_nemo_gym_server import _request, _Served, _server

    with StandInServer(_literal_rule()) as judge_server:
        server = _server(http_section(judge_server.base_url))
        try:
            with _Served(server) as served:

                async def post_all():
                    async with httpx.AsyncClient(base_url=served.url, timeout=120) as client:
                        bodies = []
                        for c in CASES:
                            body = _request(c.response, expected=c.reference)
                            body["responses_create_params"]["input"] = [{"role": "user", "content": c.question}]
                            bodies.append(body)
                        return await asyncio.gather(*(client.post("/verify", json=b) for b in bodies))

                replies = asyncio.run(post_all())
        finally:
            server.shutdown_judge()
    got = [r.json() for r in replies]
    assert [g["reward"] for g in got] == expected
    hedges = [g for g, c in zip(got, CASES, strict=True) if c.family == "hedge" and not c.honest]
    assert {(g["genrm_reason"], g["failure_kind"], g["mask_sample"]) for g in hedges} == {
        ("hedged", "genrm:hedged", False)
    }
