"""Starting the environment's judges on resources of their own, putting a colocated one to sleep,
and saying where they run."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import ray

from nemo_genrm.config import ConfigError, GenRMConfig, JudgeConfig
from nemo_genrm.judges.base import Judge
from nemo_genrm.judges.fitting import missing_folder
from nemo_genrm.judges.placement import JudgeResources, acquire_resources
from nemo_genrm.samples.metrics import StepTally

logger = logging.getLogger(__name__)


def judge_config(cfg: GenRMConfig) -> JudgeConfig:
    """The ``judge`` section, with ``dtensor.sleep_buffers: auto`` resolved for the placement."""
    judge = cfg.judge
    if judge.dtensor.sleep_buffers != "auto" or cfg.resources.placement != "colocated":
        return judge
    # A colocated judge sleeps every step: its pinned buffers are allocated at load, so the
    # first sleep runs at copy speed too.
    return judge.model_copy(update={"dtensor": judge.dtensor.model_copy(update={"sleep_buffers": "at_load"})})


def start_judge(
    judge: JudgeConfig,
    cfg: GenRMConfig,
    *,
    placement_group: Any = None,
    policy_gpu_fraction: float | None = None,
) -> tuple[Judge, JudgeResources]:
    """Acquire a judge's resources (``cfg.resources``) and start it there.

    Args:
        judge: The judge to start (``judge``, or an entry of ``reward.judges``).
        cfg: The environment's config (resources and fault tolerance).
        placement_group: Colocated only: the placement group to join.
        policy_gpu_fraction: Colocated only: the policy's share of each GPU, when known.

    Returns:
        The judge and its resources (released by the caller after the judge's shutdown).

    Raises:
        ConfigError: The layout does not fit the cluster, or the judge refused its config; the
            resources are released before it raises.
    """
    from nemo_genrm.judges import create_judge

    resources = acquire_resources(
        judge,
        cfg.resources,
        placement_group=placement_group,
        policy_gpu_fraction=policy_gpu_fraction,
        ready_timeout_s=cfg.fault_tolerance.startup_timeout_s,
    )
    try:
        return create_judge(judge, resources.placement, fault_tolerance=cfg.fault_tolerance), resources
    except BaseException:
        resources.release()
        raise


def check_judge_sources(cfg: GenRMConfig) -> None:
    """Check, before anything starts, that each judge's checkpoint folder exists and its engine
    is installed in this Python (the actor's: it runs on the driver's interpreter).

    The tokenizer (``judge.tokenizer``, else ``model_name``) is checked by loading it
    (:func:`~nemo_genrm.env.answer_room.check_answer_room`); here a local ``model_name`` must hold a
    ``config.json``, and one the tokenizer load does not read (``judge.tokenizer`` set) must
    exist. Hub ids are left to the engine. An HTTP judge's ``model_name`` is the server's name
    for it and is not checked.

    Raises:
        ConfigError: Every judge's problems, at once.
    """
    configs = [("judge", cfg.judge)] + [(f"reward.judges[{i}]", j) for i, j in enumerate(cfg.reward.judges)]
    problems = []
    for where, judge in configs:
        why = _model_folder_problem(judge.model_name, tokenizer_set=bool(judge.tokenizer))
        if judge.backend != "http" and why is not None:
            problems.append(f"{where}.model_name: no model could be loaded from {judge.model_name!r}: {why}")
        if judge.backend == "vllm" and importlib.util.find_spec("vllm") is None:
            problems.append(
                f"{where}.backend is 'vllm', but vLLM is not installed for {sys.executable}: "
                "pip install 'nemo-genrm[vllm]' there, or use backend: dtensor"
            )
    if problems:
        raise ConfigError(problems)


def _model_folder_problem(name: str, *, tokenizer_set: bool) -> str | None:
    """Why ``name`` holds no model: a folder that does not exist (when the tokenizer load would
    not say so itself), or one without ``config.json`` (a tokenizer's folder, say)."""
    folder = os.path.expanduser(name)
    if os.path.isdir(folder):
        if os.path.isfile(os.path.join(folder, "config.json")):
            return None
        return "the folder has no config.json (a tokenizer's folder?); give the judge checkpoint's folder"
    return missing_folder(name) if tokenizer_set else None


def check_score_labels(cfg: GenRMConfig, judges: Sequence[Judge]) -> None:
    """At start-up, have every voting judge that reads verdicts from logprobs check the labels
    the mode scores (pairwise: the choice markers; otherwise the binary labels).

    An engine that cannot score them (the HTTP engine with labels of several tokens) would
    otherwise fail on every prompt of every step.

    Args:
        cfg: The environment's config.
        judges: ``judge``, then the judges of ``reward.judges``, in order.

    Raises:
        ConfigError: Every judge's problems with the labels, at once.
    """
    verdict = cfg.verdict
    pairwise = cfg.reward.mode == "pairwise_group"
    labels = list(verdict.choice_markers) if pairwise else [verdict.positive, verdict.negative]
    configs = [("judge", cfg.judge)] + [(f"reward.judges[{i}]", j) for i, j in enumerate(cfg.reward.judges)]
    problems = []
    for (where, config), judge in zip(configs, judges, strict=True):
        if config.verdict_from != "logprobs":
            continue
        try:
            judge.check_score_labels(labels)
        except ConfigError as err:
            source = "verdict.choice_markers" if pairwise else "verdict.positive/negative"
            problems += [f"{where} (verdict_from: logprobs, labels from {source}): {p}" for p in err.problems]
    if problems:
        raise ConfigError(problems)


def placement_info(resources: JudgeResources | None, judge: Judge) -> dict[str, Any]:
    """Where a judge runs: the layout, and per worker its pid, resources and group.

    Args:
        resources: The judge's resources (``None`` for a judge handed in ready).
        judge: The judge.

    Returns:
        ``{"layout": ..., "owned_groups": [group ids], "joined_group": id or None,
        "replicas": [[{"pid", "resources", "placement_group_id", "gpu_ids"}, ...], ...]}``;
        ``replicas`` is empty for an engine without Ray workers (in process, HTTP).
    """
    res = resources
    info: dict[str, Any] = {
        "layout": res.layout if res is not None else "injected",
        "owned_groups": [g.id.hex() for g in res.owned_groups] if res is not None else [],
        "joined_group": res.joined_group.id.hex() if res is not None and res.joined_group is not None else None,
        "replicas": [],
    }
    actors = getattr(getattr(judge, "pool", None), "actors", None)
    for hosts in (actors() if callable(actors) else actors) or []:
        info["replicas"].append(ray.get([h.__ray_call__.remote(worker_facts) for h in hosts], timeout=60))
    return info


def sleep_judge(judge: Judge, tally: StepTally) -> None:
    """Put a colocated judge to sleep, timing it into ``tally``; a failure is logged, the
    verdicts are kept."""
    t0 = time.perf_counter()
    try:
        judge.sleep()
    except Exception:
        logger.exception("could not put the colocated judge to sleep")
    tally.sleep_s += time.perf_counter() - t0


def worker_facts(_host: Any) -> dict[str, Any]:
    """Runs inside a judge worker actor: its pid, resources and placement group."""
    import os

    context = ray.get_runtime_context()
    return {
        "pid": os.getpid(),
        "resources": context.get_assigned_resources(),
        "placement_group_id": context.get_placement_group_id(),
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
    }
