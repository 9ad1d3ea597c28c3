"""Continuous batching in the static loop: refilled slots give exactly bare ``generate``'s tokens.

A tiny random float32 model (whose every token depends on the whole context, so a wrong key in
the cache, a wrong position or a wrong mask changes the text) decodes prompts of every length
from 1 to 24 tokens. An eighth of the vocabulary counts as EOS, so rows end at every position
of the budget (checked: the reference must cover them all) and slots are refilled all the time.
The reference is transformers' own greedy ``generate`` (a left-padded batch; checked against
prompts generated alone).
"""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoModelForCausalLM, GenerationConfig

from nemo_genrm.config import JudgeConfig
from nemo_genrm.judges.fitting import plan_batches
from nemo_genrm.judges.hf_generation import Decoding, StaticGenerator, trim_at_eos
from nemo_genrm.judges.transformers import GENERATE_MAX_PADDING, LocalTransformersJudge
from nemo_genrm.testing import cached_tiny_model

NEW_TOKENS = 12
LONGEST_PROMPT = 24


@pytest.fixture(scope="module")
def model(tiny_cache_dir):
    return AutoModelForCausalLM.from_pretrained(cached_tiny_model(), dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def case(model):
    """Prompts of every length (twice, shuffled), the EOS set, and bare ``generate``'s replies."""
    rng = random.Random(0)
    vocab = model.config.vocab_size
    lengths = [n for n in range(1, LONGEST_PROMPT + 1) for _ in range(2)]
    rng.shuffle(lengths)
    prompts = [[rng.randrange(3, vocab) for _ in range(n)] for n in lengths]
    eos = list(range(3, vocab, 8))
    return prompts, eos, _bare_generate(model, prompts, eos)


def _bare_generate(model, prompts: list[list[int]], eos: list[int]) -> list[list[int]]:
    """transformers' greedy ``generate`` over the prompts left-padded into one batch."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])  # [B, T]
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])  # [B, T]
    config = GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=eos, pad_token_id=0)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, width:]  # [B, N]
    return [trim_at_eos(row, eos) for row in out.tolist()]


def test_the_reference_ends_rows_at_every_position(model, case):
    # Without this the identity below would not cover an EOS at each step, nor rows that use the
    # whole budget.
    prompts, eos, replies = case
    ends = {len(r) for r in replies if r[-1] in eos}
    assert ends == set(range(1, NEW_TOKENS + 1))
    assert any(len(r) == NEW_TOKENS and r[-1] not in eos for r in replies)
    # The padded batch is no different from prompts generated alone (shortest and longest here).
    for index in (lengths := [len(p) for p in prompts]).index(1), lengths.index(LONGEST_PROMPT):
        assert _bare_generate(model, [prompts[index]], eos) == [replies[index]]


@pytest.mark.parametrize("slots", [1, 5, 16])
@pytest.mark.parametrize("graph_widths", [False, True], ids=["eager", "graph-widths"])
def test_refilled_slots_give_bare_generate_tokens(model, case, slots, graph_widths):
    prompts, eos, replies = case
    generator = StaticGenerator(model, eos, pad_id=0)
    if graph_widths:  # the widths a compiled step runs (powers of two), on the eager step
        generator._step, generator.compiled = generator._decode_step, True
    assert generator.generate(prompts, Decoding(NEW_TOKENS), slots=slots) == replies
    stats = generator.last_stats
    assert stats.tokens == sum(len(r) for r in replies) and stats.sequences == len(prompts)
    assert stats.tokens <= stats.slot_steps
    if slots < len(prompts):
        assert stats.prefills > 1  # slots were refilled
    if slots == 1:
        # One slot decodes every reply in turn: the ring of 64 columns wrapped many times.
        assert stats.decode_steps > 3 * generator._caches[(1, 64)].length


def test_narrowing_keeps_the_busy_rows(model, case):
    # Every prompt at once, no queue: as rows end, the busy ones move to the front and the step
    # runs narrower; their tokens must not change.
    prompts, eos, replies = case
    generator = StaticGenerator(model, eos, pad_id=0, check_every=1)
    assert generator.generate(prompts, Decoding(NEW_TOKENS)) == replies
    assert generator.last_stats.narrowed >= 2 and generator.last_stats.prefills == 1


@pytest.mark.parametrize("continuous", [True, False])
def test_the_judge_gives_the_same_replies_with_and_without_refills(tiny_cache_dir, continuous):
    prompts = [
        [{"role": "user", "content": "Item %d: %s Reply 1 or 0." % (i, "alpha beta " * (1 + i % 9))}] for i in range(13)
    ]
    replies = {}
    for generation in ("static", "dynamic"):
        judge = LocalTransformersJudge(
            JudgeConfig.model_validate(
                {
                    "backend": "dtensor",
                    "model_name": str(cached_tiny_model()),
                    "precision": "float32",
                    "max_model_len": 256,
                    "sampling": {"max_new_tokens": 9},
                    "batching": {"max_batch_size": 4, "max_tokens_per_batch": 4096},
                    "dtensor": {"generation": generation, "continuous_batching": continuous},
                }
            )
        )
        replies[generation] = [(g.text, g.output_tokens) for g in judge.generate(prompts)]
        if generation == "static":
            extra = judge.stats().extra
            # 13 prompts, 4 slots: one queue whose slots are refilled, or the batches planned
            # today (at most 4 prompts, length-sorted), each prefilled once.
            lengths = [f.num_tokens for f in judge.fitter.fit(prompts)]
            batches = plan_batches(
                lengths, max_batch_size=4, max_tokens_per_batch=4096, max_new_tokens=9, max_padding=GENERATE_MAX_PADDING
            )
            assert extra["prefills"] > 1 if continuous else extra["prefills"] == len(batches)
            assert 0 < extra["decode_slot_utilisation"] <= 1
        judge.shutdown()
    assert replies["static"] == replies["dynamic"]


def _in_budget(reply: list[int], budget: int, thinking: bool, open_id: int, close_id: int) -> list[int]:
    """``reply`` as the loop must stop it: at ``budget`` tokens if its thought is open there."""
    for count, token in enumerate(reply, start=1):
        thinking = (thinking or token == open_id) and token != close_id
        if count >= budget and thinking:
            return reply[:count]
    return reply


def test_the_loop_stops_a_thought_at_its_budget_and_nothing_else(model, case):
    # Two ordinary ids play <think> and </think>; half the prompts start inside a thought (their
    # template opened it). A row stops at the budget only while its thought is open.
    prompts, eos, replies = case
    open_id, close_id, budget = replies[0][0], replies[1][0], 5
    thinking = [i % 2 == 0 for i in range(len(prompts))]
    want = [_in_budget(r, budget, t, open_id, close_id) for r, t in zip(replies, thinking, strict=True)]
    assert want != replies and sum(len(w) < len(r) for w, r in zip(want, replies, strict=True)) > 3
    decoding = Decoding(NEW_TOKENS, reasoning_budget=budget, open_ids=(open_id,), close_ids=(close_id,))
    generator = StaticGenerator(model, eos, pad_id=0)
    assert generator.generate(prompts, decoding, slots=5, thinking=thinking) == want
