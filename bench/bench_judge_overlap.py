"""What judging while generating saves in the GRPO driver's step time (separate judge, Ray).

Runs the driver (``examples/configs/grpo_genrm_tiny.yaml``: the policy and the judge in Ray
actors of their own, the judge ``separate``) for ``--steps`` steps with
``grpo.judge_while_generating`` off and on, in alternation (``--rounds`` each), from the same
seed: the same samples and rewards must come out both ways. With it on, each generation batch
(``policy.generation_batch_size`` samples; the demo's 128 samples a step make ``--batches`` of
them) goes to the environment as soon as it is sampled. Prints the mean step, generation and
judge times over the steps after the first of each run, and writes
``bench/results/judge_overlap.json``.

    uv run python bench/bench_judge_overlap.py
    uv run python bench/bench_judge_overlap.py --steps 4 --rounds 1 env.genrm.judge.sampling.max_new_tokens=32

What overlaps is bounded by the hardware: here the policy and the judge share two CPU cores
(with whatever else runs), so this measures the driver's mechanics and what is left to gain on
a shared CPU; on GPUs of their own the judge's time hides behind the next batch's sampling.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import offline, write_result  # noqa: E402

offline()

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "configs" / "grpo_genrm_tiny.yaml"
TIMES = ("timeline/step_s", "timeline/generation_s", "timeline/judge_s", "timeline/train_s")


def run_one(overlap: bool, steps: int, batches: int, overrides: list[str], log_dir: str) -> list[dict]:
    """One driver run; its per-step records."""
    from nemo_genrm.grpo.config import load_grpo_config
    from nemo_genrm.grpo.runner import build_run

    samples = 16 * 8  # the demo's prompts x generations per step
    cfg = load_grpo_config(
        CONFIG,
        [
            f"grpo.max_num_steps={steps}",
            f"grpo.judge_while_generating={'on' if overlap else 'off'}",
            f"policy.generation_batch_size={samples // batches}",
            f"logger.log_dir={log_dir}",
            "grpo.val_period=0",
            "grpo.val_at_start=false",
            "checkpointing.enabled=false",
            "logger.tensorboard_enabled=false",
            "logger.progress_bar=false",
            *overrides,
        ],
    )
    run = build_run(cfg)
    try:
        run.trainer.fit()
    finally:
        run.shutdown()
    return [json.loads(line) for line in (Path(log_dir) / "metrics.jsonl").read_text().splitlines()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2, help="runs of each mode, in alternation")
    parser.add_argument("--batches", type=int, default=4, help="generation batches a step")
    parser.add_argument("--out", default=None)
    args, overrides = parser.parse_known_args()
    runs: dict[str, list[list[dict]]] = {"off": [], "on": []}
    for _ in range(args.rounds):
        for mode in ("off", "on"):
            with tempfile.TemporaryDirectory() as logs:
                runs[mode].append(run_one(mode == "on", args.steps, args.batches, overrides, logs))
    rewards = {mode: [[r["train/reward_mean"] for r in run] for run in done] for mode, done in runs.items()}
    same = all(r == rewards["off"][0] for done in rewards.values() for r in done)
    summary = {}
    for mode, done in runs.items():
        steady = [r for run in done for r in run[1:]]  # the first step of a run warms up
        summary[mode] = {key: statistics.fmean(r[key] for r in steady) for key in TIMES}
    saved = 1 - summary["on"]["timeline/step_s"] / summary["off"]["timeline/step_s"]
    for mode in ("off", "on"):
        s = summary[mode]
        print(
            f"judge_while_generating {mode:>3}: step {s['timeline/step_s']:.2f} s (generation "
            f"{s['timeline/generation_s']:.2f}, judge waited for {s['timeline/judge_s']:.2f}, "
            f"train {s['timeline/train_s']:.2f})"
        )
    print(f"step time saved: {saved:.1%}; same rewards both ways: {same}")
    payload = {
        "args": vars(args),
        "overrides": overrides,
        "summary": summary,
        "step_time_saved": saved,
        "same_rewards": same,
        "runs": runs,
    }
    print(f"wrote {write_result('judge_overlap', payload, args.out)}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
