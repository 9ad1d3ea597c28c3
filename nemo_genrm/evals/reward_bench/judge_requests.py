"""The judge requests of one RewardBench example: placement, prompt rendering, long prompts.

A :class:`RequestBuilder` turns an example into the requests the judge sees, in a fixed order
(pairwise: the coin's placement, then the swapped one with ``both_orders``; rating: chosen, then
rejected), and says where chosen was placed.

Placement (``placement``): ``seeded`` is a coin hashed from the run's seed and the example id
(reproducible, resumable); ``reference_random`` draws ``numpy.random.rand() > 0.5`` per example
from numpy's global generator, unseeded, as reward-bench's ``run_generative.py`` does (its
``is_shuffled``: chosen goes to B).

Long prompts (``long_prompts``): nothing in a RewardBench request can be shortened by the
engine, so a prompt longer than ``max_model_len - max_new_tokens`` comes back as a
``prompt_too_long`` error. ``skip`` leaves it so (the evaluator counts the example apart);
``shorten`` cuts both responses by the same rule before sending: each keeps at most the same
number of characters (head and tail around an elision marker), the largest number that fits,
and the cut is recorded per example.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nemo_genrm.config import RewardBenchConfig
from nemo_genrm.evals.reward_bench.data import RewardBenchExample
from nemo_genrm.evals.reward_bench.preset import RewardBenchPreset
from nemo_genrm.evals.reward_bench.scores import chosen_at_a, placement_of
from nemo_genrm.judges.base import JudgeRequest
from nemo_genrm.judges.fitting import render_ids, shorten
from nemo_genrm.prompts import JudgeTemplate, defuse_tokens

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestPlan:
    """The requests of one example and what their records need.

    Attributes:
        placement: ``chosen_a`` or ``chosen_b`` for the first pairwise request; ``None`` for rating.
        requests: The judge requests, in the order the record expects.
        shortened: ``long_prompts: shorten`` cut the responses: ``keep_chars`` and the
            ``[before, after]`` character counts of ``chosen`` and ``rejected``; else ``None``.
    """

    placement: str | None
    requests: list[JudgeRequest]
    shortened: dict[str, Any] | None = None


def _transcript(turns: tuple[str, ...], prompt: str) -> str:
    """Earlier turns and the last request as one text, for templates with a single question."""
    roles = ("User", "Assistant")
    lines = [f"{roles[i % 2]}: {text}" for i, text in enumerate(turns)]
    return "\n\n".join([*lines, f"User: {prompt}"])


class RequestBuilder:
    """Builds the judge requests of examples for one evaluation config.

    Args:
        cfg: The evaluation config.
        template: The prompt (the preset's or the project's).
        preset: The rewardbench preset, when used (its two-turn prompt and field names).
        markers: The choice markers, defanged inside responses when neutralising.
        neutralise_responses: Defang judge-format text inside responses.
    """

    def __init__(
        self,
        cfg: RewardBenchConfig,
        template: JudgeTemplate,
        preset: RewardBenchPreset | None,
        markers: tuple[str, str],
        neutralise_responses: bool,
    ) -> None:
        self.cfg = cfg
        self.template = template
        self.preset = preset
        self.markers = markers
        self.neutralise = neutralise_responses
        self._fits: Callable[[list[JudgeRequest]], bool] | None = None

    # ----------------------------------------------------------------------------- pieces
    def _response(self, text: str) -> str:
        if not self.neutralise:
            return text
        return defuse_tokens(text, markers=self.markers if self.cfg.protocol == "pairwise" else ())

    def draw_placement(self, example: RewardBenchExample) -> str:
        """``chosen_a`` or ``chosen_b``: the seeded coin, or the reference's unseeded draw."""
        if self.cfg.placement == "reference_random":
            return "chosen_b" if np.random.rand() > 0.5 else "chosen_a"
        return placement_of(chosen_at_a(self.cfg.seed, example.key))

    def _pairwise(self, example: RewardBenchExample, placement: str, chosen: str, rejected: str) -> JudgeRequest:
        a, b = (chosen, rejected) if placement == "chosen_a" else (rejected, chosen)
        multi = self.preset.multi_turn if self.preset is not None else None
        if example.turns and multi is not None:
            # The reference's two-turn prompt: the first exchange is shared by both conversations.
            messages = multi.render(
                question_1=example.turns[0],
                answer_a_1=example.turns[1],
                answer_b_1=example.turns[1],
                question_2=example.prompt,
                answer_a_2=a,
                answer_b_2=b,
            )
        else:
            question = _transcript(example.turns, example.prompt) if example.turns else example.prompt
            messages = self.template.render(question=question, response_a=a, response_b=b, answer_a=a, answer_b=b)
        return JudgeRequest(messages=tuple(messages))

    def _rating(self, example: RewardBenchExample, response: str) -> JudgeRequest:
        question = _transcript(example.turns, example.prompt) if example.turns else example.prompt
        messages = self.template.render(question=question, prompt=question, response=response, completion=response)
        return JudgeRequest(messages=tuple(messages))

    def _requests(self, example: RewardBenchExample, placement: str | None, chosen: str, rejected: str):
        if self.cfg.protocol == "rating":
            return [self._rating(example, chosen), self._rating(example, rejected)]
        requests = [self._pairwise(example, placement, chosen, rejected)]  # type: ignore[arg-type]
        if self.cfg.both_orders:
            swapped = "chosen_b" if placement == "chosen_a" else "chosen_a"
            requests.append(self._pairwise(example, swapped, chosen, rejected))
        return requests

    # ------------------------------------------------------------------------------ public
    def plan(self, example: RewardBenchExample) -> RequestPlan:
        """The requests of one example (a ``reference_random`` placement is drawn here, once)."""
        placement = self.draw_placement(example) if self.cfg.protocol == "pairwise" else None
        chosen, rejected = self._response(example.chosen), self._response(example.rejected)
        requests = self._requests(example, placement, chosen, rejected)
        if self.cfg.long_prompts == "skip" or self.fits(requests):
            return RequestPlan(placement, requests)

        def build(keep: int) -> list[JudgeRequest]:
            return self._requests(example, placement, shorten(chosen, keep), shorten(rejected, keep))

        if not self.fits(build(0)):
            return RequestPlan(placement, requests)  # even fully cut it does not fit: skipped
        lo, hi = 0, max(len(chosen), len(rejected)) - 1  # keeping lo fits; keeping everything does not
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.fits(build(mid)) else (lo, mid - 1)
        cut = {
            "keep_chars": lo,
            "chosen": [len(chosen), len(shorten(chosen, lo))],
            "rejected": [len(rejected), len(shorten(rejected, lo))],
        }
        return RequestPlan(placement, build(lo), shortened=cut)

    def fits(self, requests: list[JudgeRequest]) -> bool:
        """Whether every request fits in ``max_model_len - max_new_tokens`` under the judge's template."""
        if self._fits is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.cfg.judge.tokenizer_name)
            budget = self.cfg.judge.max_model_len - self.cfg.judge.sampling.max_new_tokens

            def fits(batch: list[JudgeRequest]) -> bool:
                return all(len(render_ids(r.messages, tokenizer)) <= budget for r in batch)

            self._fits = fits
        return self._fits(requests)
