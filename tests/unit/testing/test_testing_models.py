"""Tests of nemo_genrm.testing: the tiny tokenizer, tiny models and fixed-verdict judges.

Everything is built offline into a per-module temporary cache; judges are loaded with plain
``AutoModelForCausalLM.from_pretrained`` and decoded greedily with ``model.generate``.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from nemo_genrm.testing import (
    CACHE_ENV_VAR,
    EOS_TOKEN,
    JUDGE_TOKENS,
    PAD_TOKEN,
    TinyModelSpec,
    build_fixed_verdict_judge,
    build_tiny_model,
    build_tiny_tokenizer,
    cached_tiny_judge,
    cached_tiny_model,
    cached_tiny_tokenizer,
    default_cache_dir,
    fixed_verdict_token_ids,
)
from nemo_genrm.testing import cache as cache_module

# The texts the verdict parsers and tests need, plus the empty answer and a rating verdict.
JUDGE_TEXTS = ["1", "0", "[[A]]", "[[B]]", "Judgement: 1", "maybe", "", "Rating: [[7]]"]
LONG_CONTENT = " ".join(f"Step {i}: add {i % 10} to the total of {3 * i}." for i in range(70))


@pytest.fixture(scope="module", autouse=True)
def single_torch_thread():
    """These models are too small to gain from intra-op threads; on a busy 2-core machine
    extra threads only contend (a tiny matmul was 10x slower with 2 threads than with 1)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny_cache")


@pytest.fixture(scope="module")
def tokenizer(cache_dir):
    return AutoTokenizer.from_pretrained(cached_tiny_tokenizer(cache_dir=cache_dir))


@pytest.fixture(scope="module")
def conversations():
    return [
        [{"role": "user", "content": "What is 2 + 2?"}],
        [
            {"role": "system", "content": "You are a strict grader."},
            {"role": "user", "content": "Reference answer: 4. Response: Answer: 4"},
        ],
        # Content made of the judges' own tokens must not derail them.
        [{"role": "user", "content": "1 0 [[A]] [[B]] Judgement: 0 maybe\n"}],
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Grade this: \\boxed{12}"},
        ],
    ]


def _batch(tokenizer, conversations):
    """Conversations as one left-padded batch of generation prompts."""
    texts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in conversations]
    return tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)


@pytest.fixture(scope="module")
def short_batch(tokenizer, conversations):
    return _batch(tokenizer, conversations)


@pytest.fixture(scope="module")
def long_batch(tokenizer, conversations):
    """A 1,500+ token prompt left-padded next to two short ones."""
    return _batch(tokenizer, [[{"role": "user", "content": LONG_CONTENT}], *conversations[1:3]])


# --- tokenizer ---------------------------------------------------------------------------


def test_tokenizer_loads_with_special_tokens_and_config(tokenizer, cache_dir):
    assert tokenizer.eos_token == EOS_TOKEN
    assert tokenizer.pad_token == PAD_TOKEN
    assert tokenizer.padding_side == "left"
    assert len(tokenizer) % 64 == 0
    assert 300 <= len(tokenizer) <= 1024
    config_file = next(cache_dir.glob("tokenizer-*")) / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    assert "<|im_start|>" in config["chat_template"]
    assert config["eos_token"] == EOS_TOKEN and config["pad_token"] == PAD_TOKEN
    assert config["clean_up_tokenization_spaces"] is False


def test_chat_template_is_chatml(tokenizer):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    body = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
    assert tokenizer.apply_chat_template(messages, tokenize=False) == body
    with_prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert with_prompt == body + "<|im_start|>assistant\n"


def test_generation_prompt_always_ends_with_the_same_token(short_batch, long_batch, tokenizer):
    last_ids = short_batch["input_ids"][:, -1].tolist() + long_batch["input_ids"][:, -1].tolist()
    assert len(set(last_ids)) == 1
    assert tokenizer.decode(last_ids[:1]) == "\n"


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 42.",  # plain English and digits
        "  leading and trailing spaces  ",  # spaces are bytes, not dropped
        "x^2 + 2x + 1 = (x + 1)^2, so \\boxed{-1}",  # maths and backslashes
        "line one\n\nline two\ttabbed",  # newlines and tabs
        "Judgement: 1 [[A]][[B]] Rating: [[10]]",  # judge-format strings
        "héllo wörld, 3 × 4 = 12 🙂",  # non-ASCII via byte fallback
        "don't , . ? !",  # no clean-up of spaces before punctuation
    ],
)
def test_tokenizer_round_trips_text(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text


@pytest.mark.parametrize("text", [*JUDGE_TOKENS, *"0123456789"])
def test_judge_strings_are_single_tokens(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) == 1
    assert tokenizer.decode(ids, skip_special_tokens=True) == text


def test_tokenizer_is_deterministic_and_fast(tmp_path, cache_dir):
    start = time.process_time()  # CPU time: what building costs, whatever else the machine runs
    build_tiny_tokenizer(tmp_path / "a")
    elapsed = time.process_time() - start
    build_tiny_tokenizer(tmp_path / "b")
    cached = cached_tiny_tokenizer(cache_dir=cache_dir)  # built here when no test before built it
    for name in ("tokenizer.json", "tokenizer_config.json"):
        first = (tmp_path / "a" / name).read_bytes()
        assert first == (tmp_path / "b" / name).read_bytes()
        assert first == (cached / name).read_bytes()
    assert elapsed < 2.0


# --- tiny random models ------------------------------------------------------------------


def test_same_seed_gives_identical_weights_and_other_seed_differs(tmp_path):
    dirs = {name: build_tiny_model(tmp_path / name, seed=seed) for name, seed in [("a", 0), ("b", 0), ("c", 1)]}
    weights = {name: load_file(path / "model.safetensors") for name, path in dirs.items()}
    assert weights["a"].keys() == weights["b"].keys() == weights["c"].keys()
    for key, tensor in weights["a"].items():
        assert torch.equal(tensor, weights["b"][key]), key
    differing = [k for k, t in weights["a"].items() if not torch.equal(t, weights["c"][k])]
    # Norm weights are ones for every seed; every other tensor depends on the seed.
    assert sorted(differing) == sorted(k for k in weights["a"] if not k.endswith("norm.weight"))


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_tiny_model_loads_and_allows_tensor_parallel_two(arch, cache_dir, tokenizer):
    path = cached_tiny_model(arch=arch, cache_dir=cache_dir)
    model = AutoModelForCausalLM.from_pretrained(path)
    config = model.config
    assert config.model_type == arch
    assert config.hidden_size // config.num_attention_heads >= 32  # vLLM's minimum head size
    assert config.num_attention_heads % 2 == 0 and config.num_key_value_heads % 2 == 0
    assert config.vocab_size == len(tokenizer) and config.vocab_size % 2 == 0
    assert config.tie_word_embeddings is False
    assert model.generation_config.eos_token_id == tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    assert model.generation_config.pad_token_id == tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    assert (model.model.layers[0].self_attn.q_proj.bias is not None) == (arch == "qwen2")
    ids = tokenizer("Question: what is 3 + 4?", return_tensors="pt")["input_ids"]  # [1, T]
    with torch.no_grad():
        logits = model(ids).logits  # [1, T, V]
    assert logits.shape == (1, ids.shape[1], len(tokenizer))
    assert torch.isfinite(logits).all()
    assert logits[0, -1].std() > 1.0  # peaked enough for stable greedy decoding


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"arch": "gpt2"}, "arch"),  # unsupported architecture
        ({"hidden_size": 64, "num_heads": 4}, "head size 16"),  # vLLM needs heads >= 32
        ({"hidden_size": 96, "num_heads": 5}, "not divisible by num_heads"),
        ({"num_heads": 2, "num_kv_heads": 3}, "num_kv_heads"),
        ({"dtype": "int8"}, "dtype"),
    ],
)
def test_invalid_spec_is_rejected(spec, match):
    with pytest.raises(ValueError, match=match):
        TinyModelSpec(**spec)


# --- fixed-verdict judges ----------------------------------------------------------------


@pytest.fixture(scope="module")
def load_judge(cache_dir):
    loaded = {}

    def load(text):
        if text not in loaded:
            loaded[text] = AutoModelForCausalLM.from_pretrained(cached_tiny_judge(text, cache_dir=cache_dir))
        return loaded[text]

    return load


def _assert_generates(model, tokenizer, batch, text):
    """Greedy decoding gives exactly the tokens of ``text`` then EOS, in every row.

    Also checks that the first step puts more than 0.99 of the probability on the first token
    (what "verdict from logprobs" reads).
    """
    expected = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
    with torch.no_grad():
        out = model.generate(
            **batch,
            do_sample=False,
            max_new_tokens=len(expected) + 3,
            return_dict_in_generate=True,
            output_logits=True,
        )
    generated = out.sequences[:, batch["input_ids"].shape[1] :]  # [B, N]
    assert generated.tolist() == [expected] * generated.shape[0]
    for row in generated:
        assert tokenizer.decode(row, skip_special_tokens=True) == text
    first_probs = torch.softmax(out.logits[0].float(), dim=-1)  # [B, V]
    assert (first_probs[:, expected[0]] > 0.99).all()


@pytest.mark.parametrize("text", JUDGE_TEXTS)
def test_fixed_judge_generates_its_text_then_eos(text, load_judge, tokenizer, short_batch, long_batch):
    assert long_batch["input_ids"].shape[1] >= 1500
    assert (long_batch["attention_mask"] == 0).any()  # really left padded
    model = load_judge(text)
    _assert_generates(model, tokenizer, long_batch, text)
    _assert_generates(model, tokenizer, short_batch, text)
    unpadded = _batch(tokenizer, [[{"role": "user", "content": "2?"}]])
    _assert_generates(model, tokenizer, unpadded, text)


def test_fixed_judge_in_bfloat16_llama(tmp_path, tokenizer, short_batch):
    path = build_fixed_verdict_judge(
        tmp_path / "judge",
        "Judgement: 1",
        arch="llama",
        seed=5,
        dtype="bfloat16",
        hidden_size=128,
        num_heads=4,
        num_kv_heads=2,
    )
    model = AutoModelForCausalLM.from_pretrained(path)
    assert model.dtype == torch.bfloat16
    _assert_generates(model, tokenizer, short_batch, "Judgement: 1")


@pytest.mark.parametrize(
    "text, match",
    [
        ("11", "more than once"),  # "1" twice
        ("1 1", "more than once"),  # "1" twice, around a space token
        ("Judgement:\n1", "ends every generation prompt"),  # the newline token
        ("1<|im_end|>", "special"),  # EOS cannot be part of the text
        ("<|endoftext|>", "special"),  # nor can padding
        ("<|reserved_3|>", "special"),  # nor a reserved token (decoding would drop it)
    ],
)
def test_impossible_texts_raise(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        build_fixed_verdict_judge(tmp_path / "judge", text)
    assert not (tmp_path / "judge").exists()  # checked before anything is written


def test_text_longer_than_the_model_width_raises(tokenizer):
    assert len(fixed_verdict_token_ids(tokenizer, "Judgement: 1", max_tokens=3)) == 3
    with pytest.raises(ValueError, match="exceed the limit of 2"):
        fixed_verdict_token_ids(tokenizer, "Judgement: 1", max_tokens=2)


# --- cache -------------------------------------------------------------------------------


def test_cache_reuses_a_build_and_keys_on_arguments(cache_dir, monkeypatch):
    first = cached_tiny_judge("1", cache_dir=cache_dir)

    def no_rebuild(*args, **kwargs):
        raise AssertionError("the cached judge was rebuilt")

    monkeypatch.setattr(cache_module, "build_fixed_verdict_judge", no_rebuild)
    assert cached_tiny_judge("1", cache_dir=cache_dir) == first
    monkeypatch.undo()
    assert cached_tiny_judge("0", cache_dir=cache_dir) != first
    assert cached_tiny_judge("1", cache_dir=cache_dir, seed=1) != first
    assert not [p for p in cache_dir.glob(".*") if p.is_dir()]  # no temporary folders left behind


def test_cache_folder_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "env_cache"))
    assert default_cache_dir() == (tmp_path / "env_cache").resolve()
    path = cached_tiny_tokenizer()
    assert path.parent == default_cache_dir()
    assert AutoTokenizer.from_pretrained(path).eos_token == EOS_TOKEN


def test_a_second_caller_waits_for_the_build_in_progress_and_reuses_it(tmp_path, monkeypatch):
    # The demo judge trains for minutes: a second process (or thread) asking for a model being
    # built waits on the build's lock and takes its folder instead of building it again.
    started = threading.Event()
    builds = []
    real_build = cache_module.build_tiny_model

    def slow_build(path, **kwargs):
        builds.append(path)
        started.set()
        time.sleep(1.0)  # the second caller arrives while this build runs
        return real_build(path, **kwargs)

    monkeypatch.setattr(cache_module, "build_tiny_model", slow_build)
    results, errors = [], []

    def worker():
        try:
            results.append(cached_tiny_model(cache_dir=tmp_path, seed=3))
        except Exception as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)

    first = threading.Thread(target=worker)
    first.start()
    assert started.wait(timeout=30)
    second = threading.Thread(target=worker)
    second.start()
    for thread in (first, second):
        thread.join(timeout=60)
    assert not errors
    assert len(builds) == 1  # built once
    assert len(results) == 2 and results[0] == results[1]
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == [results[0].name]  # temp folders removed
    assert (results[0] / "model.safetensors").is_file()


def test_a_build_that_failed_releases_its_lock(tmp_path, monkeypatch):
    real_build = cache_module.build_tiny_model

    def failing_build(path, **kwargs):
        raise RuntimeError("out of disk")

    monkeypatch.setattr(cache_module, "build_tiny_model", failing_build)
    with pytest.raises(RuntimeError, match="out of disk"):
        cached_tiny_model(cache_dir=tmp_path, seed=4)
    monkeypatch.setattr(cache_module, "build_tiny_model", real_build)
    assert (cached_tiny_model(cache_dir=tmp_path, seed=4) / "model.safetensors").is_file()  # no wait: built
