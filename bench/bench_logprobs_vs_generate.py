"""Verdict from logprobs (one forward pass) vs generating the verdict, on the dtensor engine.

Same prompts, same engine, timed in alternation (the best of the runs is compared, the medians
are recorded too): ``score(prompts, ["1", "0"])`` against
``generate(prompts)`` (greedy, ``max_new_tokens`` 16). Tiny judges:

- terse fixed-verdict judges answering ``1`` and ``0`` (one token, then EOS);
- a fixed-verdict judge that gives its verdict first and then a short reason
  (``1 because the final answers match``), as many chat judges do;
- a random-weight judge (speed only: it writes ``max_new_tokens`` of noise that rarely parses).

On the fixed-verdict judges both routes must give the same verdict (argmax label vs the parsed
text, lenient parser). Prints the speed ratio per judge (target >= 3x) and the agreement, and
writes ``bench/results/logprobs_vs_generate.json``. The ratio grows with the reply length: a
judge that answers one token pays one prefill plus one decoding step either way.

    uv run python bench/bench_logprobs_vs_generate.py            # 512 prompts, worker in process
    uv run python bench/bench_logprobs_vs_generate.py --ray      # through DTensorJudge on Ray
    uv run python bench/bench_logprobs_vs_generate.py --quick    # smoke run (64 prompts)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import alternate, judge_prompts, median, offline, write_result  # noqa: E402

offline()

LABELS = ["1", "0"]
VERBOSE = "1 because the final answers match"


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512, help="prompts per call")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per side (best is kept)")
    parser.add_argument("--hidden", type=int, default=64, help="tiny judge hidden size")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--ray", action="store_true", help="run through DTensorJudge (1 CPU replica)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the engine")
    parser.add_argument("--quick", action="store_true", help="64 prompts, one timed run")
    parser.add_argument("--out", default=None)
    return parser.parse_args()


def _engine(path, args):
    from nemo_genrm.config import JudgeConfig
    from nemo_genrm.judges import Placement, ReplicaPlacement, create_judge
    from nemo_genrm.judges.transformers import LocalTransformersJudge

    config = {
        "backend": "dtensor",
        "model_name": str(path),
        "precision": "float32",
        "max_model_len": 1024,
        "sampling": {"max_new_tokens": args.max_new_tokens},
        "batching": {"max_batch_size": 64, "max_tokens_per_batch": 65536},
    }
    if args.ray:
        import ray

        if not ray.is_initialized():
            ray.init(num_cpus=max(2, args.threads), include_dashboard=False, log_to_driver=False)
        placement = Placement((ReplicaPlacement(num_gpus=0.0, num_cpus=float(args.threads)),))
        return create_judge(config, placement)
    return LocalTransformersJudge(JudgeConfig.model_validate(config), num_threads=args.threads)


def _measure(name: str, path, prompts, args) -> dict:
    from nemo_genrm.verdicts import VerdictParser

    judge = _engine(path, args)
    try:
        times, last = alternate(
            {"generate": lambda: judge.generate(prompts), "logprobs": lambda: judge.score(prompts, LABELS)},
            repeats=args.repeats,
        )
        gens, scores = last["generate"], last["logprobs"]
    finally:
        judge.shutdown()
    lenient = VerdictParser("lenient")
    from_text = [lenient.parse(g.text).value for g in gens]
    from_logprobs = [1 if s.probs["1"] >= s.probs["0"] else 0 for s in scores]
    parsed = [i for i, v in enumerate(from_text) if v is not None]
    agree = sum(from_text[i] == from_logprobs[i] for i in parsed)
    # Best runs: the ones least disturbed by other load on the machine (medians are kept too).
    gen_s, lp_s = min(times["generate"]), min(times["logprobs"])
    row = {
        "judge": name,
        "prompts": len(prompts),
        "generate_s": times["generate"],
        "logprobs_s": times["logprobs"],
        "speedup": gen_s / lp_s,
        "speedup_of_medians": median(times["generate"]) / median(times["logprobs"]),
        "mean_output_tokens": sum(g.output_tokens for g in gens) / len(gens),
        "parsed_text_verdicts": len(parsed),
        "agreeing_verdicts": agree,
    }
    print(
        f"{name:>10}: generate {gen_s:7.3f} s  logprobs {lp_s:7.3f} s  speedup {row['speedup']:5.2f}x"
        f"  (mean output {row['mean_output_tokens']:.1f} tok; verdicts agree on {agree}/{len(parsed)}"
        f" parsed of {len(prompts)})"
    )
    return row


def main() -> int:
    args = _args()
    if args.quick:
        args.n, args.repeats = 64, 1
    from nemo_genrm.testing import cached_tiny_judge, cached_tiny_model

    prompts = judge_prompts(args.n)
    judges = {
        "fixed-1": cached_tiny_judge("1", hidden_size=args.hidden),
        "fixed-0": cached_tiny_judge("0", hidden_size=args.hidden),
        "verbose-1": cached_tiny_judge(VERBOSE, hidden_size=args.hidden),
        "random": cached_tiny_model(hidden_size=args.hidden),
    }
    print(f"{args.n} prompts, engine: {'DTensorJudge on Ray' if args.ray else 'in-process worker'}")
    rows = [_measure(name, path, prompts, args) for name, path in judges.items()]
    fixed = [r for r in rows if r["judge"] != "random"]
    identical = all(r["agreeing_verdicts"] == r["parsed_text_verdicts"] == r["prompts"] for r in fixed)
    worst = min(r["speedup"] for r in fixed)
    print(f"fixed-verdict judges: verdicts identical: {identical}; speedup >= {worst:.2f}x (target 3x)")
    path = write_result(
        "logprobs_vs_generate",
        {"args": vars(args), "rows": rows, "verdicts_identical": identical, "min_fixed_speedup": worst},
        args.out,
    )
    print(f"wrote {path}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
