"""Pure helpers of the static-cache generator: bucketing and batch sizes from free memory."""

from __future__ import annotations

import pytest
from transformers import Qwen2Config

from nemo_genrm.judges.hf_generation import (
    activation_bytes_per_token,
    batch_limits_from_memory,
    kv_bytes_per_token,
    next_power_of_two,
    round_up,
    trim_at_eos,
)

# Qwen2.5-1.5B's shapes: 28 layers, 2 KV heads of 128 dims (1536 / 12 heads).
QWEN_1P5B = Qwen2Config(
    hidden_size=1536,
    intermediate_size=8960,
    num_hidden_layers=28,
    num_attention_heads=12,
    num_key_value_heads=2,
    vocab_size=151936,
)


@pytest.mark.parametrize("value, expected", [(0, 1), (1, 1), (2, 2), (3, 4), (64, 64), (65, 128)])
def test_next_power_of_two(value, expected):
    assert next_power_of_two(value) == expected


@pytest.mark.parametrize("value, multiple, expected", [(1, 64, 64), (64, 64, 64), (65, 64, 128)])
def test_round_up(value, multiple, expected):
    assert round_up(value, multiple) == expected


@pytest.mark.parametrize(
    "row, expected",
    [([5, 2, 9], [5, 2]), ([5, 6], [5, 6]), ([2, 2], [2]), ([], [])],  # 2 is the EOS here
)
def test_trim_at_eos(row, expected):
    assert trim_at_eos(row, [2]) == expected


def test_kv_and_activation_bytes_for_the_1p5b_shapes():
    # K and V x 28 layers x 2 heads x 128 dims x 2 bytes = 28,672 bytes per token (bf16).
    assert kv_bytes_per_token(QWEN_1P5B, world_size=1, element_size=2) == 28_672
    assert kv_bytes_per_token(QWEN_1P5B, world_size=2, element_size=2) == 14_336  # one head per rank
    # 2 bytes x (6 x 1536 + 3 x 8960) = 72,192 bytes.
    assert activation_bytes_per_token(QWEN_1P5B, element_size=2) == 72_192


def test_batch_limits_from_memory():
    # 10 GB at 0.5 -> 5e9 bytes; a row of 700 prompt + 64 new tokens costs
    # 28,672 x 764 + 72,192 x 700 = 72,440,808 bytes -> 69 rows -> 64 (a power of two);
    # tokens: 5e9 / (28,672 + 72,192) = 49,571.
    rows, tokens = batch_limits_from_memory(10 * 10**9, 0.5, 28_672, 72_192, 700, 64)
    assert (rows, tokens) == (64, 49_571)
    # Nearly no memory still gives one row.
    assert batch_limits_from_memory(1000, 0.5, 28_672, 72_192, 700, 64) == (1, 1)
