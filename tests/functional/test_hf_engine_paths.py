"""The transformers worker's two decoding loops, its scoring buckets and its sleep buffers (CPU).

No Ray: the plain worker is driven directly on tiny float32 models built offline. The static
loop (preallocated KV cache; on a GPU its decode step is compiled) must give exactly the tokens
of transformers' own ``generate`` with greedy decoding, in input order although it runs
length-sorted batches.
"""

from __future__ import annotations

import random

import pytest
import torch

from nemo_genrm.config import JudgeConfig
from nemo_genrm.judges.transformers import LocalTransformersJudge
from nemo_genrm.testing import cached_tiny_judge, cached_tiny_model

INSTRUCTIONS = "Reply with 1 if the candidate matches the reference, else 0."
LABELS = ["1", "0", "Judgement: 1"]


def _config(path, generation: str, **overrides) -> JudgeConfig:
    config = {
        "backend": "dtensor",
        "model_name": str(path),
        "precision": "float32",
        "max_model_len": 256,
        "sampling": {"max_new_tokens": 10},
        "batching": {"max_batch_size": 4, "max_tokens_per_batch": 4096},
        "dtensor": {"generation": generation},
    }
    config.update(overrides)
    return JudgeConfig.model_validate(config)


def _prompts(n: int, seed: int = 0) -> list[list[dict]]:
    """Prompts of mixed lengths (1 to 24 filler words) in a shuffled order, each numbered."""
    rng = random.Random(seed)
    sizes = [1 + (i * 13) % 24 for i in range(n)]
    rng.shuffle(sizes)
    return [
        [{"role": "user", "content": f"Item {i}: " + "alpha beta " * size + INSTRUCTIONS}]
        for i, size in enumerate(sizes)
    ]


@pytest.fixture(scope="module")
def random_workers(tiny_cache_dir):
    path = cached_tiny_model()
    static = LocalTransformersJudge(_config(path, "static"))
    dynamic = LocalTransformersJudge(_config(path, "dynamic"))
    yield static, dynamic
    static.shutdown()
    dynamic.shutdown()


def test_auto_is_dynamic_on_cpu_and_the_switch_is_reported(tiny_cache_dir, random_workers):
    static, dynamic = random_workers
    assert static.generation_mode == "static" and static.stats().extra["generation"] == "static"
    assert dynamic.generation_mode == "dynamic"
    auto = LocalTransformersJudge(_config(cached_tiny_model(), "auto"))
    assert auto.generation_mode == ("static" if torch.cuda.is_available() else "dynamic")
    auto.shutdown()


def test_static_loop_matches_generate_on_the_random_model_in_input_order(random_workers):
    static, dynamic = random_workers
    prompts = _prompts(11)
    ours, ref = static.generate(prompts), dynamic.generate(prompts)
    assert all(g.error is None for g in ours)
    assert [(g.text, g.output_tokens) for g in ours] == [(g.text, g.output_tokens) for g in ref]
    # Batched and length-sorted, yet each result is the one its own prompt gets alone.
    for prompt, gen in zip(prompts[:4], ours, strict=False):
        alone = dynamic.generate([prompt])[0]
        assert (gen.text, gen.output_tokens, gen.prompt_tokens) == (
            alone.text,
            alone.output_tokens,
            alone.prompt_tokens,
        )
    assert len({g.text for g in ours}) > 5  # the random model writes different text per prompt


@pytest.mark.parametrize(
    "text",
    ["1", "0", "[[A]]", "Judgement: 1", "maybe"],
)
def test_static_loop_matches_generate_on_fixed_verdict_judges(tiny_cache_dir, text):
    path = cached_tiny_judge(text)
    prompts = _prompts(7, seed=3)
    outputs = {}
    for mode in ("static", "dynamic"):
        worker = LocalTransformersJudge(_config(path, mode))
        outputs[mode] = [(g.text, g.output_tokens, g.prompt_tokens) for g in worker.generate(prompts)]
        worker.shutdown()
    assert outputs["static"] == outputs["dynamic"]
    assert [t for t, _, _ in outputs["static"]] == [text] * 7


def test_static_loop_stops_early_and_samples_reproducibly(tiny_cache_dir):
    # The "1" judge ends every row after 2 tokens: the loop stops at its first done-check
    # (step 8) rather than running all 40 steps, and every row reports 2 tokens.
    worker = LocalTransformersJudge(_config(cached_tiny_judge("1"), "static", sampling={"max_new_tokens": 40}))
    assert [g.output_tokens for g in worker.generate(_prompts(5))] == [2] * 5
    worker.shutdown()
    # Sampling with a seed: the same draws every call.
    path = cached_tiny_model()
    config = _config(path, "static", sampling={"max_new_tokens": 8, "temperature": 1.0, "top_p": 0.9, "seed": 7})
    worker = LocalTransformersJudge(config)
    first = [g.text for g in worker.generate(_prompts(4))]
    assert first == [g.text for g in worker.generate(_prompts(4))]
    worker.shutdown()


def test_tight_score_buckets_keep_the_bare_forward_probabilities(random_workers):
    worker, _ = random_workers
    prompts = _prompts(12)
    batched = worker.score(prompts, LABELS)
    fitted = worker.fitter.fit(prompts)
    first_ids = [worker.tokenizer.encode(lab, add_special_tokens=False)[0] for lab in ["1", "0"]]
    for prompt, ours in zip(fitted, batched, strict=True):
        # The bare forward: one unpadded prompt, no engine code in between.
        ids = torch.tensor([prompt.token_ids])  # [1, T]
        with torch.no_grad():
            logits = worker.model(input_ids=ids).logits[0, -1].float()  # [V]
        logp = torch.log_softmax(logits, -1)[first_ids]
        pair = torch.softmax(logp.double(), -1)
        got = torch.tensor([ours.probs["1"], ours.probs["0"]], dtype=torch.float64)
        got = got / got.sum()
        assert torch.allclose(got, pair, atol=1e-5, rtol=0)


def test_sleep_buffers_at_first_sleep_or_at_load(tiny_cache_dir):
    lazy = LocalTransformersJudge(_config(cached_tiny_model(), "dynamic", dtensor={"sleep_buffers": "at_first_sleep"}))
    assert lazy.stats().extra["host_buffer_allocations"] == 0 and not lazy._offload.host_buffers
    lazy.sleep()
    assert lazy.stats().extra["host_buffer_allocations"] == 1
    lazy.shutdown()
    eager = LocalTransformersJudge(_config(cached_tiny_model(), "dynamic", dtensor={"sleep_buffers": "at_load"}))
    assert eager.stats().extra["host_buffer_allocations"] == 1 and eager.stats().extra["sleep_cycles"] == 0
    eager.shutdown()
    # auto, the default, outside a colocated environment: a judge that may never sleep holds no copy.
    default = LocalTransformersJudge(_config(cached_tiny_model(), "dynamic"))
    assert default.stats().extra["host_buffer_allocations"] == 0
    default.shutdown()


def test_sleep_reuses_one_set_of_host_buffers(tiny_cache_dir):
    worker = LocalTransformersJudge(
        _config(cached_tiny_model(), "static", dtensor={"generation": "static", "sleep_buffers": "at_load"})
    )
    prompts = _prompts(4)
    before_text = [g.text for g in worker.generate(prompts)]
    weights = {name: p.detach().clone() for name, p in worker.model.named_parameters()}
    assert worker._static.cached_bytes() > 0  # the KV cache of the last shape is kept
    pointers = None
    for cycle in range(3):
        worker.sleep()
        assert worker._static.cached_bytes() == 0  # and dropped by the sleep
        extra = worker.stats().extra
        assert extra["asleep"] and extra["host_buffer_allocations"] == 1  # at load, never again
        assert extra["sleep_cycles"] == cycle + 1 and extra["device_bytes_after_sleep"] == 0
        assert all(p.numel() == 0 for p in worker.model.parameters())
        now = [h.data_ptr() for h in worker._offload.host_buffers]
        assert pointers is None or now == pointers  # the same storage every cycle
        pointers = now
        worker.wake()
        for name, p in worker.model.named_parameters():
            assert torch.equal(p, weights[name]), name  # bit for bit
    held = [*worker.model.parameters(), *worker.model.buffers()]  # the rotary table is a buffer
    assert extra["host_buffer_bytes"] == sum(t.numel() * t.element_size() for t in held)
    assert [g.text for g in worker.generate(prompts)] == before_text
    worker.shutdown()


def test_graph_mode_padding_and_the_eager_fallback(random_workers, caplog):
    import logging

    from nemo_genrm.judges.hf_generation import Decoding, StaticGenerator

    static, _ = random_workers
    ids = [list(f.token_ids) for f in static.fitter.fit(_prompts(3))]
    want = StaticGenerator(static.model, static.eos_ids, static.pad_id).generate(ids, Decoding(6))
    # Graph mode pads the batch to a power of two (3 -> 4 rows) with copies of the first
    # prompt; here the "compiled" step is the eager one, so only the padding is new.
    padded = StaticGenerator(static.model, static.eos_ids, static.pad_id)
    padded._step, padded.compiled = padded._decode_step, True
    assert padded.generate(ids, Decoding(6)) == want
    rows, length = next(iter(padded._caches))
    assert padded.cached_bytes() > 0 and rows == 4 and length % 64 == 0
    # A step that fails to compile at its first call: a warning, then the same tokens eagerly.

    def fails_to_compile(*args):
        raise RuntimeError("no compiler here")

    broken = StaticGenerator(static.model, static.eos_ids, static.pad_id)
    broken._step, broken.compiled = fails_to_compile, True
    with caplog.at_level(logging.WARNING, logger="nemo_genrm.judges.hf_generation"):
        assert broken.generate(ids, Decoding(6)) == want
    assert not broken.compiled and "decoding eagerly" in caplog.text


@pytest.mark.parametrize("generation", ["static", "dynamic"])
def test_votes_are_sampled_with_seed_plus_vote(tiny_cache_dir, generation):
    """votes: copies of one prompt with vote 0..5 are separate draws; the same vote repeats itself."""
    from nemo_genrm.judges.base import JudgeRequest

    judge = LocalTransformersJudge(
        _config(cached_tiny_model(), generation, sampling={"max_new_tokens": 6, "temperature": 1.5, "seed": 3})
    )
    try:
        prompt = tuple(_prompts(1)[0])
        votes = [JudgeRequest(prompt, vote=v) for v in range(6)]
        texts = [g.text for g in judge.generate(votes)]
        again = [g.text for g in judge.generate([votes[4], votes[0]])]
    finally:
        judge.shutdown()
    assert len(set(texts)) > 1, texts  # not six copies of one sample
    assert again == [texts[4], texts[0]]  # a vote's draw depends on its seed, not on its batch
