"""Floors and bare-transformers references for ``bench_gpu_judge.py``, measured on the spot."""

from __future__ import annotations

import time
from pathlib import Path

import torch


def sync(device: torch.device) -> None:
    """Wait for the device (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _best(fn, device: torch.device, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - start)
    return best


def matmul_peak(device: torch.device, dtype: torch.dtype, n: int, repeats: int = 20) -> float:
    """Measured FLOP/s of an ``n x n`` by ``n x n`` matmul (best of ``repeats``)."""
    a = torch.randn(n, n, device=device, dtype=dtype)  # [n, n]
    b = torch.randn(n, n, device=device, dtype=dtype)  # [n, n]
    return 2 * n**3 / _best(lambda: torch.matmul(a, b), device, repeats)


def memory_bandwidth(device: torch.device, nbytes: int, repeats: int = 10) -> float:
    """Device memory bandwidth in bytes/s: a copy reads and writes ``nbytes`` each."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    return 2 * nbytes / _best(lambda: dst.copy_(src), device, repeats)


def copy_bandwidth(device: torch.device, nbytes: int, repeats: int = 5) -> dict[str, float]:
    """Pinned host<->device copy bandwidth (plain host copies on CPU), bytes/s each way."""
    pin = device.type == "cuda"
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pin).fill_(1)
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    h2d = _best(lambda: dev.copy_(host, non_blocking=pin), device, repeats)
    d2h = _best(lambda: host.copy_(dev, non_blocking=pin), device, repeats)
    return {"host_to_device_bytes_per_s": nbytes / h2d, "device_to_host_bytes_per_s": nbytes / d2h}


def build_model(path: Path, dims: dict, dtype: torch.dtype, device: torch.device) -> dict:
    """Save a random-weight Qwen2 of ``dims`` with the tiny tokenizer; returns its sizes."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    from nemo_genrm.judges.hf_generation import kv_bytes_per_token
    from nemo_genrm.testing import EOS_TOKEN, PAD_TOKEN, build_tiny_tokenizer, make_tiny_tokenizer

    tok = make_tiny_tokenizer()
    config = Qwen2Config(
        **dims,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        eos_token_id=tok.convert_tokens_to_ids(EOS_TOKEN),
        pad_token_id=tok.convert_tokens_to_ids(PAD_TOKEN),
        bos_token_id=None,
    )
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.save_pretrained(str(path))
    build_tiny_tokenizer(path)
    layer = model.model.layers[0]
    per_layer = sum(p.numel() for p in layer.parameters() if p.dim() == 2)  # the matmul weights
    element = torch.finfo(dtype).bits // 8
    shapes = {
        "matmul_params": per_layer * dims["num_hidden_layers"] + dims["vocab_size"] * dims["hidden_size"],
        "weight_bytes": sum(p.numel() for p in model.parameters()) * element,
        "kv_bytes_per_token": kv_bytes_per_token(config, 1, element),
        "layers": dims["num_hidden_layers"],
        "hidden": dims["hidden_size"],
    }
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return shapes


def flops_per_token(shapes: dict, context: int) -> float:
    """Forward FLOPs of one token at ``context`` tokens: 2 per matmul weight plus causal attention.

    The LM head counts as one matmul (the bench keeps only the last position's logits, so this
    overstates the work a little and the MFU printed errs low).
    """
    return 2 * shapes["matmul_params"] + 2 * shapes["layers"] * context * shapes["hidden"]


def mixed_prompts(n: int, low: int, high: int, seed: int):
    """``n`` fitted prompts of uniform random lengths in ``[low, high]`` from the tiny vocabulary."""
    from nemo_genrm.judges.fitting import FittedPrompt

    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(low, high + 1, (n,), generator=gen).tolist()
    return [FittedPrompt(tuple(torch.randint(3, 700, (k,), generator=gen).tolist())) for k in lengths]


def bare_generate_batches(worker, batches, new_tokens: int, cache: str | None) -> list[list[list[int]]]:
    """Bare ``model.generate`` (greedy) over ready-made batches: new ids per row, per batch."""
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=new_tokens,
        do_sample=False,
        eos_token_id=worker.eos_ids,
        pad_token_id=worker.pad_id,
        cache_implementation=cache,
    )
    out = []
    with torch.no_grad():
        for batch in batches:
            ids, mask = worker._pad(batch)  # [B, T]
            seqs = worker.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
            out.append(seqs[:, ids.shape[1] :].tolist())  # [B, N]
    return out
