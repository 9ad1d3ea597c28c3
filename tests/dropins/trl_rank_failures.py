"""One rank of a 2-process pairwise GenRMReward called as TRL calls it, without a trainer.

Usage: python -m torch.distributed.run --nproc_per_node 2 trl_rank_failures.py OUT_DIR BASE_URL

Started by test_trl_reward.py (torchrun, gloo on CPU). The reward is built before the process
group exists, as in a TRL script (GRPOConfig starts it). Each rank then holds 2 of a prompt's 4
completions and makes five calls at the same steps: a good one; one where rank 1's completions
hold no text to read (bad_input, a per-sample zero, no error); one where rank 1's completions are
no list at all; one where rank 0's question column cannot be pickled for the exchange; a good one
again; then a sixth with a second reward whose judge is gone for good (a dead URL),
which process 0 alone finds out. Each rank writes how many judges it built and each call's rewards, or its
error, to OUT_DIR/rank<r>.json. The process group's timeout is short, so that a rank left
waiting in a collective fails quickly instead of hanging the test.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
import threading
from pathlib import Path

import torch.distributed as dist
from dropins_support import count_judge_builds

from nemo_genrm.integrations.trl import GenRMReward
from nemo_genrm.testing.stand_in_judges import dead_base_url

PROMPT = [{"role": "user", "content": "Write about e."}]
TEXTS = (["e", "eee"], ["ee", "eeee"])  # rank 0's and rank 1's completions of the one prompt


def main(out_dir: str, base_url: str) -> None:
    built = count_judge_builds()
    section = {
        "judge": {"backend": "http", "model_name": "judge", "http": {"base_url": base_url, "max_retries": 0}},
        "resources": {"gpus_per_replica": 0},
        "reward": {"mode": "pairwise_group"},
    }
    reward = GenRMReward(section, name="pairwise", question_column="question")
    dead = {
        **section,
        "judge": {**section["judge"], "http": {"base_url": dead_base_url(), "max_retries": 0}},
        "fault_tolerance": {"unavailable_grace_s": 0},
    }
    gone = GenRMReward(dead, name="gone")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=15))
    rank = dist.get_rank()
    good = [[{"role": "assistant", "content": t}] for t in TEXTS[rank]]
    unreadable = [[{"role": "assistant", "content": [{"type": "text", "text": None}]}]] * 2  # bad_input
    calls = [
        {"completions": good},
        {"completions": unreadable if rank == 1 else good},
        {"completions": None if rank == 1 else good},  # list(None) fails in rank 1's slice
        {"completions": good, "question": [threading.Lock()] * 2 if rank == 0 else ["q", "q"]},
        {"completions": good},
    ]
    results = []
    for judge, call in [(reward, c) for c in calls] + [(gone, {"completions": good})]:
        try:
            rewards = asyncio.run(judge(prompts=[PROMPT] * 2, completion_ids=[[1]] * 2, **call))
            results.append({"rewards": rewards})
        except Exception as exc:  # noqa: BLE001 - recorded for the test to check
            results.append({"error": type(exc).__name__, "message": str(exc)})
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps({"built": len(built), "calls": results}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:3])
