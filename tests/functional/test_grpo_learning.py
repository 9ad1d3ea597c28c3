"""GRPO raises the reward of a rule-based environment: the update has the right sign and scale.

The environment pays 1 when the response starts with a target letter and 0 otherwise. The target
is the letter that the untrained tiny policy puts first in about one response out of ten, so
the reward starts low but not at zero (a reward that never occurs gives no signal). A correct
GRPO update must push the rate up within a few dozen steps; a wrong sign would push it to 0.
"""

from __future__ import annotations

import collections
import json
import statistics
import string

import pytest
import torch

from nemo_genrm.grpo.config import GRPOMasterConfig
from nemo_genrm.grpo.data import PolicyPromptRenderer, builtin_arithmetic
from nemo_genrm.grpo.logger import MetricsLogger
from nemo_genrm.grpo.loop import GRPOTrainer
from nemo_genrm.grpo.models import resolve_model_name
from nemo_genrm.grpo.policy import PolicyWorker
from nemo_genrm.samples.types import EnvironmentReturn

STEPS = 15


class StartsWithEnv:
    """Reward 1.0 when the last assistant message starts with ``prefix``."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.calls = 0

    def step(self, message_log_batch, metadata):
        self.calls += 1
        texts = [log[-1]["content"] for log in message_log_batch]
        rewards = torch.tensor([float(t.startswith(self.prefix)) for t in texts])  # [B]
        size = len(texts)
        return EnvironmentReturn(
            observations=[{"role": "environment", "content": ""}] * size,
            metadata=list(metadata),
            next_stop_strings=[None] * size,
            rewards=rewards,
            terminateds=torch.ones(size, dtype=torch.bool),
            answers=texts,
        )


def _config(tmp_path, model_path: str) -> GRPOMasterConfig:
    return GRPOMasterConfig.model_validate(
        {
            "grpo": {"num_prompts_per_step": 4, "num_generations_per_prompt": 8, "max_num_steps": STEPS, "seed": 0},
            "loss_fn": {"reference_policy_kl_penalty": 0.01},
            "policy": {
                "model_name": model_path,
                "precision": "float32",
                "device": "cpu",
                "cpu_threads": 1,  # tiny matrices: more threads only add synchronisation
                "train_global_batch_size": 16,  # two optimizer steps per GRPO step
                "train_micro_batch_size": 8,
                "generation": {"max_new_tokens": 3},
                "optimizer": {"kwargs": {"lr": 3.0e-4}},
            },
            # The env section is required by the config; this test passes its own environment.
            "env": {"genrm": {"judge": {"model_name": "unused"}, "resources": {"gpus_per_replica": 0}}},
            "cluster": {"gpus_per_node": 0},
            "logger": {"log_dir": str(tmp_path / "logs"), "tensorboard_enabled": False, "progress_bar": False},
            "checkpointing": {"enabled": False},
        }
    )


def _pick_target(policy: PolicyWorker, prompts) -> tuple[str, float]:
    """The ASCII letter the untrained policy starts with closest to 10% of the time."""
    samples = policy.generate([p.text for p in prompts for _ in range(8)])
    firsts = collections.Counter(s.text[:1] for s in samples)
    rates = {c: n / len(samples) for c, n in firsts.items() if c and c in string.ascii_letters}
    usable = {c: r for c, r in rates.items() if 0.02 <= r <= 0.3}
    if not usable:
        pytest.fail(f"no letter starts 2-30% of the untrained responses: {firsts.most_common(10)}")
    target = min(usable, key=lambda c: abs(usable[c] - 0.1))
    return target, usable[target]


@pytest.fixture
def restore_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
@pytest.mark.usefixtures("restore_torch_threads")
def test_grpo_raises_the_reward_of_a_rule_based_env(tmp_path, tiny_cache_dir):
    cfg = _config(tmp_path, resolve_model_name("tiny://policy"))
    policy = PolicyWorker(cfg.policy, cfg.loss_fn, seed=0)
    prompts = [PolicyPromptRenderer(cfg.data, policy.tokenizer)(e) for e in builtin_arithmetic(32, seed=0)]
    target, initial_rate = _pick_target(policy, prompts[:8])
    env = StartsWithEnv(target)
    metrics_logger = MetricsLogger(cfg.logger)
    trainer = GRPOTrainer(cfg, policy, env, prompts, [], metrics_logger)

    summary = trainer.fit()
    metrics_logger.close()

    rewards = summary.train_rewards
    assert len(rewards) == STEPS and env.calls == STEPS
    early, late = statistics.fmean(rewards[:3]), statistics.fmean(rewards[-5:])
    assert late >= 0.6, f"target {target!r}: rewards did not rise enough: {[round(r, 2) for r in rewards]}"
    assert late >= max(initial_rate, early) + 0.3, f"target {target!r}: {[round(r, 2) for r in rewards]}"
    # The logged file has one record per step with the loss terms and the step timeline.
    lines = (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == STEPS


@pytest.mark.usefixtures("restore_torch_threads")
def test_a_resumed_run_continues_exactly_where_it_stopped(tmp_path, tiny_cache_dir):
    # 3 steps in one go versus 2 steps, a checkpoint, and a fresh process state resuming for the
    # third: the third step must be identical (weights, optimizer, data position and RNG restored).
    from nemo_genrm.grpo.checkpoint import Checkpointer

    model = resolve_model_name("tiny://policy")

    def run(steps: int, folder: str, seed_noise: int) -> list[dict]:
        cfg = _config(tmp_path / folder, model)
        cfg.grpo.max_num_steps = steps
        cfg.checkpointing.enabled = True
        cfg.checkpointing.save_period = 2
        cfg.checkpointing.resume = True  # the trainer continues what its folder holds
        cfg.checkpointing.checkpoint_dir = str(tmp_path / folder / "ckpt")
        torch.manual_seed(seed_noise)  # a resumed process starts from unrelated RNG state
        policy = PolicyWorker(cfg.policy, cfg.loss_fn, seed=0)
        prompts = [PolicyPromptRenderer(cfg.data, policy.tokenizer)(e) for e in builtin_arithmetic(16, seed=0)]
        metrics_logger = MetricsLogger(cfg.logger)
        GRPOTrainer(cfg, policy, StartsWithEnv("c"), prompts, [], metrics_logger, Checkpointer(cfg.checkpointing)).fit()
        metrics_logger.close()
        path = tmp_path / folder / "logs" / "metrics.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    straight = run(3, "straight", seed_noise=0)
    run(2, "resumed", seed_noise=0)
    resumed = run(3, "resumed", seed_noise=123)
    assert [r["step"] for r in resumed] == [1, 2, 3]
    for key in ("train/reward_mean", "train/loss", "train/kl", "train/grad_norm", "train/response_length_mean"):
        assert resumed[2][key] == pytest.approx(straight[2][key], rel=1e-5, abs=1e-7), key


@pytest.mark.usefixtures("restore_torch_threads")
def test_seeded_generation_repeats_its_draws_and_leaves_the_policys_stream_alone(tmp_path, tiny_cache_dir):
    # Validation samples with a seed of its own: the same draws every time (two validations
    # differ by the policy alone), and training's random stream is as if it had not run.
    cfg = _config(tmp_path, resolve_model_name("tiny://policy"))
    cfg.policy.generation.temperature = 2.0  # varied draws, so equal texts are no accident
    policy = PolicyWorker(cfg.policy, cfg.loss_fn, seed=0)
    prompts = [PolicyPromptRenderer(cfg.data, policy.tokenizer)(e).text for e in builtin_arithmetic(4, seed=0)] * 8
    torch.manual_seed(7)
    plain = [s.text for s in policy.generate(prompts)]
    torch.manual_seed(7)
    first = [s.text for s in policy.generate(prompts, seed=123)]
    second = [s.text for s in policy.generate(prompts, seed=123)]
    after = [s.text for s in policy.generate(prompts)]
    assert first == second
    assert after == plain  # the seeded calls drew nothing from the policy's own stream
    assert len(set(plain)) > 1 and first != plain
