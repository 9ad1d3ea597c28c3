"""Dedup saving on GRPO-shaped batches: judge prompts sent and step time, dedup on vs off.

Two batch shapes, each ``--prompts`` questions x ``--generations`` answers per question:

- ``grpo_mixed``: each generation's final answer is drawn from a few candidates per question
  (a skewed draw, as a policy that mostly agrees with itself), so repeats are common but not total;
- ``k_identical``: every generation of a question gives the same answer (k = generations), the
  case where dedup should cost about 1/k of the judge work.

The environment runs in process on the real dtensor engine (no Ray), so the figures isolate the
dedup itself; prompts sent are counted at the engine (``stats().prompts_generated``).

    uv run python bench/bench_dedup.py
    uv run python bench/bench_dedup.py --prompts 64 --generations 8 --repeats 3
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, offline, write_result  # noqa: E402

offline()

from nemo_genrm.config import JudgeConfig  # noqa: E402
from nemo_genrm.env.environment import GenRMEnvironmentImpl  # noqa: E402
from nemo_genrm.judges.transformers import LocalTransformersJudge  # noqa: E402
from nemo_genrm.testing import cached_tiny_judge  # noqa: E402


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32, help="questions per batch")
    parser.add_argument("--generations", type=int, default=8, help="answers per question (GRPO group)")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per setting")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="result file (default bench/results/dedup.json)")
    return parser.parse_args()


def _batch(shape: str, prompts: int, generations: int, rng: random.Random) -> tuple[list, list]:
    logs, meta = [], []
    for q in range(prompts):
        truth = str(q * 3)
        candidates = [truth, str(q * 3 + 1), str(q * 3 - 1), f"{q * 3}.0"]
        for _ in range(generations):
            if shape == "k_identical":
                answer = truth
            else:  # mostly the right answer, sometimes one of three others
                answer = rng.choices(candidates, weights=[0.6, 0.2, 0.1, 0.1])[0]
            logs.append(
                [
                    {"role": "user", "content": f"Question {q}: triple {q}."},
                    {"role": "assistant", "content": f"Three times {q} is {answer}. Answer: {answer}"},
                ]
            )
            meta.append({"ground_truth": truth, "question": f"What is 3 x {q}?"})
    return logs, meta


def _measure(worker: LocalTransformersJudge, cfg: dict, dedup: bool, logs: list, meta: list, repeats: int) -> dict:
    env = GenRMEnvironmentImpl({**cfg, "reward": {"dedup": dedup}}, judge=worker)
    env.step(logs[:4], meta[:4])  # warm-up
    times, sent = [], []
    for _ in range(repeats):
        before = worker.stats().prompts_generated
        t0 = time.perf_counter()
        out = env.step(logs, meta)
        times.append(time.perf_counter() - t0)
        sent.append(worker.stats().prompts_generated - before)
    return {"prompts_sent": sent[0], "step_s": median(times), "rewards": out.rewards.tolist()}


def main() -> None:
    args = _args()
    rng = random.Random(args.seed)
    worker = LocalTransformersJudge(
        JudgeConfig(model_name=str(cached_tiny_judge("1")), precision="float32", max_model_len=1024)
    )
    cfg = {"judge": worker.config.model_dump(), "resources": {"gpus_per_replica": 0}}
    rows = []
    for shape in ("grpo_mixed", "k_identical"):
        logs, meta = _batch(shape, args.prompts, args.generations, rng)
        on = _measure(worker, cfg, True, logs, meta, args.repeats)
        off = _measure(worker, cfg, False, logs, meta, args.repeats)
        if on.pop("rewards") != off.pop("rewards"):
            raise RuntimeError("dedup changed the rewards")
        rows.append(
            {
                "shape": shape,
                "samples": len(logs),
                "dedup_on": on,
                "dedup_off": off,
                "prompts_ratio": on["prompts_sent"] / off["prompts_sent"],
                "time_ratio": on["step_s"] / off["step_s"],
            }
        )
    print(f"{'shape':<12} {'samples':>7} {'prompts on/off':>15} {'ratio':>6} {'step s on/off':>15} {'ratio':>6}")
    for r in rows:
        prompts = f"{r['dedup_on']['prompts_sent']}/{r['dedup_off']['prompts_sent']}"
        secs = f"{r['dedup_on']['step_s']:.2f}/{r['dedup_off']['step_s']:.2f}"
        print(
            f"{r['shape']:<12} {r['samples']:>7} {prompts:>15} {r['prompts_ratio']:>6.3f} {secs:>15} {r['time_ratio']:>6.3f}"
        )
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "prompts": args.prompts,
        "generations": args.generations,
        "repeats": args.repeats,
        "rows": rows,
    }
    print(f"wrote {write_result('dedup', result, args.out)}")
    worker.shutdown()


if __name__ == "__main__":
    main()
