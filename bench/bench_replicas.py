"""Judge throughput with 2 replicas vs 1 (dtensor engine on Ray, CPU).

Both judges run at once on the same Ray cluster (one CPU per replica, torch with one thread per
replica) and are timed in alternation on the same prompts, so load drifts hit both alike; the
best run of each is compared (medians recorded too). Prints prompts/s of each and the ratio
(ideal 2x when the machine has two free cores), and writes ``bench/results/replicas.json``.

    uv run python bench/bench_replicas.py                 # 512 prompts, generate
    uv run python bench/bench_replicas.py --mode score    # one forward pass per prompt
    uv run python bench/bench_replicas.py --quick         # smoke run
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import alternate, judge_prompts, median, offline, write_result  # noqa: E402

offline()


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512, help="prompts per call")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per judge (best is kept)")
    parser.add_argument("--hidden", type=int, default=128, help="tiny judge hidden size")
    parser.add_argument("--layers", type=int, default=4, help="tiny judge layers")
    parser.add_argument("--mode", choices=["generate", "score"], default="generate")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="64 prompts, one timed run")
    parser.add_argument("--out", default=None)
    return parser.parse_args()


def main() -> int:
    args = _args()
    if args.quick:
        args.n, args.repeats = 64, 1
    import ray

    from nemo_genrm.judges import Placement, ReplicaPlacement, create_judge
    from nemo_genrm.testing import cached_tiny_model

    path = cached_tiny_model(
        hidden_size=args.hidden, num_layers=args.layers, num_heads=args.hidden // 32, num_kv_heads=args.hidden // 32
    )
    config = {
        "backend": "dtensor",
        "model_name": str(path),
        "precision": "float32",
        "max_model_len": 1024,
        "sampling": {"max_new_tokens": args.max_new_tokens},
        "batching": {"max_batch_size": 32, "max_tokens_per_batch": 65536},
    }
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    replica = ReplicaPlacement(num_gpus=0.0, num_cpus=1.0)
    judges = {
        "1 replica": create_judge(config, Placement((replica,))),
        "2 replicas": create_judge(config, Placement((replica, replica))),
    }
    prompts = judge_prompts(args.n)

    def call(judge):
        if args.mode == "score":
            return lambda: judge.score(prompts, ["1", "0"])
        return lambda: judge.generate(prompts)

    try:
        times, outputs = alternate({name: call(j) for name, j in judges.items()}, repeats=args.repeats)
        spread = judges["2 replicas"].stats().extra["chunks_per_replica"]
    finally:
        for judge in judges.values():
            judge.shutdown()
        ray.shutdown()
    same = outputs["1 replica"] == outputs["2 replicas"]
    # Best runs: the ones least disturbed by other load on the machine (medians are kept too).
    rates = {name: args.n / min(t) for name, t in times.items()}
    ratio = rates["2 replicas"] / rates["1 replica"]
    median_ratio = median(times["1 replica"]) / median(times["2 replicas"])
    for name, rate in rates.items():
        print(f"{name:>10}: {min(times[name]):7.3f} s per call (best), {rate:8.1f} prompts/s")
    print(f"throughput 2 replicas / 1 replica: {ratio:.2f}x (chunks per replica {spread}); identical outputs: {same}")
    path = write_result(
        "replicas",
        {
            "args": vars(args),
            "seconds": times,
            "prompts_per_s": rates,
            "ratio": ratio,
            "ratio_of_medians": median_ratio,
            "chunks_per_replica": spread,
            "identical_outputs": same,
        },
        args.out,
    )
    print(f"wrote {path}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
