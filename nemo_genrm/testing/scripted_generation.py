"""A scripted policy for NeMo-RL's rollout functions: answers come from a function, not a model.

NeMo-RL's ``run_multi_turn_rollout`` calls ``generate`` on a batch; its
``run_async_multi_turn_rollout`` calls ``generate_async`` once per sample and reads
``cfg["backend"]`` and ``cfg["vllm_cfg"]["async_engine"]`` to allow it; its eval loop
(``nemo_rl.evals.eval.run_env_eval``) calls ``generate_text`` on a batch of prompt strings, or
``generate_text_async`` once per prompt. :class:`ScriptedGeneration` answers all four in NeMo-RL's
output shapes, so tests and benchmarks drive NeMo-RL's real rollout,
environment and reward code with known responses and no GPU.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import torch


class ScriptedGeneration:
    """Answers each prompt with ``respond(prompt_text)``, in NeMo-RL's generation output shapes.

    Args:
        tokenizer: The policy tokenizer (decodes prompts, encodes responses).
        respond: Maps the decoded prompt to the response text.
        delay_s: Seconds each ``generate_async`` sample waits before answering (lets samples
            finish out of order, as a real engine's do).

    Attributes:
        generate_calls: Batched ``generate`` calls so far.
        async_calls: ``generate_async`` calls so far.
    """

    def __init__(self, tokenizer: Any, respond: Callable[[str], str], *, delay_s: float = 0.0) -> None:
        self.tokenizer = tokenizer
        self.respond = respond
        self.delay_s = delay_s
        self.cfg = {"backend": "vllm", "vllm_cfg": {"async_engine": True}}
        self.generate_calls = 0
        self.async_calls = 0

    def _outputs(self, data: Any) -> dict[str, torch.Tensor]:
        input_ids, input_lengths = data["input_ids"], data["input_lengths"]  # [B, L], [B]
        rows, gen_lengths = [], []
        for ids, length in zip(input_ids, input_lengths, strict=True):
            prompt = ids[: int(length)]
            text = self.respond(self.tokenizer.decode(prompt, skip_special_tokens=False))
            answer = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            if self.tokenizer.eos_token_id is not None:
                answer = [*answer, self.tokenizer.eos_token_id]
            rows.append(torch.cat([prompt, torch.tensor(answer, dtype=prompt.dtype)]))
            gen_lengths.append(len(answer))
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id or 0
        output_ids = torch.full((len(rows), width), pad, dtype=input_ids.dtype)  # [B, T]
        for i, row in enumerate(rows):
            output_ids[i, : len(row)] = row
        return {
            "output_ids": output_ids,
            "logprobs": torch.zeros(output_ids.shape, dtype=torch.float32),  # [B, T]
            "generation_lengths": torch.tensor(gen_lengths),  # [B]
            "unpadded_sequence_lengths": torch.tensor([len(r) for r in rows]),  # [B]
        }

    def generate(self, data: Any, greedy: bool = False) -> Any:
        """NeMo-RL's batched generation: one response per row."""
        from nemo_rl.distributed.batched_data_dict import BatchedDataDict

        self.generate_calls += 1
        return BatchedDataDict(self._outputs(data))

    async def generate_async(self, data: Any, greedy: bool = False) -> AsyncIterator[tuple[int, Any]]:
        """NeMo-RL's streaming generation: ``(row index, one-row output)`` per row."""
        from nemo_rl.distributed.batched_data_dict import BatchedDataDict

        self.async_calls += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        outputs = self._outputs(data)
        for index in range(len(data["input_ids"])):
            yield index, BatchedDataDict({k: v[index : index + 1] for k, v in outputs.items()})

    def generate_text(self, data: Any, greedy: bool = False) -> Any:
        """NeMo-RL's text generation (its eval loop): ``{"texts": [response per prompt]}``."""
        from nemo_rl.distributed.batched_data_dict import BatchedDataDict

        self.generate_calls += 1
        return BatchedDataDict({"texts": [self.respond(prompt) for prompt in data["prompts"]]})

    async def generate_text_async(self, data: Any, greedy: bool = False) -> AsyncIterator[tuple[int, Any]]:
        """NeMo-RL's streaming text generation: ``(row index, {"texts": [response]})`` per prompt."""
        from nemo_rl.distributed.batched_data_dict import BatchedDataDict

        self.async_calls += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        for index, prompt in enumerate(data["prompts"]):
            yield index, BatchedDataDict({"texts": [self.respond(prompt)]})

    # NeMo-RL's GenerationInterface lifecycle: nothing to do for a script.
    def prepare_for_generation(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def finish_generation(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def shutdown(self) -> bool:
        return True
