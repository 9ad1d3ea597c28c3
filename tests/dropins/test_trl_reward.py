"""GenRMReward inside TRL's real GRPOTrainer: a tiny policy trains a few steps on CPU.

The call shapes alone are checked in test_dropin_core.py, without TRL.

Runs where TRL is installed (CI: the environment ci/dropins/ builds); skipped elsewhere.
"""

from __future__ import annotations

import math

import pytest

trl = pytest.importorskip("trl", reason="needs TRL (CI installs it in .venv-dropins from ci/dropins/requirements.txt)")

from dropins_support import GENRM_SECTION, RuleJudge  # noqa: E402

from nemo_genrm.integrations.trl import GenRMReward  # noqa: E402
from nemo_genrm.testing import cached_tiny_model  # noqa: E402

pytestmark = pytest.mark.dropins


class Recording(GenRMReward):
    """GenRMReward that keeps what TRL passed and what it returned."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[list, list, list]] = []

    async def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        out = await super().__call__(prompts, completions, completion_ids, **kwargs)
        self.calls.append((list(prompts), list(completions), out))
        return out


def test_grpo_trainer_trains_with_the_judge_reward(tmp_path, tiny_cache_dir):
    """TRL's GRPOTrainer awaits the reward, turns judge failures into NaN and keeps training."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model_path = cached_tiny_model(cache_dir=tiny_cache_dir)
    reward = Recording(GENRM_SECTION, judge=RuleJudge())
    questions = ["Say RIGHT.", "Say anything.", "CONFUSE the judge.", "Count the a's."]
    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": q}], "ground_truth": "4"} for q in questions]
    )
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        max_steps=3,
        per_device_train_batch_size=16,  # every question, 4 completions each, every step
        num_generations=4,
        max_completion_length=8,
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        seed=0,
        bf16=False,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(model=str(model_path), reward_funcs=[reward], args=args, train_dataset=data)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()

    assert trainer.state.global_step == 3
    samples = [
        (prompt[-1]["content"], completion[-1]["content"], out)
        for prompts, completions, outs in reward.calls
        for prompt, completion, out in zip(prompts, completions, outs, strict=True)
    ]
    assert len(reward.calls) == 3 and len(samples) == 48
    # The rule the stand-in judge follows, seen from TRL's side: RIGHT in the question gives 1,
    # CONFUSE makes the judge fail (None, NaN in TRL), an empty answer is not judged (0.0).
    for question, completion, out in samples:
        if not completion.strip():
            assert out == 0.0
        elif "CONFUSE" in question:
            assert out is None
        elif "RIGHT" in question:
            assert out == 1.0
        else:
            assert out in (0.0, 1.0)
    assert any(out is None for _, _, out in samples), "the CONFUSE prompt makes the judge fail"
    logged = [entry for entry in trainer.state.log_history if "rewards/genrm/mean" in entry]
    assert logged and all(not math.isnan(entry["rewards/genrm/mean"]) for entry in logged)
    assert any("genrm/num_samples" in entry for entry in trainer.state.log_history)
    changed = any(not p.detach().equal(before[n]) for n, p in trainer.model.named_parameters())
    assert changed, "three GRPO steps with reward variance must move the policy"
