"""GRPO advantages and loss against values derived by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest
import torch

from nemo_genrm.grpo.config import LossFnConfig
from nemo_genrm.grpo.loss import clipped_pg_loss, compute_advantages, k3_kl, masked_mean

SQRT_1_3 = math.sqrt(1.0 / 3.0)  # 0.57735...


# ----------------------------------------------------------------------------------- advantages
def test_leave_one_out_baseline_without_normalisation():
    # Group [1, 0, 0, 1]; the baseline of sample i is the mean of the other three:
    #   r=1: others sum to 1 -> baseline 1/3 -> advantage 1 - 1/3 = +2/3
    #   r=0: others sum to 2 -> baseline 2/3 -> advantage 0 - 2/3 = -2/3
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0])
    adv = compute_advantages(rewards, 4, leave_one_out=True, normalize=False)
    torch.testing.assert_close(adv, torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3]))


def test_leave_one_out_with_std_normalisation():
    # Sample 0 (r=1): others [0, 0, 1], mean 1/3,
    #   unbiased var = ((1/3)^2 + (1/3)^2 + (2/3)^2) / (3 - 1) = (6/9) / 2 = 1/3, std = sqrt(1/3)
    #   advantage = (2/3) / sqrt(1/3) = 1.1547
    # Sample 1 (r=0): others [1, 0, 1], mean 2/3, var = ((1/3)^2 * 2 + (2/3)^2) / 2 = 1/3
    #   advantage = (-2/3) / sqrt(1/3) = -1.1547; samples 2 and 3 mirror 1 and 0.
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0])
    adv = compute_advantages(rewards, 4, leave_one_out=True, normalize=True, eps=0.0)
    a = (2 / 3) / SQRT_1_3
    torch.testing.assert_close(adv, torch.tensor([a, -a, -a, a]))


def test_zero_std_of_the_others_leaves_the_advantage_unnormalised():
    # Group [1, 0, 0, 0]:
    #   sample 0: others [0, 0, 0] -> baseline 0, std 0 -> advantage 1 - 0 = 1, not divided
    #   sample 1: others [1, 0, 0] -> baseline 1/3, var = ((2/3)^2 + 2 (1/3)^2) / 2 = 1/3
    #             advantage = (0 - 1/3) / sqrt(1/3) = -0.57735
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])
    adv = compute_advantages(rewards, 4, eps=0.0)
    b = -(1 / 3) / SQRT_1_3
    torch.testing.assert_close(adv, torch.tensor([1.0, b, b, b]))


@pytest.mark.parametrize("value", [0.0, 1.0, 0.37])
def test_all_equal_rewards_give_zero_advantages(value):
    # Every baseline equals the reward and every std is 0: nothing to learn from this group.
    rewards = torch.full((4,), value)
    for loo in (True, False):
        for norm in (True, False):
            adv = compute_advantages(rewards, 4, leave_one_out=loo, normalize=norm)
            torch.testing.assert_close(adv, torch.zeros(4))


def test_groups_are_independent():
    # Two prompts x 3 generations: [1, 0, 0] then [1, 1, 1] (all equal -> zeros).
    # First group, no normalisation: r=1 -> 1 - 0 = 1; r=0 -> 0 - (1 + 0)/2 = -0.5.
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    adv = compute_advantages(rewards, 3, normalize=False)
    torch.testing.assert_close(adv, torch.tensor([1.0, -0.5, -0.5, 0.0, 0.0, 0.0]))


def test_group_mean_baseline_with_normalisation():
    # Without leave-one-out, group [1, 0]: mean 0.5; unbiased std = sqrt((0.25 + 0.25) / 1) = 0.7071
    # advantages = +-0.5 / 0.7071 = +-0.7071
    adv = compute_advantages(torch.tensor([1.0, 0.0]), 2, leave_one_out=False, eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([math.sqrt(0.5), -math.sqrt(0.5)]))


def test_invalid_samples_leave_the_baseline_and_get_zero():
    # Group [1, 0, 1, 0] with the last sample invalid behaves as the group [1, 0, 1]:
    #   r=1: others [0, 1] -> baseline 0.5 -> +0.5;  r=0: others [1, 1] -> baseline 1 -> -1.
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0])
    valid = torch.tensor([True, True, True, False])
    adv = compute_advantages(rewards, 4, normalize=False, valid=valid)
    torch.testing.assert_close(adv, torch.tensor([0.5, -1.0, 0.5, 0.0]))
    # A group with one valid sample has no baseline at all: zeros.
    adv = compute_advantages(rewards, 4, valid=torch.tensor([True, False, False, False]))
    torch.testing.assert_close(adv, torch.zeros(4))


def test_advantages_reject_a_ragged_batch():
    with pytest.raises(ValueError, match="divisible"):
        compute_advantages(torch.zeros(5), 2)


# ---------------------------------------------------------------------------------------- loss
def _single_tokens(ratios, advantages):
    """One response token per sequence with old log-prob log(0.5) and the given ratios."""
    old = torch.full((len(ratios), 1), math.log(0.5))  # [B, 1]
    logp = (old + torch.log(torch.tensor(ratios)).unsqueeze(-1)).requires_grad_(True)  # [B, 1]
    return logp, old, torch.tensor(advantages), torch.ones(len(ratios), 1)


def test_ratio_is_clipped_on_both_sides():
    # clip 0.2 -> ratios kept in [0.8, 1.2]. Per token max(-A r, -A clip(r)):
    #   A=+1, r=1.5: max(-1.5, -1.2) = -1.2  (clipped above: no gradient)
    #   A=+1, r=0.5: max(-0.5, -0.8) = -0.5  (unclipped: gradient -r = -0.5)
    #   A=-1, r=1.5: max(+1.5, +1.2) = +1.5  (unclipped: gradient +r = +1.5)
    #   A=-1, r=0.5: max(+0.5, +0.8) = +0.8  (clipped below: no gradient)
    # token-level mean = (-1.2 - 0.5 + 1.5 + 0.8) / 4 = 0.15
    cfg = LossFnConfig(reference_policy_kl_penalty=0.0, ratio_clip_min=0.2, ratio_clip_max=0.2)
    logp, old, adv, mask = _single_tokens([1.5, 0.5, 1.5, 0.5], [1.0, 1.0, -1.0, -1.0])
    out = clipped_pg_loss(logp, old, adv, mask, cfg)
    torch.testing.assert_close(out.loss, torch.tensor(0.15))
    out.loss.backward()
    # d(-A r)/d logp = -A r, divided by the 4 tokens of the mean.
    torch.testing.assert_close(logp.grad.squeeze(-1), torch.tensor([0.0, -0.5 / 4, 1.5 / 4, 0.0]))
    assert out.metrics["clip_fraction"] == pytest.approx(1.0)  # every ratio is outside [0.8, 1.2]
    assert out.metrics["ratio"] == pytest.approx(1.0)  # (1.5 + 0.5 + 1.5 + 0.5) / 4


def test_asymmetric_clip_bounds():
    # ratio_clip_min 0.1, ratio_clip_max 0.3 -> [0.9, 1.3]:
    #   A=+1, r=1.5: max(-1.5, -1.3) = -1.3;  A=-1, r=0.5: max(0.5, 0.9) = 0.9; mean = -0.2
    cfg = LossFnConfig(reference_policy_kl_penalty=0.0, ratio_clip_min=0.1, ratio_clip_max=0.3)
    logp, old, adv, mask = _single_tokens([1.5, 0.5], [1.0, -1.0])
    out = clipped_pg_loss(logp, old, adv, mask, cfg)
    torch.testing.assert_close(out.loss, torch.tensor(-0.2))


def test_k3_kl_values():
    # d = ref - logp; k3 = exp(d) - d - 1
    #   p=0.5, ref=0.25: d = -ln 2 -> 0.5 + 0.693147 - 1 = 0.193147
    #   p=0.5, ref=1.0 : d = +ln 2 -> 2 - 0.693147 - 1 = 0.306853
    #   equal          : d = 0     -> 0
    logp = torch.log(torch.tensor([[0.5, 0.5, 0.3]]))
    ref = torch.log(torch.tensor([[0.25, 1.0, 0.3]]))
    torch.testing.assert_close(k3_kl(logp, ref), torch.tensor([[0.193147, 0.306853, 0.0]]), atol=1e-6, rtol=0)


def test_kl_penalty_is_added_per_token():
    # Ratio 1 and A=0, so the policy-gradient term is 0 and the loss is beta * k3.
    # Tokens: k3 = 0.193147 and 0.306853 -> mean 0.25; beta 0.1 -> 0.025
    cfg = LossFnConfig(reference_policy_kl_penalty=0.1)
    logp = torch.log(torch.tensor([[0.5, 0.5]]))
    ref = torch.log(torch.tensor([[0.25, 1.0]]))
    out = clipped_pg_loss(logp, logp.clone(), torch.zeros(1), torch.ones(1, 2), cfg, ref_logprobs=ref)
    torch.testing.assert_close(out.loss, torch.tensor(0.025))
    assert out.metrics["kl"] == pytest.approx(0.25, abs=1e-6)
    with pytest.raises(ValueError, match="ref_logprobs"):
        clipped_pg_loss(logp, logp, torch.zeros(1), torch.ones(1, 2), cfg)


def test_token_level_and_sequence_level_averaging_with_masks():
    # Ratio 1 everywhere, so the per-token loss is -A.
    #   sequence 0: A=+1, 3 response tokens -> per-token -1 (x3)
    #   sequence 1: A=-1, 1 response token  -> per-token +1 (x1); its other 2 positions are masked
    # token-level: (-1 -1 -1 +1) / 4 = -0.5
    # sequence-level: mean(-1, +1) = 0
    # token-level with a global normaliser of 8 tokens: (-3 + 1) / 8 = -0.25
    logp = torch.log(torch.full((2, 3), 0.5))
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    token = LossFnConfig(reference_policy_kl_penalty=0.0)
    seq = LossFnConfig(reference_policy_kl_penalty=0.0, token_level_loss=False)
    torch.testing.assert_close(clipped_pg_loss(logp, logp, adv, mask, token).loss, torch.tensor(-0.5))
    torch.testing.assert_close(clipped_pg_loss(logp, logp, adv, mask, seq).loss, torch.tensor(0.0))
    out = clipped_pg_loss(logp, logp, adv, mask, token, normaliser=8)
    torch.testing.assert_close(out.loss, torch.tensor(-0.25))
    # Sequence level with a global count of 4 sequences: (-1 + 1) / 4 = 0; masked tokens never count.
    torch.testing.assert_close(clipped_pg_loss(logp, logp, adv, mask, seq, normaliser=4).loss, torch.tensor(0.0))


def test_micro_batches_sum_to_the_global_mean():
    # Splitting a batch in two micro-batches, each divided by the global token count (5),
    # gives the same loss as the whole batch at once.
    torch.manual_seed(0)
    logp = torch.randn(4, 3).clamp(max=-0.1)
    old = logp + 0.05 * torch.randn(4, 3)
    adv = torch.tensor([1.0, -0.5, 0.25, 2.0])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 1, 1], [0, 0, 0]], dtype=torch.float32)
    cfg = LossFnConfig(reference_policy_kl_penalty=0.0)
    whole = clipped_pg_loss(logp, old, adv, mask, cfg).loss
    halves = (slice(0, 2), slice(2, 4))
    parts = sum(clipped_pg_loss(logp[s], old[s], adv[s], mask[s], cfg, normaliser=5.0).loss for s in halves)
    torch.testing.assert_close(parts, whole)


def test_masked_mean():
    # (1*1 + 2*0 + 3*1) / 2 = 2; with a normaliser of 4: 4 / 4 = 1
    values, mask = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 0.0, 1.0])
    assert masked_mean(values, mask).item() == pytest.approx(2.0)
    assert masked_mean(values, mask, 4).item() == pytest.approx(1.0)


# ------------------------------------------------------------------------- policy update, dropout
def test_a_dropout_model_has_ratio_one_at_the_first_update(tmp_path, tiny_cache_dir):
    # A checkpoint that asks for heavy dropout: logp_old is taken in eval mode and the training
    # forward in train mode, so unless the policy disables dropout the first ratio is not 1.
    import json
    import shutil

    from nemo_genrm.grpo.config import PolicyConfig
    from nemo_genrm.grpo.models import resolve_model_name
    from nemo_genrm.grpo.policy import PolicyWorker, TrainBatch

    model_dir = tmp_path / "dropout_model"
    shutil.copytree(resolve_model_name("tiny://policy"), model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    config["attention_dropout"] = 0.5
    (model_dir / "config.json").write_text(json.dumps(config))
    policy_cfg = PolicyConfig.model_validate(
        {
            "model_name": str(model_dir),
            "precision": "float32",
            "device": "cpu",
            "train_global_batch_size": 4,
            "train_micro_batch_size": 4,
            "generation": {"max_new_tokens": 4},
        }
    )
    threads = torch.get_num_threads()
    try:
        worker = PolicyWorker(policy_cfg, LossFnConfig(reference_policy_kl_penalty=0.0), seed=0)
        assert worker.model.config.attention_dropout == 0.0
        samples = worker.generate(["What is 2 + 3?"] * 4)
        batch = TrainBatch(
            prompt_ids=[s.prompt_ids for s in samples],
            response_ids=[s.response_ids for s in samples],
            advantages=[1.0, -1.0, 0.5, -0.5],
        )
        metrics = worker.train(batch)  # one optimizer step: every ratio is exp(0) = 1
    finally:
        torch.set_num_threads(threads)
    assert metrics["ratio"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["clip_fraction"] == 0.0
