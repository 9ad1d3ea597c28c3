"""A judge reward for verl: ``custom_reward_function`` pointing at :func:`compute_score`.

verl (0.9) loads the function named in ``reward.custom_reward_function`` (``path:
pkg://nemo_genrm.integrations.verl``, ``name: compute_score``), adds the section's
``reward_kwargs`` to every call, and, because it is a coroutine function, awaits it once per
response in its reward loop with ``data_source``, ``solution_str`` (the decoded response),
``ground_truth`` (``reward_model.ground_truth`` of the row) and ``extra_info`` (the row's
``extra_info`` only: verl's ``uid`` stays in the batch); when verl runs a reward model server
it also passes ``reward_router_address`` and ``reward_model_tokenizer``. This package's reward
manager (:class:`~nemo_genrm.integrations.verl_manager.GenRMRewardManager`) adds the row's
``uid`` and prompt token ids (``genrm_group``, ``genrm_prompt``).

The judge is built once per process from ``reward_kwargs.genrm_config`` (a YAML path or the
``env.genrm`` mapping) and shared by every call; concurrent calls are joined into one judge
batch by the environment, awaited without a thread each. With ``judge.backend: http`` it calls
any OpenAI-compatible server: this package's judge service (:mod:`nemo_genrm.serve`), or, when
``judge.http.base_url`` is left empty and verl passes ``reward_router_address``, verl's own
reward model router.

verl scores in ``reward.num_workers`` reward-loop worker processes (Ray actors, 8 by default),
and a GRPO group's responses reach several of them. In ``pairwise_group`` mode the workers
therefore share ONE judge per config, a named Ray actor (:mod:`nemo_genrm.integrations.verl_groups`),
which ranks each group whole whichever workers its responses reached; the reference and rubric
modes judge each response on its own, in the worker's process.

What each mode reads from a row: ``reference``: ``ground_truth``; ``pairwise_group``: the group
is the row's ``uid`` (verl's own GRPO group: one prompt in one step or validation batch) with
its data source and prompt, which only this package's reward manager passes
(:mod:`nemo_genrm.integrations.verl_manager`; without it the call raises ``ConfigError``), and
``reward.pairwise_group.group_size`` must be set (``rollout.n``); ``rubric``: the items in
``extra_info[reward.rubric.items_key]`` (a list; any other value is ``bad_input``), else
``reward.rubric.file``. The question shown is
``extra_info.question`` (or ``problem``, ``query``) when the row has one, as text or as
OpenAI-style content parts (their text parts are read).

The returned dict holds ``score`` (the reward verl trains on) and what verl logs per sample:
``acc`` (the verdict; ``None`` where the judge failed or the sample is masked, and in the modes
without a verdict, which verl's validation metrics leave out), ``pred`` (what the judge was
shown, the extracted answer in reference mode, for verl's majority vote), ``genrm_reason``,
``genrm_why`` (the reason's detail: what was wrong for ``bad_input``, else mostly ``None``),
``genrm_judge_failed`` and ``genrm_masked``. verl 0.9.1 has no way for a reward function to keep
a sample out of the loss: a masked sample or a judge failure trains as ``score`` 0.0 unless the
trainer drops the rows flagged ``genrm_masked`` / ``genrm_judge_failed`` (docs/integrations.md
says how). A judge gone for good raises :class:`~nemo_genrm.errors.JudgeUnavailableError` out of
the call, which stops verl's reward loop. Nothing here imports verl.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from nemo_genrm.integrations.judge_reward import Judgement, JudgeReward, check_per_sample, genrm_section, rubric_items
from nemo_genrm.integrations.verl_groups import GatheredReward, gathered_reward
from nemo_genrm.integrations.verl_padding import BatchSlot
from nemo_genrm.samples.groups import PROMPT_FIELD, SOURCE_FIELD, UNIQUE_FIELD
from nemo_genrm.samples.inputs import content_text

logger = logging.getLogger(__name__)

__all__ = [
    "UNMEASURED_FIELDS",
    "close_shared_rewards",
    "compute_score",
    "exclude_unmeasured",
    "result_fields",
    "shared_reward",
]

_REWARDS: dict[str, JudgeReward | GatheredReward] = {}  # by section
_BY_ARGS: dict[str, JudgeReward | GatheredReward] = {}  # by the arguments verl passes, for a lookup without I/O
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
) -> JudgeReward | GatheredReward:
    """The process-wide judge for this config, built on first use.

    In ``pairwise_group`` mode inside a Ray job (verl's reward-loop workers) it is the handle on
    the one actor every worker shares (:class:`~nemo_genrm.integrations.verl_groups.GatheredReward`),
    so that a group is ranked whole whichever workers its responses reach; otherwise a
    :class:`JudgeReward` in this process.

    Args:
        genrm_config: A YAML path, a run config or the ``env.genrm`` section.
        overrides: Overrides for a YAML path.
        reward_router_address: verl's reward model router (``host:port``), used as the judge's
            ``base_url`` when an ``http`` judge names none.

    Returns:
        The shared judge (one per distinct config and router).

    Raises:
        ConfigError: Every problem with the config, or a mode verl cannot feed (pairwise
            without ``group_size``).
    """
    known = _known(genrm_config, overrides, reward_router_address)
    if known is not None:
        return known
    args_key = _args_key(genrm_config, overrides, reward_router_address)
    if isinstance(genrm_config, (DictConfig, ListConfig)):  # reward_kwargs arrive as OmegaConf nodes
        genrm_config = OmegaConf.to_container(genrm_config, resolve=True)
    section = _with_router(genrm_section(genrm_config, overrides), reward_router_address)
    key = json.dumps(section, sort_keys=True, default=str)
    with _LOCK:
        reward = _REWARDS.get(key)
        if reward is None:
            reward = _REWARDS[key] = _build(section)
        _BY_ARGS[args_key] = reward
        return reward


def _build(section: Any) -> JudgeReward | GatheredReward:
    """The judge for a section: in this process, or, for pairwise groups in a Ray job, the
    actor every reward-loop worker shares (:mod:`nemo_genrm.integrations.verl_groups`)."""
    import ray

    from nemo_genrm.config import GenRMConfig, validate

    config = validate(GenRMConfig, section, prefix="env.genrm")
    # verl's reward-loop workers are Ray actors, several of them; a driver scoring alone keeps
    # its judge in process.
    in_actor = ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None
    if config.reward.mode == "pairwise_group" and in_actor and isinstance(section, Mapping):
        check_per_sample(config, "verl")  # refused here, before any actor starts
        return gathered_reward(section, config)
    return JudgeReward(config, per_sample="verl")


def _args_key(genrm_config: Any, overrides: Sequence[str], router: str | None) -> str:
    if isinstance(genrm_config, (DictConfig, ListConfig)):
        genrm_config = OmegaConf.to_container(genrm_config, resolve=False)
    return json.dumps([genrm_config, list(overrides), router], sort_keys=True, default=str)


def _known(genrm_config: Any, overrides: Sequence[str], router: str | None) -> JudgeReward | GatheredReward | None:
    """The reward already built for these arguments (no file is read, no thread taken)."""
    key = _args_key(genrm_config, overrides, router)
    with _LOCK:
        return _BY_ARGS.get(key)


def close_shared_rewards() -> None:
    """Shut down every judge :func:`shared_reward` built (e.g. at the end of a run or a test)."""
    with _LOCK:
        rewards = list(_REWARDS.values())
        _REWARDS.clear()
        _BY_ARGS.clear()
    for reward in rewards:
        reward.close()


def result_fields(judgement: Judgement, mode: str = "reference") -> dict[str, Any]:
    """What :func:`compute_score` returns for one judgement in reward mode ``mode``."""
    failed = judgement.judge_failed
    verdictless = mode != "reference"  # pairwise and rubric give a share, not a verdict
    return {
        "score": float(judgement.reward),
        "acc": None if failed or judgement.masked or verdictless else float(judgement.verdict or 0),
        "pred": judgement.answer or "",
        "genrm_reason": judgement.reason,
        "genrm_why": judgement.why,
        "genrm_judge_failed": float(failed),
        "genrm_masked": float(judgement.masked),
    }


UNMEASURED_FIELDS = ("genrm_masked", "genrm_judge_failed")
"""The fields of :func:`result_fields` that flag a row whose score (0.0) measures nothing."""


def exclude_unmeasured(data: Any) -> int:
    """Keep the rows flagged in :data:`UNMEASURED_FIELDS` out of verl's GRPO update, in place.

    verl 0.9.1 offers a reward function no way to keep a sample out of the loss: what
    :func:`compute_score` returns besides ``score`` lands in the batch's ``non_tensor_batch``,
    which the advantage estimators do not read. Call this on the batch between the reward and
    ``compute_advantage`` (a ``RayPPOTrainer`` subclass, or ``compute_advantage`` wrapped in
    the process that runs the trainer): each flagged row gets a ``uid`` of its own, so it leaves
    its group's mean and standard deviation, and a ``response_mask`` of zeros, so its
    advantage is 0 and none of its tokens enters the loss.

    Args:
        data: verl's ``DataProto`` after the reward: ``non_tensor_batch`` holds ``uid`` and the
            flags, ``batch`` holds ``response_mask`` ``[B, T]``.

    Returns:
        The number of rows excluded.
    """
    import numpy as np

    flags = np.zeros(len(data), dtype=bool)  # [B]
    for key in UNMEASURED_FIELDS:
        if key in data.non_tensor_batch:
            flags |= np.asarray(data.non_tensor_batch[key], dtype=float) == 1.0
    rows = np.flatnonzero(flags)
    if rows.size:
        uids = np.array(data.non_tensor_batch["uid"], dtype=object)  # a copy: other views keep theirs
        for row in rows:
            uids[row] = f"{uids[row]}/genrm-excluded-{row}"
        data.non_tensor_batch["uid"] = uids
        data.batch["response_mask"][rows] = 0  # [B, T]
    return int(rows.size)


_NO_GROUP = (
    "reward.mode pairwise_group in verl needs nemo_genrm's reward manager, which passes compute_score "
    "each row's uid and prompt: set reward.reward_manager to {source: importlib, name: GenRMRewardManager, "
    "module: {path: pkg://nemo_genrm.integrations.verl_manager}}. verl's own managers pass extra_info alone, "
    "whose index verl's preprocessing numbers from 0 in every data file: responses to different prompts "
    "(two files, training and validation, padding copies) would be ranked as one group"
)


_BATCH_PATH = (
    "reward.mode pairwise_group on verl's batch reward path (reward.reward_model.enable without "
    "reward.reward_model.enable_resource_pool) needs each row's place in verl's padded batch: verl pads that "
    "batch with exact copies of its first rows (pad_dataproto_to_divisor), which only their place tells apart "
    "from the rows they copy. GenRMRewardManager passes it from a reward-loop worker named reward_loop_worker_<i> "
    "(verl's RewardLoopManager); this row came without it. Score through verl's RewardLoopManager, set "
    "reward.reward_model.enable_resource_pool: true (verl then scores each trajectory as it finishes), or serve "
    "the judge outside verl (judge.backend: http with a base_url, reward.reward_model.enable: false)"
)


def _mode_inputs(
    reward: JudgeReward | GatheredReward,
    extra_info: Any,
    data_source: Any,
    group: str | None,
    prompt: Any,
) -> dict[str, Any] | None:
    """The sample's metadata for the mode.

    In ``pairwise_group`` mode the group is verl's ``uid`` with the row's data source and prompt
    (:mod:`nemo_genrm.samples.groups`), as :class:`~nemo_genrm.integrations.verl_manager.GenRMRewardManager`
    passes them; a uid names one group only, so it is gathered once.

    Raises:
        ConfigError: ``pairwise_group`` without a ``uid`` (verl's own reward managers pass none).
    """
    cfg = reward.config.reward
    if cfg.mode == "pairwise_group":
        if group is None:
            from nemo_genrm.config import ConfigError

            raise ConfigError([_NO_GROUP])
        return {
            cfg.pairwise_group.group_key: ["uid", group],
            SOURCE_FIELD: data_source if isinstance(data_source, str) else None,
            PROMPT_FIELD: prompt,
            UNIQUE_FIELD: True,
        }
    if cfg.mode == "rubric" and isinstance(extra_info, Mapping) and extra_info.get(cfg.rubric.items_key) is not None:
        return {cfg.rubric.items_key: rubric_items(extra_info[cfg.rubric.items_key])}
    return None


def _question(extra_info: Any) -> str | None:
    """The row's question: the first of ``question``, ``problem``, ``query`` with text (a string,
    or content parts read as their text)."""
    if isinstance(extra_info, Mapping):
        for key in ("question", "problem", "query"):
            value, _ = content_text(extra_info.get(key))
            if value:
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
    genrm_group: str | None = None,
    genrm_prompt: Any = None,
    genrm_batch_path: bool = False,
    genrm_batch_slot: Sequence[int] | None = None,
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
        genrm_group: The row's ``uid`` (verl's GRPO group), from
            :class:`~nemo_genrm.integrations.verl_manager.GenRMRewardManager`.
        genrm_prompt: The row's prompt token ids, from the same manager.
        genrm_batch_path: From the same manager: verl scores on its batch path, padded with
            exact copies of real rows.
        genrm_batch_slot: From the same manager, on the batch path: the row's place in the padded
            batch (:class:`~nemo_genrm.integrations.verl_padding.BatchSlot`), by which the shared
            pairwise judge tells the padding copies from the rows they copy.

    Returns:
        ``{"score", "acc", "pred", "genrm_reason", "genrm_why", "genrm_judge_failed",
        "genrm_masked"}`` (see the module docstring).

    Raises:
        ValueError: No ``genrm_config`` in ``reward_kwargs``.
        ConfigError: Every problem with the config, at once (on the first call); ``pairwise_group``
            without ``genrm_group`` (verl's own reward managers pass no ``uid``), or on verl's
            batch reward path without ``genrm_batch_slot``.
        JudgeUnavailableError: The judge has been unreachable past
            ``fault_tolerance.unavailable_grace_s``.

    Example:
        verl names the function and the judge's config in its own config::

            reward:
              custom_reward_function:
                path: pkg://nemo_genrm.integrations.verl
                name: compute_score
                reward_kwargs: {genrm_config: genrm.yaml}

        The judge is built from ``genrm_config`` alone (verl passes no judge object), so here it
        is an ``http`` judge reaching an OpenAI-compatible stand-in server on 127.0.0.1 that
        replies as :class:`~nemo_genrm.testing.literal.LiteralJudge` does (``1`` when the answer
        it is shown states the reference's value, else ``0``); verl awaits one call per response:

        >>> import asyncio
        >>> from nemo_genrm.integrations.verl import close_shared_rewards, compute_score
        >>> from nemo_genrm.testing.integrity_judges import StandInServer
        >>> from nemo_genrm.testing.literal import LiteralJudge
        >>> literal = LiteralJudge()
        >>> with StandInServer(lambda body: literal.generate([body["messages"]])[0].text) as server:
        ...     judge = {"model_name": "stand-in", "backend": "http", "http": {"base_url": server.base_url}}
        ...     config = {"judge": judge}
        ...     right = asyncio.run(compute_score("math", "Answer: 42", "42", genrm_config=config))
        ...     wrong = asyncio.run(compute_score("math", "Answer: 41", "42", genrm_config=config))
        ...     close_shared_rewards()
        >>> right["score"], right["acc"], right["pred"], right["genrm_judge_failed"]
        (1.0, 1.0, '42', 0.0)
        >>> wrong["score"], wrong["acc"], wrong["pred"], wrong["genrm_judge_failed"]
        (0.0, 0.0, '41', 0.0)
        >>> print(right["genrm_reason"], wrong["genrm_reason"])
        judged judged
    """
    if genrm_config is None:
        raise ValueError(
            "nemo_genrm compute_score needs reward.custom_reward_function.reward_kwargs.genrm_config "
            "(a YAML path or the env.genrm mapping)"
        )
    overrides = tuple(genrm_overrides)
    reward = _known(genrm_config, overrides, reward_router_address)
    if reward is None:  # built once per process, off the event loop
        reward = await asyncio.to_thread(shared_reward, genrm_config, overrides, reward_router_address)
    question = _question(extra_info)
    extras = _mode_inputs(reward, extra_info, data_source, genrm_group, genrm_prompt)
    reference = ground_truth if ground_truth is None else str(ground_truth)
    if reward.mode == "pairwise_group" and genrm_batch_path:
        if genrm_batch_slot is None or not isinstance(reward, GatheredReward):
            from nemo_genrm.config import ConfigError

            raise ConfigError([_BATCH_PATH])
        slot = BatchSlot(*genrm_batch_slot)
        judgement = await reward.ajudge_in_batch(solution_str, reference, question, extras, slot)
        return result_fields(judgement, reward.mode)
    (judgement,) = await reward.ajudge([solution_str], [reference], [question], [extras])
    return result_fields(judgement, reward.mode)
