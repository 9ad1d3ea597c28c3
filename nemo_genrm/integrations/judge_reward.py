"""The judge reward behind the drop-ins for TRL, verl and NeMo Gym.

Each drop-in (:mod:`~nemo_genrm.integrations.trl`, :mod:`~nemo_genrm.integrations.verl`,
:mod:`~nemo_genrm.integrations.nemo_gym`) adapts its framework's call to :class:`JudgeReward`,
which runs the package's own environment logic
(:class:`~nemo_genrm.env.environment.GenRMEnvironmentImpl`) without Ray around it: the same answer
extraction, prompt, dedup, verdict parsing and reasons as a NeMo-RL run, on any judge engine
(``dtensor``, ``vllm``, or ``http`` for the judge service of :mod:`nemo_genrm.serve`).

A judge that failed (its reply had no verdict, or the engine failed) is not a wrong answer:
:attr:`Judgement.judge_failed` says so, and each drop-in reports it the way its framework
expects (``None`` in TRL, a masked sample in NeMo Gym, a reason field in verl).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nemo_genrm.samples.types import JUDGE_ERROR, PARSE_FAILURE, sample_results
from nemo_genrm.judges.base import Judge

logger = logging.getLogger(__name__)

__all__ = ["JUDGE_FAILURES", "JudgeReward", "Judgement", "genrm_section"]

JUDGE_FAILURES = frozenset({PARSE_FAILURE, JUDGE_ERROR})
"""Reasons that say the judge, not the answer, failed: no valid measurement of the policy."""


@dataclass(frozen=True)
class Judgement:
    """The judge's result for one answer.

    Attributes:
        reward: The environment's reward (0.0 for every reason but ``judged``).
        reason: One of :data:`nemo_genrm.samples.types.REASONS`.
        verdict: 1 or 0 when judged, else ``None``.
        answer: The extracted answer sent to the judge, or ``None`` when none was sent.
    """

    reward: float
    reason: str
    verdict: int | None
    answer: str | None

    @property
    def judge_failed(self) -> bool:
        """Whether the judge failed (parse failure or engine error) rather than the answer."""
        return self.reason in JUDGE_FAILURES

    @property
    def reward_or_none(self) -> float | None:
        """The reward, or ``None`` when the judge failed (no valid measurement)."""
        return None if self.judge_failed else self.reward


def genrm_section(config: Any, overrides: Sequence[str] = ()) -> Any:
    """The ``env.genrm`` section from a YAML path, a full config or the section itself.

    Args:
        config: A path to a YAML file, or a mapping: a whole run config (``env.genrm`` inside),
            ``{"genrm": ...}``, or the section itself (``judge``, ``prompt``, ...).
        overrides: Hydra-style overrides applied to a YAML file (e.g.
            ``env.genrm.judge.http.base_url=http://host:8000/v1``).

    Returns:
        The section, as given (validation happens when the environment is built).
    """
    if isinstance(config, (str, Path)):
        from nemo_genrm.config.loading import load_config, to_container

        config = to_container(load_config(config, overrides))
    elif overrides:
        raise ValueError("overrides apply to a YAML path only; edit the mapping instead")
    if isinstance(config, Mapping):
        if isinstance(config.get("env"), Mapping) and "genrm" in config["env"]:
            return config["env"]["genrm"]
        if isinstance(config.get("genrm"), Mapping):
            return config["genrm"]
    return config


class JudgeReward:
    """Judge answers against references with this package's environment logic, no Ray needed.

    Args:
        config: What :func:`genrm_section` accepts (a YAML path, a run config or the
            ``env.genrm`` section).
        judge: A ready judge to use instead of building one from ``config.judge`` (it is then
            not shut down by :meth:`close`).
        overrides: Overrides for a YAML ``config``.

    Raises:
        ConfigError: Every problem with the config, at once.
    """

    def __init__(self, config: Any, *, judge: Judge | None = None, overrides: Sequence[str] = ()) -> None:
        from nemo_genrm.env.environment import GenRMEnvironmentImpl

        self._env = GenRMEnvironmentImpl(genrm_section(config, overrides), judge=judge)

    @property
    def config(self) -> Any:
        """The validated ``env.genrm`` section."""
        return self._env.cfg

    def judge(
        self,
        answers: Sequence[str],
        references: Sequence[Any],
        questions: Sequence[str | None] | None = None,
    ) -> list[Judgement]:
        """Judge each answer against its reference in one batched judge call.

        Args:
            answers: The policy's responses (the answer is extracted from each as configured).
            references: The reference answer of each (``None`` or empty: ``missing_ground_truth``).
            questions: The question of each, when known (shown to the judge).

        Returns:
            One :class:`Judgement` per answer, in order.
        """
        questions = list(questions) if questions is not None else [None] * len(answers)
        if not (len(answers) == len(references) == len(questions)):
            raise ValueError(
                f"{len(answers)} answers, {len(references)} references and {len(questions)} questions: "
                "one of each per sample is needed"
            )
        if not answers:
            return []
        logs, metas = [], []
        for answer, reference, question in zip(answers, references, questions, strict=True):
            logs.append([{"role": "user", "content": question or ""}, {"role": "assistant", "content": answer}])
            meta: dict[str, Any] = {"ground_truth": reference}
            if question:
                meta["question"] = question
            metas.append(meta)
        result = self._env.step(logs, metas)
        rewards = result.rewards.tolist()
        outcomes = sample_results(result.metadata, len(logs))
        judgements = []
        for reward, outcome, ans in zip(rewards, outcomes, result.answers, strict=True):
            if outcome is None:  # every metadata entry sent is a dict, so each comes back with its result
                raise RuntimeError("the GenRM environment returned a sample without its result")
            judgements.append(Judgement(float(reward), outcome.reason, outcome.verdict, ans))
        return judgements

    async def ajudge(
        self,
        answers: Sequence[str],
        references: Sequence[Any],
        questions: Sequence[str | None] | None = None,
    ) -> list[Judgement]:
        """:meth:`judge` on a worker thread, so the caller's event loop keeps running.

        Concurrent calls are safe: the environment joins calls that overlap into one judge batch.
        """
        return await asyncio.to_thread(self.judge, list(answers), list(references), questions)

    def metrics(self) -> dict[str, float]:
        """The ``genrm/*`` metrics of the last judge call."""
        return self._env.last_metrics()

    def close(self) -> None:
        """Free the judge this object built; safe to call twice."""
        self._env.shutdown()

    def __enter__(self) -> JudgeReward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
