"""A judge reward for verl: ``custom_reward_function`` pointing at :func:`compute_score`.

verl (0.9) loads the function named in ``reward.custom_reward_function`` (``path:
pkg://nemo_genrm.integrations.verl``, ``name: compute_score``), adds the section's
``reward_kwargs`` to every call, and, because it is a coroutine function, awaits it once per
response in its reward loop with ``data_source``, ``solution_str`` (the decoded response),
``ground_truth`` (``reward_model.ground_truth`` of the row) and ``extra_info``; when verl runs a
reward model server it also passes ``reward_router_address`` and ``reward_model_tokenizer``.

The judge is built once per process from ``reward_kwargs.genrm_config`` (a YAML path or the
``env.genrm`` mapping) and shared by every call; concurrent calls are joined into one judge
batch by the environment. With ``judge.backend: http`` it calls any OpenAI-compatible server:
this package's judge service (:mod:`nemo_genrm.serve`), or, when ``judge.http.base_url`` is
left empty and verl passes ``reward_router_address``, verl's own reward model router.

The returned dict holds ``score`` (the reward verl trains on) and what verl logs per sample:
``acc`` (the verdict, ``None`` where the judge failed, which verl's validation metrics leave
out), ``pred`` (the extracted answer, for verl's majority vote), ``genrm_reason`` and
``genrm_judge_failed``. Nothing here imports verl.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from nemo_genrm.integrations.judge_reward import JudgeReward, Judgement, genrm_section

logger = logging.getLogger(__name__)

__all__ = ["compute_score", "result_fields", "shared_reward", "close_shared_rewards"]

_REWARDS: dict[str, JudgeReward] = {}
_LOCK = threading.Lock()


def _with_router(section: Any, reward_router_address: str | None) -> Any:
    """Point an ``http`` judge with no ``base_url`` at verl's reward model router."""
    if reward_router_address is None or not isinstance(section, Mapping):
        return section
    judge = section.get("judge")
    if not isinstance(judge, Mapping) or judge.get("backend") != "http":
        return section
    http = dict(judge.get("http") or {})
    if http.get("base_url"):
        return section
    http["base_url"] = f"http://{reward_router_address}/v1"
    return {**section, "judge": {**judge, "http": http}}


def shared_reward(
    genrm_config: Any, overrides: Sequence[str] = (), reward_router_address: str | None = None
) -> JudgeReward:
    """The process-wide :class:`JudgeReward` for this config, built on first use.

    Args:
        genrm_config: A YAML path, a run config or the ``env.genrm`` section.
        overrides: Overrides for a YAML path.
        reward_router_address: verl's reward model router (``host:port``), used as the judge's
            ``base_url`` when an ``http`` judge names none.

    Returns:
        The shared judge reward (one per distinct config and router).
    """
    if isinstance(genrm_config, (DictConfig, ListConfig)):  # reward_kwargs arrive as OmegaConf nodes
        genrm_config = OmegaConf.to_container(genrm_config, resolve=True)
    section = _with_router(genrm_section(genrm_config, overrides), reward_router_address)
    key = json.dumps(section, sort_keys=True, default=str)
    with _LOCK:
        reward = _REWARDS.get(key)
        if reward is None:
            reward = _REWARDS[key] = JudgeReward(section)
        return reward


def close_shared_rewards() -> None:
    """Shut down every judge :func:`shared_reward` built (e.g. at the end of a run or a test)."""
    with _LOCK:
        rewards = list(_REWARDS.values())
        _REWARDS.clear()
    for reward in rewards:
        reward.close()


def result_fields(judgement: Judgement) -> dict[str, Any]:
    """What :func:`compute_score` returns for one judgement."""
    failed = judgement.judge_failed
    return {
        "score": float(judgement.reward),
        "acc": None if failed else float(judgement.verdict or 0),
        "pred": judgement.answer or "",
        "genrm_reason": judgement.reason,
        "genrm_judge_failed": float(failed),
    }


def _question(extra_info: Any) -> str | None:
    if isinstance(extra_info, Mapping):
        for key in ("question", "problem", "query"):
            value = extra_info.get(key)
            if isinstance(value, str) and value:
                return value
    return None


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    reward_router_address: str | None = None,
    reward_model_tokenizer: Any = None,
    *,
    genrm_config: Any = None,
    genrm_overrides: Sequence[str] = (),
    **_: Any,
) -> dict[str, Any]:
    """Judge one verl response against its reference.

    Args:
        data_source: The row's ``data_source`` (not used by the judge; verl groups metrics by it).
        solution_str: The decoded response.
        ground_truth: The reference answer.
        extra_info: The row's ``extra_info``; its ``question`` (or ``problem``, ``query``) is
            shown to the judge when present.
        reward_router_address: verl's reward model router, when verl runs one.
        reward_model_tokenizer: verl's reward model tokenizer (not needed: the judge engine
            applies its own chat template).
        genrm_config: From ``reward_kwargs``: a YAML path or the ``env.genrm`` mapping.
        genrm_overrides: From ``reward_kwargs``: overrides for a YAML ``genrm_config``.

    Returns:
        ``{"score", "acc", "pred", "genrm_reason", "genrm_judge_failed"}`` (see the module
        docstring).

    Raises:
        ValueError: No ``genrm_config`` in ``reward_kwargs``.
        ConfigError: Every problem with the config, at once (on the first call).
    """
    if genrm_config is None:
        raise ValueError(
            "nemo_genrm compute_score needs reward.custom_reward_function.reward_kwargs.genrm_config "
            "(a YAML path or the env.genrm mapping)"
        )
    reward = await asyncio.to_thread(shared_reward, genrm_config, tuple(genrm_overrides), reward_router_address)
    reference = ground_truth if ground_truth is None else str(ground_truth)
    (judgement,) = await reward.ajudge([solution_str], [reference], [_question(extra_info)])
    return result_fields(judgement)
