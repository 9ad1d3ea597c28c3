"""Per-sample ``step`` calls (NeMo-RL's async rollout): one after another vs concurrent, coalesced.

The same GRPO-shaped samples (``--prompts`` questions x ``--generations`` answers, the
``grpo_mixed`` shape of ``bench_dedup.py``) reach the environment three ways:

- ``one_step``: one ``step`` call with every sample (the synchronous rollout);
- ``sequential``: one single-sample ``step`` call after another (a plain actor runs one call at
  a time: every sample is its own judge call, dedup never fires);
- ``concurrent``: every single-sample call at once from its own thread (the threaded actor):
  the calls share judge calls (``coalesce.max_wait_ms``, default window).

The environment runs in process on the real dtensor engine with a tiny judge (no Ray), so the
figures isolate the coalescing; judge calls and prompts are counted at the engine. Settings run
in alternation, and the rewards of every setting must agree.

    uv run python bench/bench_coalesce.py
    uv run python bench/bench_coalesce.py --prompts 32 --generations 8 --repeats 3
"""

from __future__ import annotations

import argparse
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import alternate, median, offline, write_result  # noqa: E402
from bench_dedup import _batch as grpo_batch  # noqa: E402

offline()

from nemo_genrm.config import JudgeConfig  # noqa: E402
from nemo_genrm.env.environment import GenRMEnvironmentImpl  # noqa: E402
from nemo_genrm.judges.transformers import LocalTransformersJudge  # noqa: E402
from nemo_genrm.testing import cached_tiny_judge  # noqa: E402


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16, help="questions")
    parser.add_argument("--generations", type=int, default=8, help="answers per question (GRPO group)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per setting")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="result file (default bench/results/coalesce.json)")
    return parser.parse_args()


def main() -> None:
    args = _args()
    logs, meta = grpo_batch("grpo_mixed", args.prompts, args.generations, random.Random(args.seed))
    model = str(cached_tiny_judge("1"))
    worker = LocalTransformersJudge(JudgeConfig(model_name=model, precision="float32", max_model_len=1024))
    env = GenRMEnvironmentImpl(
        {"judge": worker.config.model_dump(), "resources": {"gpus_per_replica": 0}}, judge=worker
    )
    pool = ThreadPoolExecutor(max_workers=len(logs))

    def counted(fn):
        def run():
            before = worker.stats()
            rewards = fn()
            after = worker.stats()
            calls = after.generate_calls - before.generate_calls
            return {
                "engine_calls": calls,
                "prompts": after.prompts_generated - before.prompts_generated,
                "rewards": rewards,
            }

        return run

    def one_step():
        return env.step(logs, meta).rewards.tolist()

    def sequential():
        return [env.step([log], [m]).rewards.item() for log, m in zip(logs, meta, strict=True)]

    def concurrent():
        futures = [pool.submit(env.step, [log], [m]) for log, m in zip(logs, meta, strict=True)]
        return [f.result().rewards.item() for f in futures]

    fns = {"one_step": counted(one_step), "sequential": counted(sequential), "concurrent": counted(concurrent)}
    times, last = alternate(fns, args.repeats)
    pool.shutdown()
    worker.shutdown()
    reference = last["one_step"]["rewards"]
    for name, out in last.items():
        if out.pop("rewards") != reference:
            raise RuntimeError(f"{name} gave other rewards than one step over the same samples")
    rows = {name: {**last[name], "wall_s": median(times[name]), "wall_s_runs": times[name]} for name in fns}
    ratios = {
        "sequential_over_concurrent_wall": rows["sequential"]["wall_s"] / rows["concurrent"]["wall_s"],
        "concurrent_over_one_step_wall": rows["concurrent"]["wall_s"] / rows["one_step"]["wall_s"],
        "sequential_over_concurrent_prompts": rows["sequential"]["prompts"] / rows["concurrent"]["prompts"],
    }
    print(f"{len(logs)} samples, {args.repeats} runs each (median wall time)")
    print(f"{'setting':<11} {'engine calls':>12} {'prompts':>8} {'wall s':>8}")
    for name, row in rows.items():
        print(f"{name:<11} {row['engine_calls']:>12} {row['prompts']:>8} {row['wall_s']:>8.3f}")
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}")
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "samples": len(logs),
        "prompts": args.prompts,
        "generations": args.generations,
        "repeats": args.repeats,
        "coalesce": env.cfg.coalesce.model_dump(),
        "rows": rows,
        "ratios": ratios,
    }
    print(f"wrote {write_result('coalesce', result, args.out)}")


if __name__ == "__main__":
    main()
