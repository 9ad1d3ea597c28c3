"""Judged samples per second with 1, 2 and 4 judge replicas, each on its own simulated node.

One run starts Ray's multi-node test cluster (:class:`nemo_genrm.testing.cluster.SimulatedCluster`:
four judge nodes, each a raylet of its own), places three judges with the package's own
placement (``strategy: STRICT_SPREAD``, ``node_labels: {genrm-role: judge}``: 1, 2 and 4
replicas, one per node) and times the same environment ``step`` (the same distinct samples:
answer extraction, prompt building, fitting, dedup, dispatch over the replicas, verdicts,
rewards) on each, in alternation so load drifts hit all three alike.

The engine is a stand-in (:class:`nemo_genrm.testing.rule_workers.RuleWorker`) that answers by a
rule of the prompt after sleeping ``--chunk-ms`` per chunk: it holds no CPU, so N replicas could
run N chunks at once on any machine, and the ideal is exactly N times one replica. What keeps a
run from the ideal is the package's own work and coordination (the driver's fitting and
planning, Ray round trips, the hand-out of chunks, assembling rewards), which is what this
measures on CPU; the speed of real engines on real nodes is not. Every step's rewards are
checked against the rule's, computed by hand, on every layout.

The same step is also timed in process with an instant stand-in (no Ray, no engine time): the
step's own serial work, the part no number of replicas spreads.

Prints samples/s per layout and its ratio against one replica and against the ideal; writes
``bench/results/scale_out.json``.

    uv run python bench/bench_scale_out.py                    # 512 samples, 100 ms per chunk
    uv run python bench/bench_scale_out.py --quick            # smoke run
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import alternate, median, offline, write_result  # noqa: E402

offline()

LAYOUTS = (1, 2, 4)
JUDGE_NODE = {"genrm-role": "judge"}


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=512, help="distinct samples per step")
    parser.add_argument("--batch", type=int, default=8, help="prompts per chunk (judge.batching.max_batch_size)")
    parser.add_argument("--chunk-ms", type=float, default=100.0, help="stand-in engine time per chunk")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per layout")
    parser.add_argument("--quick", action="store_true", help="128 samples, 2 timed steps")
    parser.add_argument("--out", default=None, help="result file (default bench/results/scale_out.json)")
    return parser.parse_args()


def _samples(n: int) -> tuple[list, list, list[float]]:
    """``n`` distinct samples and their rewards by hand: 1 when ans-<i % 5> equals ans-<i % 3>."""
    logs = [
        [
            {"role": "user", "content": f"Question {i}: which value?"},
            {"role": "assistant", "content": f"Working it out step by step. Answer: ans-{i % 5}"},
        ]
        for i in range(n)
    ]
    meta = [{"ground_truth": f"ans-{i % 3}", "question": f"Question {i}: which value?"} for i in range(n)]
    return logs, meta, [float(i % 5 == i % 3) for i in range(n)]


def _environment(replicas: int, args: argparse.Namespace, tokenizer: str):
    from nemo_genrm.config import GenRMConfig, validate
    from nemo_genrm.env.environment import GenRMEnvironmentImpl
    from nemo_genrm.judges.placement import acquire_resources
    from nemo_genrm.judges.pooled import PooledJudge
    from nemo_genrm.testing.rule_workers import rule_worker_spec

    resources = {"gpus_per_replica": 0, "cpus_per_replica": 0.5, "num_replicas": replicas, "node_labels": JUDGE_NODE}
    if replicas > 1:
        resources.update(num_nodes=replicas, strategy="STRICT_SPREAD")
    cfg = validate(
        GenRMConfig,
        {
            "judge": {
                "model_name": tokenizer,
                "max_model_len": 1024,
                "sampling": {"max_new_tokens": 4},
                "batching": {"max_batch_size": args.batch},
            },
            "resources": resources,
            "fault_tolerance": {"step_timeout_s": 600.0},
        },
        prefix="env.genrm",
    )
    held = acquire_resources(cfg.judge, cfg.resources)
    judge = PooledJudge(
        cfg.judge,
        held.placement,
        fault_tolerance=cfg.fault_tolerance,
        spec=rule_worker_spec(delay_s=args.chunk_ms / 1000.0),
    )
    return GenRMEnvironmentImpl(cfg, judge=judge), judge, held


def _in_process(args: argparse.Namespace, tokenizer: str):
    """The same environment step with an instant stand-in engine in this process."""
    from nemo_genrm.config import JudgeConfig
    from nemo_genrm.env.environment import GenRMEnvironmentImpl
    from nemo_genrm.judges.fitting import PromptFitter
    from nemo_genrm.judges.pipeline import LocalRunner, PipelineJudge
    from nemo_genrm.testing.rule_workers import RuleWorker

    config = JudgeConfig(
        model_name=tokenizer,
        max_model_len=1024,
        sampling={"max_new_tokens": 4},
        batching={"max_batch_size": args.batch},
    )
    judge = PipelineJudge(config, LocalRunner(RuleWorker()), fitter=PromptFitter.for_judge(config))
    return GenRMEnvironmentImpl({"judge": config.model_dump(), "resources": {"gpus_per_replica": 0}}, judge=judge)


def main() -> int:
    args = _args()
    if args.quick:
        args.samples, args.repeats = 128, 2
    from nemo_genrm.testing import cached_tiny_tokenizer
    from nemo_genrm.testing.cluster import SimulatedCluster

    tokenizer = str(cached_tiny_tokenizer())
    logs, meta, expected = _samples(args.samples)
    cluster = SimulatedCluster()
    envs: dict[str, tuple] = {}
    started = time.perf_counter()
    try:
        cluster.start()
        for i in range(max(LAYOUTS)):
            cluster.add_node(f"judge{i + 1}", cpus=2, labels={**JUDGE_NODE, "zone": str(i)}, wait=False)
        cluster.wait_for_nodes()
        for n in LAYOUTS:
            envs[f"{n} replica{'s' * (n > 1)}"] = _environment(n, args, tokenizer)
        setup_s = time.perf_counter() - started
        nodes = {
            name: sorted(cluster.name_of(x) for x in judge.stats().extra["replica_nodes"])
            for name, (_, judge, _) in envs.items()
        }
        wrong: dict[str, int] = {}

        def step(name: str):
            def run():
                rewards = envs[name][0].step(logs, meta).rewards.tolist()
                wrong[name] = wrong.get(name, 0) + sum(r != e for r, e in zip(rewards, expected, strict=True))

            return run

        serial_env = _in_process(args, tokenizer)
        fns = {name: step(name) for name in envs}
        fns["in process"] = lambda: serial_env.step(logs, meta)
        times, _ = alternate(fns, repeats=args.repeats)
        serial_s = median(times.pop("in process"))
        chunks = {name: judge.pool.chunks_done() for name, (_, judge, _) in envs.items()}
    finally:
        for env, judge, held in envs.values():
            env.shutdown()
            judge.shutdown()
            held.release()
        left = cluster.shutdown()
    base_name = next(iter(envs))
    rates = {name: args.samples / median(t) for name, t in times.items()}
    per_chunk = math.ceil(args.samples / args.batch)
    rows = {}
    print(
        f"{args.samples} samples per step, {per_chunk} chunks of {args.batch}, {args.chunk_ms:g} ms per chunk "
        f"(stand-in engine), median of {args.repeats}; set-up {setup_s:.1f} s"
    )
    for n, (name, rate) in zip(LAYOUTS, rates.items(), strict=True):
        floor_s = math.ceil(per_chunk / n) * args.chunk_ms / 1000.0  # the engine time alone
        ratio = rate / rates[base_name]
        rows[name] = {
            "replicas": n,
            "nodes": nodes[name],
            "median_s": median(times[name]),
            "samples_per_s": rate,
            "ratio_vs_1": ratio,
            "efficiency_vs_ideal": ratio / n,
            "engine_floor_s": floor_s,
            "overhead_s": median(times[name]) - floor_s,
            "serial_s": serial_s,
            "ray_and_coordination_s": median(times[name]) - floor_s - serial_s,
            "chunks_per_replica": chunks[name],
            "wrong_rewards": wrong.get(name, 0),
        }
        print(
            f"{name:>10} on {','.join(nodes[name]):<27} {rate:8.1f} samples/s  {ratio:5.2f}x of 1 replica "
            f"(ideal {n}x: {ratio / n:6.1%})  step {median(times[name]):.3f} s = engine {floor_s:.3f} s "
            f"+ serial {serial_s:.3f} s + Ray and coordination {median(times[name]) - floor_s - serial_s:.3f} s"
        )
    print(f"rewards wrong: {sum(wrong.values())}; processes left by the cluster: {left or 'none'}")
    path = write_result(
        "scale_out",
        {
            "args": vars(args),
            "seconds": times,
            "layouts": rows,
            "serial_s": serial_s,
            "setup_s": setup_s,
            "processes_left": left,
        },
        args.out,
    )
    print(f"wrote {path}")
    return 0 if not any(wrong.values()) and not left else 1


if __name__ == "__main__":
    sys.exit(main())
