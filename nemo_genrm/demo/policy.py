"""The demo's starting policy: a tiny random LM briefly supervised on the demo task.

A short supervised pass (a fixed number of steps on every question, answers written as bare
numbers) makes the right answer the policy's most likely one for most questions, but not by
much: sampled at the demo's temperature (2.4) its answers match the reference about 60% of the
time. GRPO with the judge's reward then has something to fix: it moves probability onto the
answers the judge accepts.
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nemo_genrm.demo.progress import training_progress
from nemo_genrm.tasks.digit_addition import all_questions

if TYPE_CHECKING:
    from nemo_genrm.testing.models import TinyModelSpec

logger = logging.getLogger(__name__)

__all__ = ["POLICY_PROMPT", "POLICY_REPORT", "PolicyTraining", "train_demo_policy"]

POLICY_PROMPT = "{}"
"""``data.prompt`` of the demo: the question alone, as the supervised pass saw it."""
POLICY_REPORT = "demo_policy.json"


@dataclass(frozen=True)
class PolicyTraining:
    """Everything that decides the demo policy's weights (all of it goes into the cache key).

    Attributes:
        steps: Supervised optimizer steps (few on purpose: the policy must stay imperfect).
        batch_size: Questions per step.
        lr: Learning rate.
        seed: Seeds the weights and the order of questions.
        hidden_size: Width of the tiny Qwen2 (heads of 32, MLP twice as wide). 128 rather than
            the judge's 64: what GRPO teaches the wider policy on the training questions carries
            over to the held-out ones (docs/grpo.md, "The demo and tiny models").
        num_layers: Decoder blocks.
    """

    steps: int = 160
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 0
    hidden_size: int = 128
    num_layers: int = 2

    def model_spec(self) -> TinyModelSpec:
        """The :class:`~nemo_genrm.testing.models.TinyModelSpec` of the policy's architecture."""
        from nemo_genrm.testing.models import TinyModelSpec  # noqa: F811 (the runtime import)

        heads = self.hidden_size // 32
        return TinyModelSpec(
            hidden_size=self.hidden_size,
            num_layers=self.num_layers,
            num_heads=heads,
            num_kv_heads=heads,
            intermediate_size=2 * self.hidden_size,
            seed=self.seed,
        )

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict."""
        return asdict(self)


def _encode(tokenizer, question: str, answer: str) -> tuple[list[int], list[int]]:
    messages = [{"role": "user", "content": POLICY_PROMPT.replace("{}", question, 1)}]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return prompt_ids, tokenizer(answer + tokenizer.eos_token, add_special_tokens=False)["input_ids"]


def train_demo_policy(path: str | Path, training: PolicyTraining) -> None:
    """Supervise a tiny policy briefly on the demo task and save it into ``path``.

    Args:
        path: Folder to write (model, tokenizer, :data:`POLICY_REPORT`).
        training: Schedule and seed.
    """
    from nemo_genrm.testing.models import new_tiny_model, save_tiny_model
    from nemo_genrm.testing.tokenizer import make_tiny_tokenizer

    start = time.perf_counter()
    torch.manual_seed(training.seed)
    spec = training.model_spec()
    tokenizer = make_tiny_tokenizer(spec.max_position_embeddings)
    model = new_tiny_model(spec, tokenizer).train()
    examples = [_encode(tokenizer, q, a) for q, a in all_questions()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=training.lr)
    rng = random.Random(training.seed)
    logger.info("Training the demo policy (%d supervised steps, once; cached)", training.steps)
    with training_progress("demo policy", training.steps, logger) as progress:
        for step in range(training.steps):
            batch = rng.sample(examples, training.batch_size)
            width = max(len(p) + len(r) for p, r in batch)
            ids = torch.zeros(len(batch), width, dtype=torch.long)  # [B, T] right-padded
            labels = torch.full((len(batch), width), -100)  # [B, T] loss on the answer tokens only
            for i, (prompt, response) in enumerate(batch):
                ids[i, : len(prompt) + len(response)] = torch.tensor(prompt + response)
                labels[i, len(prompt) : len(prompt) + len(response)] = torch.tensor(response)
            loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            progress(step, loss.item())
    save_tiny_model(model.eval(), spec, path)
    report = {"train_seconds": time.perf_counter() - start, "training": training.to_dict()}
    (Path(path) / POLICY_REPORT).write_text(json.dumps(report, indent=2) + "\n")
    logger.info("Demo policy: %d supervised steps (%.0fs)", training.steps, report["train_seconds"])
