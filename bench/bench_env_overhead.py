"""Environment overhead: ``step`` through the Ray actor vs the bare judge engine, same prompts.

Both sides run the same dtensor judge pool layout (one CPU replica, its own placement group) on
the same judge prompts: the bare side calls ``judge.generate`` on prompts built up front, the
environment side calls ``GenRMEnvironment.step.remote`` on the raw conversations (answer
extraction, prompt rendering, dedup bookkeeping, the actor hop, parsing and the reward tensor
included). Runs alternate (each side going first half of the time), and the ratio of medians is reported (target <= 1.10).

    uv run python bench/bench_env_overhead.py                      # CPU, tiny fixed judge
    uv run python bench/bench_env_overhead.py --batch 512 --repeats 7 --hidden 256
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, offline, write_result  # noqa: E402

offline()

import ray  # noqa: E402

from nemo_genrm.config import GenRMConfig, validate  # noqa: E402
from nemo_genrm.env.environment import GenRMEnvironment  # noqa: E402
from nemo_genrm.judges import JudgeRequest, create_judge  # noqa: E402
from nemo_genrm.judges.placement import acquire_resources  # noqa: E402
from nemo_genrm.prompts import PromptBuilder  # noqa: E402
from nemo_genrm.testing import cached_tiny_judge  # noqa: E402


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256, help="samples per step (all distinct)")
    parser.add_argument("--repeats", type=int, default=6, help="timed runs per side")
    parser.add_argument("--hidden", type=int, default=64, help="tiny judge hidden size")
    parser.add_argument("--cpus", type=float, default=1.0, help="CPUs of the judge worker")
    parser.add_argument("--out", default=None, help="result file (default bench/results/env_overhead.json)")
    return parser.parse_args()


def _samples(n: int) -> tuple[list, list]:
    logs = [
        [
            {"role": "user", "content": f"Problem {i}: what is {i} + {i}?"},
            {"role": "assistant", "content": f"Adding the two numbers gives {2 * i}. Answer: {2 * i}"},
        ]
        for i in range(n)
    ]
    meta = [{"ground_truth": str(2 * i), "question": f"What is {i} + {i}?"} for i in range(n)]
    return logs, meta


def _bare_requests(cfg: GenRMConfig, logs: list, meta: list) -> list[JudgeRequest]:
    """The prompts the environment sends, built with the same builder."""
    builder = PromptBuilder(cfg.prompt, cfg.verdict)
    requests = []
    for log, m in zip(logs, meta, strict=True):
        answer = builder.extract(log[-1]["content"]).text
        prompt = builder.build(question=m["question"], reference=m["ground_truth"], candidate=answer)
        requests.append(JudgeRequest(prompt.messages, shrinkable=prompt.candidate))
    return requests


def main() -> None:
    args = _args()
    ray.init(num_cpus=max(4, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False)
    judge_path = str(cached_tiny_judge("1", hidden_size=args.hidden, num_heads=max(2, args.hidden // 32)))
    raw = {
        "judge": {"model_name": judge_path, "precision": "float32", "max_model_len": 1024},
        "resources": {"num_replicas": 1, "gpus_per_replica": 0, "cpus_per_replica": args.cpus},
    }
    cfg = validate(GenRMConfig, raw, prefix="env.genrm")
    logs, meta = _samples(args.batch)
    requests = _bare_requests(cfg, logs, meta)

    resources = acquire_resources(cfg.judge, cfg.resources)
    bare = create_judge(cfg.judge, resources.placement, fault_tolerance=cfg.fault_tolerance)
    env = GenRMEnvironment.remote(raw)
    try:
        bare.generate(requests[:8])  # warm both sides (first call pays lazy allocations)
        ray.get(env.step.remote(logs[:8], meta[:8]))
        bare_s, env_s, inside_s = [], [], []
        for i in range(args.repeats):
            # Alternate which side goes first so drift on a shared machine hits both alike.
            for side in ("bare", "env") if i % 2 == 0 else ("env", "bare"):
                t0 = time.perf_counter()
                if side == "bare":
                    texts = bare.generate(requests)
                    bare_s.append(time.perf_counter() - t0)
                else:
                    out = ray.get(env.step.remote(logs, meta))
                    env_s.append(time.perf_counter() - t0)
                    m = ray.get(env.last_metrics.remote())
                    inside_s.append(m["genrm/step_time_s"] - m["genrm/judge_latency_s"])
        if [g.text for g in texts] != ["1"] * args.batch or out.rewards.tolist() != [1.0] * args.batch:
            raise RuntimeError("the two sides disagree: not the same work")
    finally:
        ray.get(env.shutdown.remote())
        bare.shutdown()
        resources.release()
        ray.shutdown()

    bare_med, env_med = median(bare_s), median(env_s)
    ratio = env_med / bare_med
    inside_med = median(inside_s)
    print(
        f"{'samples':>8} {'bare engine s':>14} {'env step s':>11} {'ratio':>7} {'target':>8} {'env work outside judge s':>25}"
    )
    print(f"{args.batch:>8} {bare_med:>14.3f} {env_med:>11.3f} {ratio:>6.3f}x {'<=1.10x':>8} {inside_med:>25.4f}")
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "batch": args.batch,
        "repeats": args.repeats,
        "judge": {"hidden_size": args.hidden, "device": "cpu", "cpus": args.cpus},
        "bare_engine_s": bare_s,
        "env_step_s": env_s,
        "bare_median_s": bare_med,
        "env_median_s": env_med,
        "ratio": ratio,
        "env_outside_judge_s": inside_s,
        "env_outside_judge_median_s": inside_med,
        "target": 1.10,
        "meets_target": ratio <= 1.10,
    }
    print(f"wrote {write_result('env_overhead', result, args.out)}")


if __name__ == "__main__":
    main()
