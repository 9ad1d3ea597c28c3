"""The transformers judge engine on one device vs bare transformers vs the hardware floors.

No Ray and no download: the plain :class:`~nemo_genrm.judges.transformers.LocalTransformersJudge` is
driven directly on a random-weight Qwen2 of Qwen2.5-1.5B's shapes in bf16 (``--tiny``: a
2-layer float32 model for a plumbing check on CPU), built from a config in a temporary folder.
Every reference is measured in the same run, on the same device:

1. floors: the bf16 matmul peak (MFU denominator), the device memory bandwidth (a large
   device-to-device copy) and the pinned host<->device copy bandwidth;
2. ``score`` (one forward pass, label probabilities) over 512 prompts of 200-700 tokens vs a
   bare ``model(...)`` forward over the same length-sorted batches; MFU of both, and the MFU of
   a uniform 32 x 1024 bare prefill; the verdicts (likelier label) must agree;
3. the decode step at batch 64: the engine's loop vs bare ``model.generate`` (dynamic cache,
   and ``cache_implementation="static"``), each as (time for N new tokens - time for 1) /
   (N - 1), against the floor (weights + KV read once per step at the measured bandwidth);
4. the 512 x 64-token job: the engine vs bare ``generate`` in length-sorted batches of 64
   (dynamic and static); the first generated token (the verdict of a terse judge) must agree;
5. a terse 4-token verdict via ``generate`` vs ``score``;
6. three sleep/wake cycles (the first included) vs the pinned-copy floor, and the device
   memory left allocated after ``sleep``;
0. first of all, the long-tailed job of ``long_tail.py`` (reasoning judges): 512 prompts of 256
   tokens whose replies stop after 16 to 2,048 tokens (the model rewired to count down, same
   shapes), decoded with 64 slots by the static loop with refills, by the same loop over
   batches of 64 (today's buckets) and by bare static ``generate`` over the first batch: tokens
   per second, slot utilisation, and the decode step against the floor. ``--only long_tail``
   runs this part alone (a few minutes, compilation included).

Writes ``bench/results/gpu_judge.json`` (``gpu_judge_tiny.json`` with ``--tiny``).

    uv run python bench/bench_gpu_judge.py                    # on a CUDA GPU
    uv run python bench/bench_gpu_judge.py --only long_tail   # the long-tailed job alone
    uv run python bench/bench_gpu_judge.py --device cpu --tiny   # plumbing check on CPU
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import median, offline, write_result  # noqa: E402

offline()

import torch  # noqa: E402
from bench_judge_floors import (  # noqa: E402
    bare_generate_batches,
    build_model,
    copy_bandwidth,
    flops_per_token,
    matmul_peak,
    memory_bandwidth,
    mixed_prompts,
    sync,
)

QWEN2_1P5B = {
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
}
# Probability margin from 0.5 past which bf16 noise cannot flip a verdict of the bench's model.
CLEAR_MARGIN = 0.05
# Agreement checks that failed: every figure is still measured (a GPU lease is short), then the
# run exits non-zero naming them.
FAILED_CHECKS: list[str] = []
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "vocab_size": 768,
}


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--tiny", action="store_true", help="2-layer fp32 model, small shapes")
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--min-len", type=int, default=200)
    parser.add_argument("--max-len", type=int, default=700)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--decode-batch", type=int, default=64)
    parser.add_argument("--long-tail-prompts", type=int, default=512)
    parser.add_argument("--longest", type=int, default=2048, help="longest reply of the long-tailed job")
    parser.add_argument("--only", choices=["all", "long_tail"], default="all")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.tiny:
        args.prompts, args.min_len, args.max_len, args.new_tokens, args.decode_batch = 48, 20, 70, 8, 8
        args.long_tail_prompts, args.longest = 32, 64
    return args


def timed_once(fn, device: torch.device):
    sync(device)
    start = time.perf_counter()
    value = fn()
    sync(device)
    return time.perf_counter() - start, value


def main() -> int:
    args = _args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_gpu_judge needs a CUDA GPU for --device cuda; none here, nothing measured.")
        return 0
    dtype = torch.float32 if args.tiny else torch.bfloat16
    dims = TINY if args.tiny else QWEN2_1P5B
    floors = {
        "matmul_peak_flops": matmul_peak(device, dtype, 512 if args.tiny else 8192),
        "memory_bytes_per_s": memory_bandwidth(device, 2**24 if args.tiny else 2**30),
    }
    from nemo_genrm.config import JudgeConfig
    from nemo_genrm.judges.transformers import LocalTransformersJudge

    with tempfile.TemporaryDirectory(prefix="genrm_judge_bench_") as tmp:
        shapes = build_model(Path(tmp), dims, dtype, device)
        config = {
            "backend": "dtensor",
            "model_name": tmp,
            "precision": str(dtype).split(".")[-1],
            "max_model_len": args.max_len + args.new_tokens + 16,
            "sampling": {"max_new_tokens": args.new_tokens},
            "batching": {"max_batch_size": args.decode_batch, "max_tokens_per_batch": 32768},
            "dtensor": {"generation": "static", "sleep_buffers": "at_load"},  # as a colocated judge
        }
        result = {"long_tail": _long_tail(config, args, shapes, floors, device)}
        if args.only == "all":
            worker = LocalTransformersJudge(JudgeConfig.model_validate(config))
            floors.update(copy_bandwidth(device, shapes["weight_bytes"]))
            prompts = mixed_prompts(args.prompts, args.min_len, args.max_len, seed=0)
            result.update(
                {
                    "score": _score(worker, prompts, shapes, floors, device),
                    "decode": _decode(worker, prompts, args, shapes, floors, device),
                    "job": _job(worker, prompts, args, device),
                    "sleep_wake": _sleep_wake(worker, shapes, floors, device),
                }
            )
            worker.shutdown()
    payload = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "tiny": args.tiny,
        "args": vars(args),
        "dims": dims,
        "shapes": shapes,
        "floors": floors,
        **result,
    }
    name = "gpu_judge_tiny" if args.tiny else "gpu_judge"
    payload["failed_checks"] = FAILED_CHECKS
    print(f"wrote {write_result(name, payload, args.out)}")
    for failure in FAILED_CHECKS:
        print(f"FAILED: {failure}")
    return 1 if FAILED_CHECKS else 0


def _long_tail(config: dict, args, shapes, floors, device) -> dict:
    """The long-tailed job (``long_tail.py``) on a countdown-rewired copy of the model."""
    from long_tail import check_replies, countdown_prompts, long_tail_lengths, run_bare, run_buckets, run_continuous

    from nemo_genrm.config import JudgeConfig
    from nemo_genrm.judges.hf_generation import round_up
    from nemo_genrm.judges.transformers import LocalTransformersJudge
    from nemo_genrm.testing.countdown import FIRST_ID, wire_countdown

    config = {**config, "max_model_len": 320 + args.longest, "sampling": {"max_new_tokens": args.longest}}
    worker = LocalTransformersJudge(JudgeConfig.model_validate(config))
    eos = worker.eos_ids[:1]
    wire_countdown(worker.model, first_id=FIRST_ID, max_tokens=args.longest, eos_id=eos[0])
    lengths = long_tail_lengths(args.long_tail_prompts, seed=0, longest=args.longest)
    filler = (FIRST_ID + args.longest, worker.model.config.vocab_size)
    # One prompt length, so every batch and the queue share one cache length (one set of graphs).
    prompt_len = 31 if args.tiny else 255
    prompts = countdown_prompts(lengths, FIRST_ID, filler=filler, prompt_tokens=(prompt_len, prompt_len))
    slots, generator = args.decode_batch, worker._static
    # Warm-up: a short queue that drains through every width compiles each graph before timing.
    warm_lengths = [max(1, (args.longest // 16) >> (i % 7)) for i in range(2 * slots)]
    warm_prompts = countdown_prompts(warm_lengths, FIRST_ID, filler=filler, prompt_tokens=(prompt_len, prompt_len))
    warm_s = timed_once(lambda: run_continuous(generator, warm_prompts, args.longest, slots, device), device)[0]
    runs = {}
    runs["continuous"], continuous = run_continuous(generator, prompts, args.longest, slots, device)
    runs["buckets"], buckets = run_buckets(generator, prompts, args.longest, slots, device)
    runs["bare_static_first_batch"], bare = run_bare(
        worker.model, prompts, args.longest, slots, eos, worker.pad_id, device, cache="static", max_batches=1
    )
    failed = check_replies("continuous", continuous, lengths, eos) + check_replies("buckets", buckets, lengths, eos)
    failed += check_replies("bare static generate", bare, lengths, eos)
    FAILED_CHECKS.extend(failed)
    # A colocated reasoning judge's share of a step: wake, the job, sleep (the slot caches go too).
    colocated = {"sleep_before_s": timed_once(worker.sleep, device)[0], "wake_s": timed_once(worker.wake, device)[0]}
    colocated["job_s"] = run_continuous(generator, prompts, args.longest, slots, device)[0]["seconds"]
    colocated["sleep_s"] = timed_once(worker.sleep, device)[0]
    worker.wake()
    cont = runs["continuous"]
    step_s = cont["seconds"] / cont["decode_steps"]
    # The floor of a full-width step: the weights plus the whole slot cache read once.
    ring = round_up(prompt_len + 1 + args.longest, 64)
    floor = (shapes["weight_bytes"] + slots * ring * shapes["kv_bytes_per_token"]) / floors["memory_bytes_per_s"]
    out = {
        "runs": runs,
        "warmup_s": warm_s,
        "slots": slots,
        "cache_length": ring,
        "colocated": colocated,
        "lengths": {"mean": sum(lengths) / len(lengths), "max": max(lengths)},
        "speedup_over_buckets": cont["tokens_per_s"] / runs["buckets"]["tokens_per_s"],
        "speedup_over_bare_static": cont["tokens_per_s"] / runs["bare_static_first_batch"]["tokens_per_s"],
        "mean_step_s": step_s,
        "full_width_step_floor_s": floor,
        "failed_checks": failed,
    }
    print(
        f"long-tailed job ({len(lengths)} replies of mean {out['lengths']['mean']:.0f}, max {max(lengths)} tokens, "
        f"{slots} slots): continuous {cont['tokens_per_s']:.0f} tok/s at {cont['slot_utilisation']:.1%} of "
        f"slots busy, buckets {runs['buckets']['tokens_per_s']:.0f} tok/s "
        f"({runs['buckets']['slot_utilisation']:.1%}), bare static "
        f"generate {runs['bare_static_first_batch']['tokens_per_s']:.0f} tok/s on the first batch: "
        f"{out['speedup_over_buckets']:.2f}x buckets; mean step {1e3 * step_s:.2f} ms (full-width floor "
        f"{1e3 * floor:.2f} ms); warm-up {warm_s:.0f} s; colocated: wake {colocated['wake_s']:.2f} s, job "
        f"{colocated['job_s']:.1f} s, sleep {colocated['sleep_s']:.2f} s"
    )
    worker.shutdown()
    return out


def _score(worker, prompts, shapes, floors, device) -> dict:
    """Engine ``score_fitted`` vs a bare forward over the same batches; MFU of both."""
    from nemo_genrm.judges.fitting import plan_batches
    from nemo_genrm.judges.transformers import SCORE_MAX_PADDING

    labels = ["1", "0"]
    lengths = [p.num_tokens for p in prompts]
    max_batch, max_tokens = worker.batch_limits(max(lengths), 1)
    batches = plan_batches(
        lengths,
        max_batch_size=max_batch,
        max_tokens_per_batch=max_tokens,
        max_new_tokens=1,
        max_padding=SCORE_MAX_PADDING,
    )
    label_ids = [worker.tokenizer.encode(lab, add_special_tokens=False)[0] for lab in labels]

    def bare():
        out = [None] * len(prompts)
        with torch.no_grad():
            for batch in batches:
                ids, mask = worker._pad([prompts[i].token_ids for i in batch])  # [B, T]
                logits = worker.model(input_ids=ids, attention_mask=mask, logits_to_keep=1).logits  # [B, 1, V]
                pick = logits[:, -1, label_ids].float().softmax(-1)[:, 0].tolist()  # [B]
                for i, p in zip(batch, pick, strict=True):
                    out[i] = p
        return out

    worker.score_fitted(prompts, labels)  # warm-up
    bare()
    engine_s, engine = min(
        (timed_once(lambda: worker.score_fitted(prompts, labels), device) for _ in range(3)), key=lambda r: r[0]
    )
    bare_s, ref = min((timed_once(bare, device) for _ in range(3)), key=lambda r: r[0])
    # A random-weight judge puts most prompts near p = 0.5, where bf16 rounding in another batch
    # layout flips the verdict; a wrong read (position, padding, label) flips clear cases too. So
    # verdicts must agree where the bare forward is clear (|p - 0.5| >= CLEAR_MARGIN), and the
    # probabilities must stay close everywhere.
    pairs = list(zip((e["1"] for e in engine), ref, strict=True))
    agree = sum((e > 0.5) == (r > 0.5) for e, r in pairs) / len(pairs)
    clear = [(e, r) for e, r in pairs if abs(r - 0.5) >= CLEAR_MARGIN]
    agree_clear = sum((e > 0.5) == (r > 0.5) for e, r in clear) / max(len(clear), 1)
    max_diff = max(abs(e - r) for e, r in pairs)
    if agree_clear < 0.99 or agree < 0.95:
        FAILED_CHECKS.append(
            f"score verdicts agree on {agree:.1%} of prompts ({agree_clear:.1%} of the "
            f"{len(clear)} clear ones) only; largest probability difference {max_diff:.3f}"
        )
    tokens = sum(lengths)
    flops = sum(flops_per_token(shapes, n) * n for n in lengths)
    uniform_ids = torch.randint(3, 700, (32, 1024), device=device)
    with torch.inference_mode():  # without it autograd keeps every layer's activations (OOM at 32 x 1024)
        uniform_s = min(
            timed_once(lambda: worker.model(input_ids=uniform_ids, logits_to_keep=1), device)[0] for _ in range(3)
        )
    peak = floors["matmul_peak_flops"]
    out = {
        "engine_s": engine_s,
        "bare_s": bare_s,
        "engine_over_bare": engine_s / bare_s,
        "prompt_tokens": tokens,
        "tokens_per_s": tokens / engine_s,
        "mfu_engine": flops / engine_s / peak,
        "mfu_bare": flops / bare_s / peak,
        "mfu_uniform_32x1024": flops_per_token(shapes, 1024) * 32 * 1024 / uniform_s / peak,
        "batches": len(batches),
        "verdict_agreement": agree,
        "verdict_agreement_clear": agree_clear,
        "clear_prompts": len(clear),
        "max_probability_difference": max_diff,
    }
    print(
        f"score: engine {engine_s:.3f} s vs bare forward {bare_s:.3f} s ({out['engine_over_bare']:.2f}x), "
        f"MFU {out['mfu_engine']:.1%} (uniform 32x1024: {out['mfu_uniform_32x1024']:.1%}), "
        f"verdicts agree {agree:.1%} ({agree_clear:.1%} of {len(clear)} clear), largest p difference {max_diff:.4f}"
    )
    return out


def _decode(worker, prompts, args, shapes, floors, device) -> dict:
    """Decode-step time at one batch: engine loop vs bare generate (dynamic, static) vs floor."""
    from nemo_genrm.judges.hf_generation import Decoding

    batch = sorted(prompts, key=lambda p: p.num_tokens)[len(prompts) // 2 :][: args.decode_batch]
    ids = [list(p.token_ids) for p in batch]
    n = args.new_tokens

    def engine(tokens):
        return lambda: worker._static.generate(ids, Decoding(tokens))

    def bare(tokens, cache):
        return lambda: bare_generate_batches(worker, [ids], tokens, cache)

    per_step = {}
    for name, make in (
        ("engine", engine),
        ("bare_dynamic", lambda t: bare(t, None)),
        ("bare_static", lambda t: bare(t, "static")),
    ):
        for tokens in (1, n):
            make(tokens)()  # warm-up (compiles where it compiles)
        full = min(timed_once(make(n), device)[0] for _ in range(3))
        one = min(timed_once(make(1), device)[0] for _ in range(3))
        per_step[name] = (full - one) / (n - 1)
    mean_len = sum(len(p) for p in ids) / len(ids) + n / 2
    step_bytes = shapes["weight_bytes"] + len(ids) * mean_len * shapes["kv_bytes_per_token"]
    floor = step_bytes / floors["memory_bytes_per_s"]
    out = {
        "batch": len(ids),
        "step_s": per_step,
        "floor_step_s": floor,
        "engine_over_floor": per_step["engine"] / floor,
    }
    print(
        "decode step at batch %d: engine %.2f ms, bare dynamic %.2f ms, bare static %.2f ms, floor %.2f ms "
        "(engine %.1fx floor)"
        % (
            len(ids),
            *(1e3 * per_step[k] for k in ("engine", "bare_dynamic", "bare_static")),
            1e3 * floor,
            out["engine_over_floor"],
        )
    )
    return out


def _job(worker, prompts, args, device) -> dict:
    """All prompts x ``new_tokens``: engine vs bare generate in length-sorted batches."""
    order = sorted(range(len(prompts)), key=lambda i: -prompts[i].num_tokens)
    batches = [
        [list(prompts[i].token_ids) for i in order[s : s + args.decode_batch]]
        for s in range(0, len(order), args.decode_batch)
    ]
    worker.generate_fitted(prompts)  # warm-up: every shape compiled
    engine_s = timed_once(lambda: worker.generate_fitted(prompts), device)[0]
    times, bare_rows = {}, {}
    for cache in (None, "static"):
        bare_generate_batches(worker, batches[:1], args.new_tokens, cache)  # warm-up
        seconds, rows = timed_once(lambda c=cache: bare_generate_batches(worker, batches, args.new_tokens, c), device)
        times["bare_" + (cache or "dynamic")] = seconds
        bare_rows[cache] = rows
    # The engine's loop on the very batches bare generate ran: first tokens (a terse judge's
    # verdict) must agree, bar near-ties of a random-weight model in bf16 (a wrong loop over a
    # 152k vocabulary would agree almost nowhere); whole sequences part after such a tie, so they
    # are counted.
    from nemo_genrm.judges.hf_generation import Decoding

    ours = [row for batch in batches for row in worker._static.generate(batch, Decoding(args.new_tokens))]
    ref = [row for batch in bare_rows[None] for row in batch]
    agree = sum(a[:1] == b[:1] for a, b in zip(ours, ref, strict=True)) / len(ref)
    same = sum(a == b[: len(a)] for a, b in zip(ours, ref, strict=True)) / len(ref)
    if agree < 0.95:
        FAILED_CHECKS.append(f"first generated tokens agree on {agree:.1%} of prompts only")
    worker.config.sampling.max_new_tokens = 4
    worker.generate_fitted(prompts)
    terse_s = min(timed_once(lambda: worker.generate_fitted(prompts), device)[0] for _ in range(3))
    worker.config.sampling.max_new_tokens = args.new_tokens
    score_s = min(timed_once(lambda: worker.score_fitted(prompts, ["1", "0"]), device)[0] for _ in range(3))
    out = {
        "engine_s": engine_s,
        **times,
        "first_token_agreement": agree,
        "sequence_agreement": same,
        "terse_4_tokens_s": terse_s,
        "terse_over_score": terse_s / score_s,
    }
    print(
        f"{len(prompts)} x {args.new_tokens} job: engine {engine_s:.2f} s, bare dynamic "
        f"{times['bare_dynamic']:.2f} s, bare static {times['bare_static']:.2f} s; first tokens agree "
        f"{agree:.1%} (whole sequences {same:.1%}); 4-token verdict {terse_s:.2f} s = {out['terse_over_score']:.2f}x score"
    )
    return out


def _sleep_wake(worker, shapes, floors, device) -> dict:
    """Three sleep/wake cycles (the first, which allocates the host buffers, included)."""
    sleeps, wakes = [], []
    for _ in range(3):
        sleeps.append(timed_once(worker.sleep, device)[0])
        left = worker.stats().extra["device_bytes_after_sleep"]
        wakes.append(timed_once(worker.wake, device)[0])
    sleep_floor = shapes["weight_bytes"] / floors["device_to_host_bytes_per_s"]
    wake_floor = shapes["weight_bytes"] / floors["host_to_device_bytes_per_s"]
    out = {
        "sleep_s": sleeps,
        "wake_s": wakes,
        "sleep_floor_s": sleep_floor,
        "wake_floor_s": wake_floor,
        "worst_sleep_over_floor": max(sleeps) / sleep_floor,
        "worst_wake_over_floor": max(wakes) / wake_floor,
        "device_bytes_after_sleep": left,
        "median_sleep_s": median(sleeps),
    }
    print(
        f"sleep {', '.join(f'{s:.3f}' for s in sleeps)} s (floor {sleep_floor:.3f} s), wake "
        f"{', '.join(f'{s:.3f}' for s in wakes)} s (floor {wake_floor:.3f} s); "
        f"{left / 2**20:.1f} MiB left on the device asleep"
    )
    return out


if __name__ == "__main__":
    sys.exit(main())
