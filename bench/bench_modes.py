"""Cost of each reward mode: judge prompts and time per GRPO step, against reference mode.

Per group size G (4, 8, 16), one GRPO-shaped batch (``--prompts`` questions x G responses, final
answers drawn with repeats as a policy gives them) is judged by every mode side by side,
alternating (A B C ... A B C ...) so drifting load hits each alike:

- ``reference``: one prompt per distinct (question, reference, answer);
- ``reference_swap``: the same in both candidate/reference orders;
- ``reference_votes3``: three samples per prompt at temperature 0.7, majority;
- ``pairwise_group``: both orders of every pair (groups of at most 8 distinct answers), else of
  4 random opponents per answer;
- ``pairwise_all_pairs``: both orders of every pair whatever the size (the O(G^2) cost);
- ``rubric3``: three rubric items per sample.

The environment runs in process on the real dtensor engine with tiny fixed-verdict judges
(CPU unless a GPU is there), so the figures are the judge work each mode asks for and the
environment's own overhead; prompts are counted at the engine.

    uv run python bench/bench_modes.py
    uv run python bench/bench_modes.py --prompts 8 --repeats 7
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, offline, write_result  # noqa: E402

offline()

from nemo_genrm.config import JudgeConfig  # noqa: E402
from nemo_genrm.env.environment import GenRMEnvironmentImpl  # noqa: E402
from nemo_genrm.judges.transformers import LocalTransformersJudge  # noqa: E402
from nemo_genrm.testing import cached_tiny_judge  # noqa: E402

GROUP_SIZES = (4, 8, 16)
# mode name -> (fixed judge reply, reward section, judge sampling temperature)
MODES: dict[str, tuple[str, dict[str, Any], float]] = {
    "reference": ("1", {}, 0.0),
    "reference_swap": ("1", {"swap": True}, 0.0),
    "reference_votes3": ("1", {"votes": 3}, 0.7),
    "pairwise_group": ("[[A]]", {"mode": "pairwise_group"}, 0.0),
    "pairwise_all_pairs": ("[[A]]", {"mode": "pairwise_group", "pairwise_group": {"all_pairs_up_to": 16}}, 0.0),
    "rubric3": ("1", {"mode": "rubric"}, 0.0),
}
RUBRIC = ["states a final answer", "shows the working", {"criterion": "the answer is a whole number", "weight": 2}]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4, help="questions per GRPO step")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per mode and group size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="result file (default bench/results/modes.json)")
    return parser.parse_args()


def _batch(prompts: int, group: int, rng: random.Random) -> tuple[list, list]:
    logs, metas = [], []
    for q in range(prompts):
        truth = q * 7
        for _ in range(group):
            # Right 40% of the time, else one of many wrong answers: groups of 16 hold about 10
            # distinct answers, past all_pairs_up_to, as a policy early in training gives them.
            answer = truth if rng.random() < 0.4 else truth + rng.randint(1, 60)
            logs.append(
                [
                    {"role": "user", "content": f"Question {q}: what is 7 times {q}?"},
                    {"role": "assistant", "content": f"Seven times {q} gives {answer}. Answer: {answer}"},
                ]
            )
            metas.append({"ground_truth": str(truth), "rubric": RUBRIC})
    return logs, metas


def _env(workers: dict[str, LocalTransformersJudge], mode: str) -> tuple[GenRMEnvironmentImpl, LocalTransformersJudge]:
    reply, reward, temperature = MODES[mode]
    worker = workers[f"{reply}@{temperature}"]
    cfg = {"judge": worker.config.model_dump(), "resources": {"gpus_per_replica": 0}, "reward": reward}
    return GenRMEnvironmentImpl(cfg, judge=worker), worker


def _workers() -> dict[str, LocalTransformersJudge]:
    out = {}
    for reply, _, temperature in MODES.values():
        key = f"{reply}@{temperature}"
        if key not in out:
            judge = {"model_name": str(cached_tiny_judge(reply)), "precision": "float32", "max_model_len": 1024}
            judge["sampling"] = {"temperature": temperature, "max_new_tokens": 8}
            out[key] = LocalTransformersJudge(JudgeConfig.model_validate(judge))
    return out


def _measure_group(workers: dict, group: int, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    logs, metas = _batch(args.prompts, group, rng)
    envs = {mode: _env(workers, mode) for mode in MODES}
    for env, _ in envs.values():
        env.step(logs[:group], metas[:group])  # warm-up
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    prompts: dict[str, int] = {}
    for _ in range(args.repeats):
        for mode, (env, worker) in envs.items():
            before = worker.stats().prompts_generated
            t0 = time.perf_counter()
            env.step(logs, metas)
            times[mode].append(time.perf_counter() - t0)
            prompts[mode] = worker.stats().prompts_generated - before
    base_t, base_p = median(times["reference"]), prompts["reference"]
    return {
        "group_size": group,
        "samples": len(logs),
        "modes": {
            mode: {
                "judge_prompts": prompts[mode],
                "step_s": median(times[mode]),
                "prompts_ratio": prompts[mode] / base_p,
                "time_ratio": median(times[mode]) / base_t,
            }
            for mode in MODES
        },
    }


def main() -> None:
    args = _args()
    rng = random.Random(args.seed)
    workers = _workers()
    try:
        rows = [_measure_group(workers, group, args, rng) for group in GROUP_SIZES]
    finally:
        for worker in workers.values():
            worker.shutdown()
    print(f"{'G':>3} {'mode':<20} {'prompts':>8} {'x ref':>7} {'step s':>8} {'x ref':>7}")
    for row in rows:
        for mode, r in row["modes"].items():
            print(
                f"{row['group_size']:>3} {mode:<20} {r['judge_prompts']:>8} {r['prompts_ratio']:>7.2f} "
                f"{r['step_s']:>8.3f} {r['time_ratio']:>7.2f}"
            )
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "prompts": args.prompts,
        "repeats": args.repeats,
        "rows": rows,
    }
    print(f"wrote {write_result('modes', result, args.out)}")


if __name__ == "__main__":
    main()
