"""The long-tailed job of the reasoning-judge benchmarks: replies of known, very different lengths.

Shared by ``bench_reasoning_lengths.py`` (CPU, tiny model) and ``bench_gpu_judge.py`` (Qwen2.5-1.5B
shapes). A countdown model (:mod:`nemo_genrm.testing.countdown`) replies to each prompt with
exactly the number of tokens its last token names; the lengths are drawn from a log-normal
distribution (median 200 tokens, sigma 0.9: most replies stop within a few hundred tokens, a few
percent run past a thousand) clipped to 16-2,048 tokens. Three ways to decode the same queue,
timed side by side:

- ``continuous``: the engine's static loop over the whole queue, ``slots`` rows at a time, each
  finished row's slot refilled with the next prompt;
- ``buckets``: the same loop without refills over length-sorted batches of ``slots`` prompts
  (the engine with ``judge.dtensor.continuous_batching: false``, as it ran before): each batch
  decodes until its longest row is done;
- ``bare``: transformers' ``generate`` over the same batches (dynamic cache, or the static cache
  with ``cache="static"``).

Each reports seconds, tokens per second and slot utilisation: generated tokens over the slots
run (rows times steps, summed; a batch of bare ``generate`` runs as many steps as its longest row).
"""

from __future__ import annotations

import math
import random
import time

import torch

MEDIAN, SIGMA, LOWEST, LONGEST = 200, 0.9, 16, 2048


def long_tail_lengths(n: int, seed: int = 0, longest: int = LONGEST) -> list[int]:
    """``n`` reply lengths from the clipped log-normal of the module docstring."""
    rng = random.Random(seed)
    return [max(LOWEST, min(longest, round(math.exp(rng.gauss(math.log(MEDIAN), SIGMA))))) for _ in range(n)]


def countdown_prompts(
    lengths: list[int], first_id: int, filler: tuple[int, int], seed: int = 0, prompt_tokens: tuple[int, int] = (20, 70)
) -> list[list[int]]:
    """One prompt per length: random filler ids, then the countdown token of that length."""
    from nemo_genrm.testing.countdown import countdown_token

    rng = random.Random(seed + 1)
    return [
        [rng.randrange(*filler) for _ in range(rng.randint(*prompt_tokens))] + [countdown_token(n, first_id)]
        for n in lengths
    ]


def buckets_of(prompts: list[list[int]], slots: int, new_tokens: int) -> list[list[int]]:
    """The batches the engine plans without refills: length-sorted, at most ``slots`` each."""
    from nemo_genrm.judges.fitting import plan_batches
    from nemo_genrm.judges.transformers import GENERATE_MAX_PADDING

    return plan_batches(
        [len(p) for p in prompts],
        max_batch_size=slots,
        max_tokens_per_batch=2**62,
        max_new_tokens=new_tokens,
        max_padding=GENERATE_MAX_PADDING,
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _figures(seconds: float, replies: list[list[int]], slot_steps: int, **extra) -> dict:
    tokens = sum(len(r) for r in replies)
    return {
        "seconds": seconds,
        "tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "slot_steps": slot_steps,
        "slot_utilisation": tokens / slot_steps,
        **extra,
    }


def run_continuous(generator, prompts, new_tokens: int, slots: int, device: torch.device) -> tuple[dict, list]:
    """The whole queue through the static loop with refills."""
    from nemo_genrm.judges.hf_generation import Decoding

    _sync(device)
    start = time.perf_counter()
    replies = generator.generate(prompts, Decoding(new_tokens), slots=slots)
    _sync(device)
    stats = generator.last_stats
    return _figures(
        time.perf_counter() - start,
        replies,
        stats.slot_steps,
        decode_steps=stats.decode_steps,
        prefills=stats.prefills,
        narrowed=stats.narrowed,
    ), replies


def run_buckets(generator, prompts, new_tokens: int, slots: int, device: torch.device) -> tuple[dict, list]:
    """Length-sorted batches through the static loop, each until its longest row is done."""
    from nemo_genrm.judges.hf_generation import Decoding

    replies: list = [None] * len(prompts)
    slot_steps = decode_steps = 0
    _sync(device)
    start = time.perf_counter()
    for batch in buckets_of(prompts, slots, new_tokens):
        done = generator.generate([prompts[i] for i in batch], Decoding(new_tokens), narrow=False)
        for index, reply in zip(batch, done, strict=True):
            replies[index] = reply
        slot_steps += generator.last_stats.slot_steps
        decode_steps += generator.last_stats.decode_steps
    _sync(device)
    return _figures(time.perf_counter() - start, replies, slot_steps, decode_steps=decode_steps), replies


def run_bare(
    model,
    prompts,
    new_tokens: int,
    slots: int,
    eos_ids: list[int],
    pad_id: int,
    device: torch.device,
    cache: str | None = None,
    max_batches: int | None = None,
) -> tuple[dict, list]:
    """transformers' ``generate`` (greedy) over the same batches; ``max_batches`` times the first only."""
    from transformers import GenerationConfig

    from nemo_genrm.judges.hf_generation import trim_at_eos

    config = GenerationConfig(
        max_new_tokens=new_tokens,
        do_sample=False,
        eos_token_id=eos_ids,
        pad_token_id=pad_id,
        cache_implementation=cache,
    )
    batches = buckets_of(prompts, slots, new_tokens)[:max_batches]
    replies: dict[int, list[int]] = {}
    slot_steps = 0
    _sync(device)
    start = time.perf_counter()
    with torch.no_grad():
        for batch in batches:
            rows = [prompts[i] for i in batch]
            width = max(len(r) for r in rows)
            ids = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows], device=device)  # [B, T]
            mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=device)  # [B, T]
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, width:]  # [B, N]
            slot_steps += out.shape[0] * out.shape[1]  # generate stops once every row is done
            for index, row in zip(batch, out.tolist(), strict=True):
                replies[index] = trim_at_eos(row, eos_ids)
    _sync(device)
    ordered = [replies[i] for i in sorted(replies)]
    return _figures(time.perf_counter() - start, ordered, slot_steps, batches=len(batches)), replies


def check_replies(name: str, replies, lengths: list[int], eos_ids: list[int]) -> list[str]:
    """Problems with ``replies`` (a list, or index -> reply): a wrong length or a missing EOS."""
    items = replies.items() if isinstance(replies, dict) else enumerate(replies)
    wrong = [i for i, reply in items if len(reply) != lengths[i] or reply[-1] not in eos_ids]
    if not wrong:
        return []
    return [f"{name}: {len(wrong)} replies are not the scripted length ending in EOS (first: prompt {wrong[0]})"]
