"""One rank of a 2-process GRPOTrainer run on CPU (gloo), started by torchrun from test_trl_reward.py.

Usage: python -m torch.distributed.run --nproc_per_node 2 trl_two_processes.py OUT_DIR BASE_URL MODEL

Each process gets 2 of a prompt's 4 completions per step (per_device_train_batch_size 2,
num_generations 4), so every GRPO group is split between the two processes. The pairwise reward
asks the stand-in judge at BASE_URL; each rank writes what TRL passed its reward function, what
the function returned and how many judges it built to OUT_DIR/rank<r>.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from datasets import Dataset
from dropins_support import count_judge_builds
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from nemo_genrm.integrations.trl import GenRMReward


class Recording(GenRMReward):
    """GenRMReward that keeps the texts TRL passed and the rewards it returned."""

    calls: list[dict] = []

    async def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        out = await super().__call__(prompts, completions, completion_ids, **kwargs)
        texts = [c[-1]["content"] for c in completions]
        self.calls.append({"prompts": [p[-1]["content"] for p in prompts], "completions": texts, "rewards": out})
        return out


def main(out_dir: str, base_url: str, model: str) -> None:
    section = {
        "judge": {"backend": "http", "model_name": "judge", "http": {"base_url": base_url, "max_retries": 0}},
        "resources": {"gpus_per_replica": 0},
        "reward": {"mode": "pairwise_group"},
    }
    built = count_judge_builds()
    reward = Recording(section, name="pairwise")  # before the trainer starts torch.distributed, as usual
    tokenizer = AutoTokenizer.from_pretrained(model)
    # Completions of three tokens drawn from "e", "a" and ".": the judge counts the e's.
    allowed = {tokenizer.convert_tokens_to_ids(t) for t in ("e", "a", ".")}
    args = GRPOConfig(
        output_dir=str(Path(out_dir) / "out"),
        use_cpu=True,
        max_steps=2,
        per_device_train_batch_size=2,
        num_generations=4,
        max_completion_length=3,
        temperature=4.0,
        generation_kwargs={"suppress_tokens": [i for i in range(len(tokenizer)) if i not in allowed]},
        learning_rate=1e-6,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        seed=0,
        bf16=False,
        dataloader_num_workers=0,
    )
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Write about topic {k}."}]} for k in range(4)])
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=data)
    trainer.train()
    rank = trainer.accelerator.process_index
    Path(out_dir, f"rank{rank}.json").write_text(
        json.dumps({"world": trainer.accelerator.num_processes, "calls": reward.calls, "built": len(built)})
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
