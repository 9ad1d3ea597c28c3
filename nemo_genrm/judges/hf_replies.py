"""The transformers worker's replies: token ids through the static loop or ``generate``, and for a
reasoning judge the two passes of :mod:`nemo_genrm.judges.reasoning`.

Kept apart from :mod:`nemo_genrm.judges.transformers` (the worker's set-up, scoring and life
cycle) so each module stays small; :class:`ReplyMixin` reads the worker's ``config``, ``model``,
``tokenizer``, ``eos_ids``, ``pad_id``, ``_static`` (the static loop or ``None``) and its
batching helpers.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from nemo_genrm.judges.fitting import FittedPrompt
from nemo_genrm.judges.hf_generation import Decoding, trim_at_eos
from nemo_genrm.judges.reasoning import ReasoningBudget, ThoughtTokens, answer
from nemo_genrm.judges.results import GenOut


class ReplyMixin:
    """``generate_fitted`` of the transformers worker (see the module docstring)."""

    def _setup_replies(self) -> None:
        """The reasoning budget and the tokenizer's ids for it (``None`` without reasoning)."""
        self._reasoning = ReasoningBudget.of(self.config.sampling)
        self._thought = ThoughtTokens.of(self.tokenizer, self._reasoning) if self._reasoning else None

    def generate_fitted(self, prompts: Sequence[FittedPrompt]) -> list[GenOut]:
        """Generate for fitted prompts: ``(text, tokens generated)`` each (for a reasoning judge
        also the thought's length and whether it was cut), in order."""
        self._ensure_awake()
        ids = [list(p.token_ids) for p in prompts]
        votes = [p.vote for p in prompts]
        if self._reasoning is not None:
            return answer(ids, votes, self._reasoning, self._thought, self.tokenizer, self.eos_ids, self._generate_ids)
        rows = self._generate_ids(ids, votes, self.config.sampling.max_new_tokens, None)
        return [(self.tokenizer.decode(row, skip_special_tokens=True), len(row)) for row in rows]

    def _decoding(self, new_tokens: int, first_pass: bool = False) -> Decoding:
        """The static loop's settings; a reasoning judge's first pass stops open thoughts at the
        budget when its tags are single tokens (other engines cut them afterwards)."""
        sampling = self.config.sampling
        stop = first_pass and self._reasoning is not None and self._thought.close_id is not None
        return Decoding(
            new_tokens,
            sampling.temperature,
            sampling.top_p,
            sampling.seed,
            reasoning_budget=self._reasoning.budget if stop else None,
            open_ids=(self._thought.open_id,) if stop and self._thought.open_id is not None else (),
            close_ids=(self._thought.close_id,) if stop else (),
        )

    def _generate_ids(
        self, ids: list[list[int]], votes: list[int], new_tokens: int, thinking: list[bool] | None
    ) -> list[list[int]]:
        """New ids per prompt (EOS included when it ended on one), in order.

        The static loop with ``dtensor.continuous_batching`` takes the whole queue, as many
        rows at once as memory allows; otherwise the queue is cut into length-sorted batches.
        Each prompt samples with seed ``sampling.seed + vote``: a prompt's votes are separate draws.
        """
        if not ids:
            return []
        seeds = [self.config.sampling.seed + vote for vote in votes]
        decoding = self._decoding(new_tokens, first_pass=thinking is not None)
        if self._static is not None and self.config.dtensor.continuous_batching:
            longest = max(len(p) for p in ids)
            max_batch, max_tokens = self.batch_limits(longest, new_tokens)
            slots = max(1, min(max_batch, max_tokens // (longest + new_tokens)))
            return self._static.generate(ids, decoding, seeds=seeds, slots=slots, thinking=thinking)
        rows: list[list[int]] = [[] for _ in ids]
        for batch in self._within_memory([len(p) for p in ids], new_tokens, self.MAX_PADDING["generate_fitted"]):
            part = [ids[i] for i in batch]
            if self._static is not None:  # continuous_batching off: a plain batch, until its longest row ends
                done = self._static.generate(
                    part,
                    decoding,
                    seeds=[seeds[i] for i in batch],
                    narrow=False,
                    thinking=[thinking[i] for i in batch] if thinking else None,
                )
            else:
                done = self._generate_dynamic(part, [seeds[i] for i in batch], new_tokens)
            for index, row in zip(batch, done, strict=True):
                rows[index] = row
        return rows

    def _generate_dynamic(self, prompts: list[list[int]], seeds: list[int], new_tokens: int) -> list[list[int]]:
        """transformers' ``generate`` with its dynamic cache, one call per seed when sampling."""
        rows: list[list[int]] = [[] for _ in prompts]
        sample = self.config.sampling.temperature > 0
        for seed in sorted(set(seeds)) if sample else [None]:
            part = [i for i, s in enumerate(seeds) if seed is None or s == seed]
            for i, row in zip(
                part, self._generate_dynamic_batch([prompts[i] for i in part], seed, new_tokens), strict=True
            ):
                rows[i] = row
        return rows

    @torch.no_grad()
    def _generate_dynamic_batch(self, prompts: list[list[int]], seed: int | None, new_tokens: int) -> list[list[int]]:
        """One ``generate`` call: new ids per prompt, cut at EOS. With sampling, the batch draws
        from the global generator seeded with ``seed``."""
        from transformers import GenerationConfig

        sampling = self.config.sampling
        sample = sampling.temperature > 0
        ids, mask = self._pad(prompts)  # [B, T]
        gen_config = GenerationConfig(
            max_new_tokens=new_tokens,
            do_sample=sample,
            temperature=sampling.temperature if sample else None,
            top_p=sampling.top_p if sample else None,
            top_k=0 if sample else None,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
        )
        if sample:
            torch.manual_seed(sampling.seed if seed is None else seed)  # same seed on every rank: identical samples
        seqs = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=gen_config)
        return [trim_at_eos(row, self.eos_ids) for row in seqs[:, ids.shape[1] :].tolist()]  # [B, N]
