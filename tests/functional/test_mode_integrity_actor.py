"""Reward integrity through the GenRMEnvironment Ray actor: the judge is the HTTP engine inside
the actor, talking to a stand-in OpenAI-compatible server in this process whose verdict is a
known function of what it is shown (nemo_genrm.testing.stand_in_judges).

- pairwise_group, one step call per group from concurrent callers: the judge reads the whole
  responses; a call of one response (NeMo-RL's per-sample rollout path) is refused, naming the
  setting, since that caller holds a thread per waiting response and whole groups cannot be
  promised;
- rubric, with votes: items met in the reasoning count, and each vote is sampled with its own
  seed, so the votes of a sampling judge disagree (a ``kw:coin`` item is the seeded coin).
"""

from __future__ import annotations

import pytest

from nemo_genrm.testing.stand_in_judges import (
    StandInServer,
    criterion_in_response,
    more_working_wins,
    seeded_bit,
    seeded_verdict,
    working,
)

RESPONSES = [
    "Short. Answer: 7",
    "It is 7 because 3 + 4. Answer: 7",
    "Because 3 + 4 = 7, and because addition commutes. Answer: 7",
    "Because 4 + 3, because 3 + 4, because counting. Answer: 7",
]


def _section(base_url: str, reward: dict, **judge) -> dict:
    http = {"base_url": base_url, "max_retries": 0, "timeout_s": 30}
    return {
        "judge": {"backend": "http", "model_name": "judge", "http": http, **judge},
        "resources": {"gpus_per_replica": 0},
        "reward": reward,
    }


def _log(response: str, question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": response}]


def _win_rates(scores: list[int]) -> list[float]:
    out = []
    for i, mine in enumerate(scores):
        others = [s for j, s in enumerate(scores) if j != i]
        out.append(sum(1.0 if mine > s else 0.5 if mine == s else 0.0 for s in others) / len(others))
    return out


def test_actor_pairwise_group_calls_rubric_and_votes(ray_cluster):
    import ray

    from nemo_genrm.environment import GenRMEnvironment

    def rule(body: dict) -> str:
        text = StandInServer.user_text(body)
        if "kw:coin" in text:
            return seeded_verdict(text, body.get("seed"))
        if "Criterion:" in text:
            return criterion_in_response(text)
        return more_working_wins(text)

    with StandInServer(rule) as server:
        pairwise = {"mode": "pairwise_group", "pairwise_group": {"group_size": 4, "group_wait_ms": 20000}}
        rubric_votes = {"mode": "rubric", "votes": 5}
        actors = {
            "pairwise": GenRMEnvironment.remote(_section(server.base_url, pairwise)),
            "rubric": GenRMEnvironment.remote(
                _section(server.base_url, rubric_votes, sampling={"temperature": 0.9, "seed": 3})
            ),
        }
        try:
            # 4 groups of 4, one call per group, all in flight at once.
            refs = [
                actors["pairwise"].step.remote([_log(RESPONSES[(i + g) % 4], f"Q{g}?") for i in range(4)], [{}] * 4)
                for g in range(4)
            ]
            pairwise_rewards = {
                (g, i): reward
                for g, r in enumerate(ray.get(refs, timeout=120))
                for i, reward in enumerate(r.rewards.tolist())
            }
            with pytest.raises(Exception, match="vllm_cfg.async_engine"):  # one response per call (ConfigError)
                ray.get(actors["pairwise"].step.remote([_log(RESPONSES[0], "Q0?")], [{}]), timeout=120)

            proof = "Because p^2 = 2q^2 the parity argument gives a contradiction. Answer: irrational"
            items = [{"criterion": "kw:contradiction", "weight": 2}, "kw:parity", "kw:induction"]
            values = list(range(1, 11))
            logs = [_log(proof, "Prove it.")] + [_log(f"Answer: ans-{v}", "Pick.") for v in values]
            metas = [{"rubric": items}] + [{"rubric": ["kw:coin"]}] * len(values)
            rubric = ray.get(actors["rubric"].step.remote(logs, metas), timeout=120)
            votes_metrics = ray.get(actors["rubric"].last_metrics.remote())
        finally:
            ray.get([a.shutdown.remote() for a in actors.values()])
            for actor in actors.values():
                ray.kill(actor)

    for g in range(4):
        scores = [working(RESPONSES[(i + g) % 4]) for i in range(4)]
        assert [pairwise_rewards[g, i] for i in range(4)] == pytest.approx(_win_rates(scores)), g
    majority = [1.0 if 2 * sum(seeded_bit(v, 3 + k) for k in range(5)) > 5 else 0.0 for v in values]
    assert rubric.rewards.tolist() == pytest.approx([0.75] + majority)
    assert votes_metrics["genrm/votes/agreement"] < 1.0
    assert sorted({b["seed"] for b in server.bodies if "seed" in b}) == [3, 4, 5, 6, 7]
