"""Does the default run learn on every seed and thread count? The demo's GRPO run, swept.

Runs the default config (``examples/configs/grpo_genrm_tiny.yaml``: the learned demo judge, the
supervised demo policy, 64 GRPO steps) once per ``grpo.seed`` and per torch thread count of the
policy (``policy.cpu_threads``: floating-point sums, and so the whole trajectory, differ between
one and two threads), each run in a process of its own, the policy and the judge in that
process (no Ray: the loop, the policy worker, the environment and the judge are the driver's
own classes, so the figures are the entry point's up to where Ray places them). Prints, per run,
held-out exact match and reward at every validation, the final gain and the best validation by
the judge's reward, and writes ``bench/results/demo_learning.json``.

    uv run python bench/bench_demo_learning.py                      # seeds 42 1 2, threads 1 2
    uv run python bench/bench_demo_learning.py --seeds 42 --threads 1 grpo.max_num_steps=32
    uv run python bench/bench_demo_learning.py --merge a.json b.json   # runs split over processes

Several invocations may run side by side (each run is one process on its own thread count) and
their JSON files be merged into one with ``--merge``; the figures do not depend on the load,
only the times do.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import demo_run_inputs, offline, write_result  # noqa: E402

offline()


def run_one(seed: int, threads: int, overrides: list[str], log_dir: str) -> dict:
    """One run of the default config in this process; returns its validation records."""
    import torch

    from nemo_genrm.env.environment import GenRMEnvironmentImpl
    from nemo_genrm.grpo.logger import MetricsLogger
    from nemo_genrm.grpo.loop import GRPOTrainer
    from nemo_genrm.grpo.policy import PolicyWorker
    from nemo_genrm.judges.transformers import LocalTransformersJudge

    cfg, train, val = demo_run_inputs([f"grpo.seed={seed}", f"policy.cpu_threads={threads}", *overrides], log_dir)
    # The judge first: the policy seeds torch and sets its thread count last, as in its own actor.
    judge = LocalTransformersJudge(cfg.env.genrm.judge, num_threads=1)
    env = GenRMEnvironmentImpl(cfg.env.genrm, judge=judge)
    policy = PolicyWorker(cfg.policy, cfg.loss_fn, cfg.grpo.seed)
    assert torch.get_num_threads() == threads
    trainer = GRPOTrainer(cfg, policy, env, train, val, MetricsLogger(cfg.logger))
    start = time.perf_counter()
    try:
        summary = trainer.fit()
    finally:
        env.shutdown()
        judge.shutdown()
    records = [json.loads(line) for line in (Path(log_dir) / "metrics.jsonl").read_text().splitlines()]
    return {
        "seed": seed,
        "threads": threads,
        "seconds": time.perf_counter() - start,
        "exact_match": {r["step"]: r["val/exact_match"] for r in records if "val/exact_match" in r},
        "val_reward": {r["step"]: r["val/reward_mean"] for r in records if "val/reward_mean" in r},
        "train_reward": [r["train/reward_mean"] for r in records if "train/reward_mean" in r],
        "best_step": getattr(summary, "best_step", None),
    }


def _describe(run: dict) -> str:
    em = {int(k): v for k, v in run["exact_match"].items()}
    vr = {int(k): v for k, v in run["val_reward"].items()}
    steps = sorted(em)
    best = max(steps, key=lambda s: (vr[s], s))
    cells = " ".join(f"{em[s]:.3f}/{vr[s]:.3f}" for s in steps)
    return (
        f"seed {run['seed']:>3} threads {run['threads']}: EM {em[steps[0]]:.3f} -> {em[steps[-1]]:.3f} "
        f"(gain {em[steps[-1]] - em[steps[0]]:+.3f}), best val reward at step {best} "
        f"(EM {em[best]:.3f}) [{run['seconds']:.0f}s]\n    EM/reward per validation: {cells}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 1, 2])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", default=None, help="JSON path (default bench/results/demo_learning.json)")
    parser.add_argument("--merge", nargs="+", default=None, help="JSON files of earlier sweeps to merge")
    parser.add_argument("--one", nargs=3, metavar=("SEED", "THREADS", "JSON"), help=argparse.SUPPRESS)
    args, overrides = parser.parse_known_args()
    if args.one:
        seed, threads, out = int(args.one[0]), int(args.one[1]), args.one[2]
        with tempfile.TemporaryDirectory() as logs:
            Path(out).write_text(json.dumps(run_one(seed, threads, overrides, logs)))
        return
    if args.merge:
        parts = [json.loads(Path(f).read_text()) for f in args.merge]
        if len({json.dumps(p["overrides"]) for p in parts}) != 1:
            parser.error("the sweeps to merge ran different overrides")
        runs = [run for part in parts for run in part["runs"]]
        _report(runs, parts[0]["overrides"], args.out, [p["load"] for p in parts])
        return
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for threads in args.threads:
                out = Path(tmp) / f"{seed}-{threads}.json"
                # Passive OpenMP waits: on a shared machine, two spinning threads wait far longer
                # for each other than they compute (the numbers are the same either way).
                env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "PASSIVE"}
                cmd = [sys.executable, __file__, "--one", str(seed), str(threads), str(out), *overrides]
                subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
                runs.append(json.loads(out.read_text()))
                print(_describe(runs[-1]), flush=True)
    _report(runs, overrides, args.out, os.getloadavg())


def _report(runs: list[dict], overrides: list[str], out: str | None, load) -> None:
    for run in runs:
        run["exact_match"] = {str(k): v for k, v in run["exact_match"].items()}
    gains = [r["exact_match"][str(max(map(int, r["exact_match"])))] - r["exact_match"]["0"] for r in runs]
    print(f"final exact-match gain over {len(runs)} runs: {min(gains):+.3f} .. {max(gains):+.3f}")
    path = write_result("demo_learning", {"overrides": overrides, "runs": runs, "load": load}, out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
