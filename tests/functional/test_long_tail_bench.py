"""The long-tailed job of the benchmarks (bench/long_tail.py) on a tiny countdown model.

The GPU benchmark runs this job at Qwen2.5-1.5B's shapes in a short, prepared run; here its three
decodings run on CPU at tiny shapes, so the run cannot fail for a reason a CPU could have shown:
every reply has its scripted length, the three give the same tokens, and refills keep the slots
busier than batches do.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from nemo_genrm.judges.hf_generation import StaticGenerator
from nemo_genrm.testing.countdown import FIRST_ID, build_countdown_model, countdown_token, wire_countdown

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from long_tail import (  # noqa: E402
    check_replies,
    countdown_prompts,
    long_tail_lengths,
    run_bare,
    run_buckets,
    run_continuous,
)

LONGEST = 48


def test_countdown_tokens_and_a_tied_head():
    assert countdown_token(1) == FIRST_ID and countdown_token(5, first_id=10) == 14
    from transformers import Qwen2Config

    tied = AutoModelForCausalLM.from_config(
        Qwen2Config(
            vocab_size=128,
            hidden_size=64,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            tie_word_embeddings=True,
        )
    )
    wire_countdown(tied, first_id=3, max_tokens=40, eos_id=2)  # the head gets weights of its own
    assert tied.lm_head.weight.data_ptr() != tied.model.embed_tokens.weight.data_ptr()
    with torch.no_grad():
        out = tied.generate(
            torch.tensor([[7, 9, countdown_token(6, 3)]]),
            max_new_tokens=50,
            do_sample=False,
            eos_token_id=2,
            pad_token_id=0,
        )
    assert out[0, 3:].tolist() == [countdown_token(n, 3) for n in range(5, 0, -1)] + [2]


def test_the_three_decodings_of_the_long_tailed_job(tmp_path):
    build_countdown_model(tmp_path, max_tokens=LONGEST, num_layers=1, num_kv_heads=1)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    eos, pad, cpu = [model.config.eos_token_id], model.config.pad_token_id, torch.device("cpu")
    drawn = long_tail_lengths(200, seed=1, longest=LONGEST)
    assert min(drawn) >= 16 and max(drawn) == LONGEST  # clipped to the job's range
    # At these tiny lengths a long tail by hand: most replies short, one in six the longest.
    lengths = [LONGEST if i % 6 == 5 else 16 + i % 5 for i in range(24)]
    prompts = countdown_prompts(
        lengths, FIRST_ID, filler=(FIRST_ID + LONGEST, model.config.vocab_size), prompt_tokens=(3, 12)
    )
    generator = StaticGenerator(model, eos, pad)
    continuous, first = run_continuous(generator, prompts, LONGEST, 8, cpu)
    batched, second = run_buckets(generator, prompts, LONGEST, 8, cpu)
    bare, third = run_bare(model, prompts, LONGEST, 8, eos, pad, cpu, max_batches=1)
    assert not check_replies("continuous", first, lengths, eos) and not check_replies("buckets", second, lengths, eos)
    assert not check_replies("bare", third, lengths, eos) and 0 < len(third) <= 8 and bare["batches"] == 1
    assert first == second and all(first[i] == reply for i, reply in third.items())
    assert continuous["tokens"] == batched["tokens"] == sum(lengths)
    assert continuous["slot_utilisation"] > batched["slot_utilisation"]
    assert continuous["decode_steps"] < batched["decode_steps"]
    # A wrong length is caught.
    assert check_replies("x", [first[0][:-1]] + first[1:], lengths, eos)
