"""The demo's trained models, built on first use and cached like the other tiny models.

``tiny://demo-judge`` and ``tiny://demo-policy`` resolve to these folders: the package's
``pyproject.toml`` offers :func:`cached_demo_judge` and :func:`cached_demo_policy` to the driver's
:mod:`nemo_genrm.grpo.models` as entry points (the driver sits below the demo, so it cannot
import them). The cache key holds every training setting, the
task module's version, a hash of the judge prompt the package renders (so the judge follows a
change of the consistency prompt) and the tokenizer corpus (through
:func:`nemo_genrm.testing.cache.cached_artifact`), so a change to any of them trains afresh instead
of reusing stale weights.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from nemo_genrm.demo.judge import JUDGE_REPORT, JudgeTraining, prompt_fingerprint, train_demo_judge
from nemo_genrm.demo.policy import PolicyTraining, train_demo_policy

__all__ = ["DEMO_VERSION", "cached_demo_judge", "cached_demo_policy", "demo_judge_accuracy"]

DEMO_VERSION = 7
"""Bump when the task, the training cases or the training code change the weights."""


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Train on one torch thread: the matrices are tiny, and extra threads only spin and wait."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _cached(
    name: str, label: str, key: dict[str, Any], train: Callable[[Path, Any], None], training: Any, cache_dir: Any
) -> Path:
    """``cached_artifact`` over a training function run on one torch thread."""
    from nemo_genrm.testing.cache import cached_artifact

    def build(path: Path) -> None:
        with _one_thread():
            train(path, training)

    return cached_artifact(name, label, key, build, cache_dir=cache_dir)


def cached_demo_judge(training: JudgeTraining | None = None, *, cache_dir: str | os.PathLike | None = None) -> Path:
    """The trained demo judge's folder (trained on first use, a few minutes on two cores).

    Args:
        training: Training settings; the defaults when ``None``.
        cache_dir: Cache folder; ``$NEMO_GENRM_CACHE`` or ``~/.cache/nemo_genrm/tiny`` when ``None``.

    Returns:
        A folder that ``AutoModelForCausalLM.from_pretrained`` loads, holding :data:`JUDGE_REPORT`.
    """
    training = training or JudgeTraining()
    key = {"training": training.to_dict(), "demo_version": DEMO_VERSION, "prompt": prompt_fingerprint()}
    return _cached(
        "demo-judge", f"h{training.hidden_size}-s{training.seed}", key, train_demo_judge, training, cache_dir
    )


def cached_demo_policy(training: PolicyTraining | None = None, *, cache_dir: str | os.PathLike | None = None) -> Path:
    """The briefly supervised demo policy's folder (trained on first use, seconds).

    Args:
        training: Training settings; the defaults when ``None``.
        cache_dir: Cache folder, as for :func:`cached_demo_judge`.

    Returns:
        A folder that ``AutoModelForCausalLM.from_pretrained`` loads.
    """
    training = training or PolicyTraining()
    key = {"training": training.to_dict(), "demo_version": DEMO_VERSION}
    return _cached("demo-policy", f"s{training.seed}", key, train_demo_policy, training, cache_dir)


def demo_judge_accuracy(judge_dir: str | os.PathLike, key: str = "held_out_accuracy") -> float | None:
    """An accuracy recorded when the judge in ``judge_dir`` was trained, if any.

    ``key``: ``held_out_accuracy`` (cases drawn as in training, red-team text included) or
    ``plain_held_out_accuracy`` (honest answers and plain distractors only).
    """
    report = Path(judge_dir) / JUDGE_REPORT
    if not report.is_file():
        return None
    value = json.loads(report.read_text()).get(key)
    return None if value is None else float(value)
