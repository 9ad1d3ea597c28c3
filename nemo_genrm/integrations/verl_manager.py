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
or validation batch, gathered once, whose padding copies are recognised. Name it in verl's
config next to the custom reward function::

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
two keywords on to it). Importing this module imports verl.
"""

from __future__ import annotations

from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

__all__ = ["GenRMRewardManager"]


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

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        """Score one response (the last sequence of a multi-sequence row, as verl's managers do).

        Returns:
            verl's ``{"reward_score", "reward_extra_info"}``: ``compute_score``'s ``score`` and
            every field it returned.
        """
        item = data[-1:][0]
        prompts, responses = item.batch["prompts"], item.batch["responses"]  # [P], [R]
        attention = item.batch["attention_mask"]  # [P + R]
        prompt_ids = prompts[attention[: prompts.shape[-1]].bool()].tolist()  # left padding dropped
        response_ids = responses[: int(attention[-responses.shape[-1] :].sum())]
        response = await self.loop.run_in_executor(
            None, lambda: self.tokenizer.decode(response_ids, skip_special_tokens=True)
        )
        fields = item.non_tensor_batch
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
            **router,
        )
        return {"reward_score": result["score"], "reward_extra_info": dict(result)}
