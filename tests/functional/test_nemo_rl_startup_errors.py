"""Start-up problems of the GenRM environment reported by NeMo-RL's ``create_env``, not by the first
``step``: NeMo-RL's ``create_env`` returns before the actor has started its judge, so the driver
checks what it can first (judge folders, the judge's context, the placement). Each case: the
error is raised by ``create_env`` itself, names the setting, says what to do instead, and no
actor or placement group is left behind. Needs NeMo-RL."""

from __future__ import annotations

import re

import pytest
from nemo_rl_support import genrm_cfg

from nemo_genrm.errors import ConfigError

pytestmark = pytest.mark.nemo_rl


def _actors_alive(ray) -> int:
    # Ray's GCS record of every actor (the state API would need the dashboard, which tests leave off).
    return sum(a["State"] == "ALIVE" for a in ray._private.state.actors().values())


@pytest.fixture(scope="module")
def judge_path(tiny_cache_dir):
    from nemo_genrm.testing import cached_tiny_judge

    return str(cached_tiny_judge("1", cache_dir=tiny_cache_dir))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # A judge folder that does not exist: named, before any actor or judge worker starts.
        (
            lambda c: c["judge"].update(model_name="/no/such/judge"),
            [r"judge.model_name: no tokenizer could be loaded from '/no/such/judge': there is no such folder"],
        ),
        # Its context cannot hold the judge prompt: the numbers and the fix.
        (lambda c: c["judge"].update(max_model_len=40), [r"judge.max_model_len"]),
        # Colocated under NeMo-RL: no group exists yet, and its groups leave no room. The advice
        # leads away from colocated (separate + NeMo-RL's cluster block, or HTTP), never back to it.
        (
            lambda c: c["resources"].update(placement="colocated", gpus_per_replica=1),
            [r"no placement group to join", r"Use resources.placement: separate", r"cluster.gpus_per_node"],
        ),
        (
            lambda c: c["resources"].update(
                placement="colocated", gpus_per_replica=1, colocate_with="grpo_policy_cluster-node0"
            ),
            [r"no placement group named 'grpo_policy_cluster-node0' exists", r"Use resources.placement: separate"],
        ),
        # Every problem at once.
        (
            lambda c: (
                c["judge"].update(model_name="/no/such/judge"),
                c["resources"].update(placement="colocated", gpus_per_replica=1),
            ),
            [r"2 configuration problems", r"there is no such folder", r"no placement group to join"],
        ),
    ],
)
def test_create_env_reports_start_up_problems_itself(ray_cluster, judge_path, change, expected):
    import ray
    from nemo_rl.environments.utils import create_env

    from nemo_genrm.integrations.nemo_rl import register

    register()
    cfg = genrm_cfg(judge_path)
    change(cfg)
    before = (ray.util.placement_group_table(), _actors_alive(ray))
    with pytest.raises(ConfigError) as info:
        create_env("genrm", cfg)
    text = str(info.value)
    for pattern in expected:
        assert re.search(pattern, text), (pattern, text)
    assert "colocate_with to the policy group" not in text  # the advice that pointed back at itself
    assert (ray.util.placement_group_table(), _actors_alive(ray)) == before  # nothing started
