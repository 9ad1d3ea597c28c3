"""Long-tailed reply lengths on CPU: continuous batching vs today's buckets vs bare ``generate``.

The job of ``long_tail.py``: 512 prompts whose replies (a tiny countdown model's, float32) stop
after 16 to 2,048 tokens drawn from a heavy-tailed distribution, decoded with 64 slots three ways
in one run (the static loop with refills, the same loop over length-sorted batches, transformers'
``generate`` over those batches). Prints tokens per second and slot utilisation of each, and the
ratios; every reply must have its scripted length and the three must give the same tokens.
Writes ``bench/results/reasoning_lengths.json``.

    uv run python bench/bench_reasoning_lengths.py            # the full job (several minutes)
    uv run python bench/bench_reasoning_lengths.py --quick    # 96 prompts, replies up to 256 tokens

Targets (docs/performance.md): slot utilisation >= 90% with refills, >= 2x the buckets' tokens/s.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import offline, write_result  # noqa: E402

offline()

import torch  # noqa: E402
from long_tail import (  # noqa: E402
    check_replies,
    countdown_prompts,
    long_tail_lengths,
    run_bare,
    run_buckets,
    run_continuous,
)

# One layer, one key/value head: a decode step reads the whole slot cache (rows x columns), and
# on two shared cores a bigger one would make the bucketed and bare runs take most of an hour.
MODEL = {"hidden_size": 64, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 128}


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--longest", type=int, default=2048, help="longest reply (and max_new_tokens)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (the machine is shared)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="96 prompts, replies up to 256 tokens, 16 slots")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.quick:
        args.prompts, args.longest, args.slots = 96, 256, 16
    return args


def run(args: argparse.Namespace) -> dict:
    """The three decodings of the job side by side; the figures and any failed check."""
    from transformers import AutoModelForCausalLM

    from nemo_genrm.judges.hf_generation import StaticGenerator
    from nemo_genrm.testing.countdown import FIRST_ID, build_countdown_model

    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    lengths = long_tail_lengths(args.prompts, args.seed, args.longest)
    with tempfile.TemporaryDirectory(prefix="genrm_countdown_") as tmp:
        build_countdown_model(tmp, max_tokens=args.longest, **MODEL)
        model = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32).eval()
    eos, pad = [model.config.eos_token_id], model.config.pad_token_id
    prompts = countdown_prompts(
        lengths, FIRST_ID, filler=(FIRST_ID + args.longest, model.config.vocab_size), seed=args.seed
    )
    generator = StaticGenerator(model, eos, pad)
    runs = {}
    runs["continuous"], continuous = run_continuous(generator, prompts, args.longest, args.slots, device)
    runs["buckets"], buckets = run_buckets(generator, prompts, args.longest, args.slots, device)
    runs["bare"], bare = run_bare(model, prompts, args.longest, args.slots, eos, pad, device)
    failed = check_replies("continuous", continuous, lengths, eos) + check_replies("buckets", buckets, lengths, eos)
    failed += check_replies("bare generate", bare, lengths, eos)
    if continuous != buckets or any(continuous[i] != reply for i, reply in bare.items()):
        failed.append("the three decodings do not give the same tokens")
    cont = runs["continuous"]
    return {
        "lengths": {
            "mean": sum(lengths) / len(lengths),
            "max": max(lengths),
            "min": min(lengths),
            "over_1000": sum(n > 1000 for n in lengths),
        },
        "runs": runs,
        "speedup_over_buckets": cont["tokens_per_s"] / runs["buckets"]["tokens_per_s"],
        "speedup_over_bare": cont["tokens_per_s"] / runs["bare"]["tokens_per_s"],
        "failed_checks": failed,
    }


def main() -> int:
    args = _args()
    result = run(args)
    for name, figures in result["runs"].items():
        print(
            f"{name:>10}: {figures['seconds']:8.2f} s, {figures['tokens_per_s']:9.1f} tokens/s, "
            f"slot utilisation {figures['slot_utilisation']:.1%}"
        )
    print(
        f"continuous batching: {result['speedup_over_buckets']:.2f}x the buckets' tokens/s, "
        f"{result['speedup_over_bare']:.2f}x bare generate's ({args.prompts} prompts, {args.slots} slots, "
        f"replies of mean {result['lengths']['mean']:.0f} and max {result['lengths']['max']} tokens)"
    )
    payload = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "args": vars(args),
        "model": MODEL,
        **result,
    }
    print(f"wrote {write_result('reasoning_lengths', payload, args.out)}")
    for failure in result["failed_checks"]:
        print(f"FAILED: {failure}")
    return 1 if result["failed_checks"] else 0


if __name__ == "__main__":
    sys.exit(main())
