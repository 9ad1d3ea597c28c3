"""verl's default V1 trainer: what its actor's loss reads after the advantages, with and without
``exclude_unmeasured_kv``.

The V1 trainer keeps each step's trajectories in TransferQueue. Its agent loop puts a
trajectory's ``uid``, ``response_mask``, ``rm_scores`` and ``extra_fields`` (the reward's
``reward_extra_info`` inside) there; ``PPOTrainer._compute_advantage`` reads the first three and
writes back ``advantages`` and ``returns``; the actor's loss (``ppo_loss``) reads
``response_mask`` and ``advantages`` from TransferQueue. Here verl's own
``PPOTrainerSync._compute_advantage`` runs on a real TransferQueue (on the tests' Ray cluster),
and the test reads back what the loss would.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transfer_queue", reason="needs verl's trainer extra (ci/dropins/requirements.txt)")

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

pytestmark = pytest.mark.dropins

SCORES = [1.0, 0.0, 0.0, 1.0]  # one GRPO group of 4; the third is a judge failure


@pytest.fixture(scope="module")
def transfer_queue(ray_cluster):
    import transfer_queue as tq

    tq.init()
    yield tq
    tq.close()


def _put(tq, step: str) -> list[str]:
    """The group's 4 trajectories, as verl's V1 agent loop puts them (key ``{uid}_{session}_{index}``)."""
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    keys, fields = [], []
    for session, score in enumerate(SCORES):
        rm_scores = torch.zeros(3)  # [R]: the score on the last token
        rm_scores[-1] = score
        failed = float(session == 2)
        keys.append(f"{step}_{session}_0")
        fields.append(
            {
                "uid": step,
                "response_mask": torch.ones(3, dtype=torch.long),
                "rm_scores": rm_scores,
                "extra_fields": {"reward_extra_info": {"genrm_judge_failed": failed, "genrm_masked": 0.0}},
            }
        )
    tq.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=[{}] * 4)
    return keys


def _trainer():
    """verl's sync V1 trainer, with just the config ``_compute_advantage`` reads (GRPO at its defaults)."""
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    trainer = object.__new__(PPOTrainerSync)
    trainer.config = OmegaConf.create(
        {
            "algorithm": {
                "adv_estimator": "grpo",
                "gamma": 1.0,
                "lam": 1.0,
                "use_kl_in_reward": False,
                "norm_adv_by_std_in_grpo": True,
                "rollout_correction": None,
            },
            "actor_rollout_ref": {"rollout": {"n": 4}},
        }
    )
    return trainer


@pytest.mark.parametrize("exclude", [False, True], ids=["as verl runs by default", "exclude_unmeasured_kv"])
def test_what_the_actors_loss_reads_after_the_advantages(transfer_queue, exclude):
    """Scores 1, 0, 0, 1 with the third a judge failure. By default it is a wrong answer: GRPO
    (unbiased std) gives +-(1/2)/sqrt(1/3) = +-0.866 and its mask stays 1, so its tokens train.
    Excluded first: the group is 1, 0, 1 (1/sqrt(3), -2/sqrt(3)), the failure's advantage is 0 and
    the response_mask the loss reads is 0."""
    from transfer_queue import KVBatchMeta

    from nemo_genrm.integrations.verl_manager import exclude_unmeasured_kv

    keys = _put(transfer_queue, "excluded" if exclude else "default")
    batch = KVBatchMeta(partition_id="train", keys=keys, tags=[{}] * 4)
    if exclude:
        assert exclude_unmeasured_kv(batch) == 1
    _trainer()._compute_advantage(batch, {})
    read = transfer_queue.kv_batch_get(keys=keys, partition_id="train", select_fields=["advantages", "response_mask"])
    advantages = [row[-1].item() for row in read["advantages"].unbind()]
    masks = [row.tolist() for row in read["response_mask"].unbind()]
    up, down = (1 / 3**0.5, -2 / 3**0.5) if exclude else (0.5 * 3**0.5, -0.5 * 3**0.5)
    assert advantages == pytest.approx([up, down, 0.0 if exclude else down, up], abs=1e-4)
    assert masks == [[1, 1, 1], [1, 1, 1], [0, 0, 0] if exclude else [1, 1, 1], [1, 1, 1]]
    transfer_queue.kv_clear(keys=keys, partition_id="train")
