"""A verl reward manager that hands :func:`~nemo_genrm.integrations.verl.compute_score` what names a group.

verl (0.9.1) passes a custom reward function the row's ``data_source``, ``ground_truth`` and
``extra_info``, and nothing else of the batch: not its ``uid`` (the GRPO group verl itself
ranks by, drawn afresh for every prompt of every step and every validation batch) and not the
prompt. ``extra_info.index`` is no substitute: verl's preprocessing numbers every data file from
0, so a training and a validation file, or two training files, share it, and a padding copy
(``pad_dataproto_to_divisor``) carries its row's.

:class:`GenRMRewardManager` is verl's reward manager for this package: it scores each
response as verl's ``naive`` manager does (the decoded response, the row's fields), and passes
``compute_score`` the row's ``uid`` and prompt token ids too (``genrm_group``,
``genrm_prompt``). In ``pairwise_group`` mode that is each group's key: one prompt in one step
or validation batch, gathered once: rows past its size (the extra trajectories verl's legacy
validation generates for a padded batch) are masked at once, never opening or owing a group.

On verl's batch reward path (a reward model colocated with the policy:
``RewardLoopManager.compute_rm_score``) the batch is padded with exact copies of its first rows,
which only their place in the padded batch tells apart from the rows they copy. There the manager
also passes each row's place (``genrm_batch_slot``): its worker's index, read from the worker's
Ray actor name (``reward_loop_worker_<i>``, which scores the ``i``-th chunk), and the row's place
in that chunk. verl's worker starts a task for every row of its chunk before any of them runs
(``RewardLoopWorker.compute_score_batch``), so the rows that join in one turn of the worker's
event loop are the chunk, in order. The shared pairwise judge puts the batch together from these
places and tells the copies apart (:mod:`nemo_genrm.integrations.verl_padding`). Name the manager
in verl's config next to the custom reward function::

    reward:
      reward_manager:
        source: importlib
        name: GenRMRewardManager
        module: {path: pkg://nemo_genrm.integrations.verl_manager}
      custom_reward_function:
        path: pkg://nemo_genrm.integrations.verl
        name: compute_score
        reward_kwargs: {genrm_config: /path/to/genrm.yaml}

The custom reward function must be this package's ``compute_score`` (or a function passing the
``genrm_*`` keywords on to it). :func:`exclude_unmeasured_kv` keeps masked rows and judge failures out
of the V1 trainer's update. Importing this module imports verl.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

__all__ = ["GenRMRewardManager", "exclude_unmeasured_kv"]

_WORKER_NAME = re.compile(r"reward_loop_worker_(\d+)")
"""How verl's RewardLoopManager names its worker ``i``, which scores chunk ``i`` of the batch."""


_NO_ROW_FIELDS = (
    "GenRMRewardManager got a row without {missing}: verl's V1 trainer hands a colocated reward model "
    "(reward.reward_model.enable without enable_resource_pool) the prompt and response alone, which no "
    "custom reward function can score. Give the reward model a resource pool "
    "(reward.reward_model.enable_resource_pool: true), serve the judge outside verl "
    "(reward.reward_model.enable: false with judge.http.base_url), or use the legacy trainer (trainer.use_v1: false)"
)


def _worker_index() -> int | None:
    """This reward-loop worker's index, from its Ray actor name; ``None`` outside such a worker."""
    import ray

    if not ray.is_initialized():
        return None
    match = _WORKER_NAME.fullmatch(ray.get_runtime_context().get_actor_name() or "")
    return int(match.group(1)) if match else None


class _ChunkPlaces:
    """Each row's place in its worker's chunk of verl's padded batch (see the module docstring).

    A row joins before its first ``await``; the rows that join in one turn of the event loop are
    the chunk: the first schedules the chunk's close after every task already started, and the
    close tells each row its place and the chunk's size.
    """

    def __init__(self, worker: int, workers: int) -> None:
        self._worker, self._workers = worker, workers
        self._open: list[asyncio.Future] | None = None

    def join(self) -> asyncio.Future:
        """A future of this row's ``(chunk, chunks, position, size)``."""
        loop = asyncio.get_running_loop()
        if self._open is None:
            self._open = []
            loop.call_soon(self._close)
        future = loop.create_future()
        self._open.append(future)
        return future

    def _close(self) -> None:
        chunk, self._open = self._open or [], None
        for position, future in enumerate(chunk):
            future.set_result((self._worker, self._workers, position, len(chunk)))


class GenRMRewardManager(RewardManagerBase):
    """verl's reward manager for :func:`nemo_genrm.integrations.verl.compute_score` (see the module docstring).

    Args:
        config: verl's trainer config.
        tokenizer: The policy's tokenizer (decodes the response).
        compute_score: The custom reward function verl loaded, with its ``reward_kwargs``.
        reward_router_address: verl's reward model router, when verl runs one.
        reward_model_tokenizer: verl's reward model tokenizer (not needed by the judge).

    Raises:
        ValueError: No custom reward function is configured (this manager only feeds ``compute_score``).
    """

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)
        if config.reward.custom_reward_function.get("path") is None:
            raise ValueError(
                "GenRMRewardManager feeds nemo_genrm's compute_score: set reward.custom_reward_function.path to "
                "pkg://nemo_genrm.integrations.verl and its name to compute_score"
            )
        self.reward_router_address = reward_router_address
        self.reward_model_tokenizer = reward_model_tokenizer
        # verl's batch reward path (a reward model colocated with the policy): the trainer scores
        # the whole batch at once, padded with copies of its first rows (pad_dataproto_to_divisor).
        rm = config.reward.reward_model
        self.batch_path = bool(rm.get("enable") and not rm.get("enable_resource_pool"))
        worker = _worker_index() if self.batch_path else None
        # Without a worker index (not verl's RewardLoopManager) no row gets a place, and a
        # pairwise compute_score on the batch path says why.
        self._places = None if worker is None else _ChunkPlaces(worker, int(config.reward.num_workers))

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        """Score one response (the last sequence of a multi-sequence row, as verl's managers do).

        Returns:
            verl's ``{"reward_score", "reward_extra_info"}``: ``compute_score``'s ``score`` and
            every field it returned.
        """
        place = self._places.join() if self._places is not None else None  # before any await
        item = data[-1:][0]
        prompts, responses = item.batch["prompts"], item.batch["responses"]  # [P], [R]
        attention = item.batch["attention_mask"]  # [P + R]
        prompt_ids = prompts[attention[: prompts.shape[-1]].bool()].tolist()  # left padding dropped
        response_ids = responses[: int(attention[-responses.shape[-1] :].sum())]
        response = await self.loop.run_in_executor(
            None, lambda: self.tokenizer.decode(response_ids, skip_special_tokens=True)
        )
        fields = item.non_tensor_batch
        missing = [key for key in ("data_source", "reward_model") if key not in fields]
        if missing:
            raise ValueError(_NO_ROW_FIELDS.format(missing=", ".join(missing)))
        uid = fields.get("uid")
        router = (
            {"reward_router_address": self.reward_router_address, "reward_model_tokenizer": self.reward_model_tokenizer}
            if self.reward_router_address is not None
            else {}
        )
        result = await self.compute_score(
            data_source=fields["data_source"],
            solution_str=response,
            ground_truth=fields["reward_model"]["ground_truth"],
            extra_info=dict(fields.get("extra_info") or {}),
            genrm_group=None if uid is None else str(uid),
            genrm_prompt=prompt_ids,
            genrm_batch_path=self.batch_path,
            genrm_batch_slot=None if place is None else await place,
            **router,
        )
        return {"reward_score": result["score"], "reward_extra_info": dict(result)}


def exclude_unmeasured_kv(batch: Any) -> int:
    """:func:`~nemo_genrm.integrations.verl.exclude_unmeasured` for verl's V1 trainer, whose batch lives in TransferQueue.

    The V1 trainer (verl's default) reads ``uid``, ``response_mask`` and ``rm_scores`` from
    TransferQueue in ``PPOTrainer._compute_advantage`` and writes back only ``advantages`` and
    ``returns``; the actor's loss reads ``response_mask`` from TransferQueue. So a flagged
    trajectory (``genrm_masked`` or ``genrm_judge_failed`` in its ``reward_extra_info``) gets a
    ``uid`` of its own and a zero ``response_mask`` written to TransferQueue, before the
    advantages are computed: it leaves its group's baseline (advantage 0) and the loss::

        from verl.trainer.ppo.v1 import register_trainer
        from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

        @register_trainer("genrm_sync")  # trainer.v1.trainer_mode: genrm_sync
        class GenRMTrainer(PPOTrainerSync):
            def _compute_advantage(self, batch, metrics):
                exclude_unmeasured_kv(batch)
                return super()._compute_advantage(batch, metrics)

    Args:
        batch: The step's ``KVBatchMeta`` (keys and partition of its trajectories).

    Returns:
        The number of trajectories excluded.
    """
    import torch
    import transfer_queue as tq
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    from nemo_genrm.integrations.verl import UNMEASURED_FIELDS

    fields = ["uid", "response_mask", "extra_fields"]
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
    uids, masks, extras = list(data["uid"]), data["response_mask"].unbind(), list(data["extra_fields"])
    rows = [
        i
        for i, extra in enumerate(extras)
        if any(float((extra or {}).get("reward_extra_info", {}).get(f) or 0.0) == 1.0 for f in UNMEASURED_FIELDS)
    ]
    if rows:
        excluded = [
            {"uid": f"{uids[i]}/genrm-excluded-{batch.keys[i]}", "response_mask": torch.zeros_like(masks[i])}  # [R_i]
            for i in rows
        ]
        tq.kv_batch_put(
            keys=[batch.keys[i] for i in rows],
            partition_id=batch.partition_id,
            fields=list_of_dict_to_tensordict(excluded),
        )
    return len(rows)
