"""Helpers shared by the judge-engine benchmarks: offline setup, timing, prompts, JSON results.

Each benchmark measures the things it compares side by side in one run (so machine load hits
both sides alike), prints the ratios, and writes ``bench/results/<name>.json`` with the machine
description and every timing.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def offline() -> None:
    """Environment for benchmarks: no hub access, quiet tokenizers, models cached in /tmp."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def alternate(
    fns: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Time several functions in alternation (A B A B ...), so drifting load hits each alike.

    Returns:
        Name -> the seconds of each timed run, and name -> the last run's result.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    last: dict[str, Any] = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            last[name] = fn()
            times[name].append(time.perf_counter() - start)
    return times, last


def median(values: list[float]) -> float:
    """The median of ``values``."""
    return statistics.median(values)


def judge_prompts(n: int, seed: int = 0) -> list[list[dict[str, str]]]:
    """``n`` consistency-style judge conversations of mixed lengths (question, reference, answer)."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        steps = " ".join(f"Step {k}: carry the partial sum forward." for k in range(rng.randint(1, 12)))
        answer = a + b if rng.random() < 0.5 else a + b + rng.randint(1, 9)
        user = (
            f"Question: what is {a} + {b}?\nReference answer: {a + b}\n"
            f"Candidate answer: {steps} The result is {answer}.\n"
            "Reply with 1 if the candidate's final answer equals the reference, otherwise 0."
        )
        out.append([{"role": "system", "content": "You grade answers."}, {"role": "user", "content": user}])
    return out


def machine() -> dict[str, Any]:
    """A short description of where the numbers come from."""
    import torch

    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    try:
        info["load_avg_1m"] = os.getloadavg()[0]
    except OSError:
        pass
    return info


def write_result(name: str, payload: dict[str, Any], out: str | None = None) -> Path:
    """Write ``payload`` (plus the machine description) to ``bench/results/<name>.json``.

    Returns:
        The file written.
    """
    path = Path(out) if out else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"benchmark": name, "machine": machine(), **payload}, indent=2) + "\n")
    return path


DEMO_CONFIG = Path(__file__).resolve().parents[1] / "examples" / "configs" / "grpo_genrm_tiny.yaml"
"""The default run's config (the demo)."""


def demo_run_inputs(overrides: list[str], log_dir: str) -> tuple[Any, list, list]:
    """The demo's config with ``overrides`` (models resolved, logs into ``log_dir``, no
    checkpoints, no TensorBoard, no progress bar) and its rendered train and validation prompts:
    what a bench needs to run the demo's GRPO loop in its own process, with judges of its choosing.
    """
    from transformers import AutoTokenizer

    from nemo_genrm.grpo.config import load_grpo_config
    from nemo_genrm.grpo.data import PolicyPromptRenderer, load_splits
    from nemo_genrm.grpo.runner import resolve_models

    fixed = [
        f"logger.log_dir={log_dir}",
        "checkpointing.enabled=false",
        "logger.tensorboard_enabled=false",
        "logger.progress_bar=false",
    ]
    cfg = resolve_models(load_grpo_config(DEMO_CONFIG, [*fixed, *overrides]))
    tokenizer = AutoTokenizer.from_pretrained(cfg.policy.tokenizer_name)
    splits = load_splits(cfg.data, cfg.grpo.seed)
    renderer = PolicyPromptRenderer(cfg.data, tokenizer)
    max_prompt = cfg.policy.max_total_sequence_length - cfg.policy.generation.max_new_tokens
    return cfg, renderer.render_all(splits.train, max_prompt), renderer.render_all(splits.val, max_prompt)
