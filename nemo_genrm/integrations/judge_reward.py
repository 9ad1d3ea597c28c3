"""The judge reward behind the drop-ins for TRL, verl and NeMo Gym.

Each drop-in (:mod:`~nemo_genrm.integrations.trl`, :mod:`~nemo_genrm.integrations.verl`,
:mod:`~nemo_genrm.integrations.nemo_gym`) adapts its framework's call to :class:`JudgeReward`,
which runs the package's own environment logic
(:class:`~nemo_genrm.env.environment.GenRMEnvironmentImpl`) without Ray around it: the same answer
extraction, prompt, dedup, verdict parsing and reasons as a NeMo-RL run, on any judge engine
(``dtensor``, ``vllm``, or ``http`` for the judge service of :mod:`nemo_genrm.serve`).

A judge that failed (its reply had no verdict, or the engine failed) is not a wrong answer:
:attr:`Judgement.judge_failed` says so, and each drop-in reports it the way its framework
expects (``None`` in TRL, a masked sample in NeMo Gym, a reason field in verl). A sample the
environment masks (``incomplete_group``, a masked parse failure) is :attr:`Judgement.masked`,
reported the same way.

A response may be text, OpenAI-style content parts, or a conversational completion (a list of
messages whose last assistant message is the response), and a question text or content parts:
the environment reads content parts as their text (:func:`nemo_genrm.samples.inputs.content_text`),
and a response it cannot read is ``bad_input`` with its :attr:`Judgement.why`.

Every reward mode is fed here: the reference (reference mode), and per sample extra metadata
(what names a pairwise group, :mod:`nemo_genrm.samples.groups`; rubric items) from the drop-in. :meth:`JudgeReward.ajudge` is
awaited on the caller's event loop without holding a thread: concurrent calls (verl's reward
loop, NeMo Gym's ``/verify`` posts) join one judge call, whatever the loop's thread pool.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nemo_genrm.judges.base import Judge
from nemo_genrm.samples.types import JUDGE_ERROR, PARSE_FAILURE, EnvironmentReturn, sample_results

logger = logging.getLogger(__name__)

__all__ = ["JUDGE_FAILURES", "JudgeReward", "Judgement", "check_per_sample", "genrm_section", "rubric_items"]

JUDGE_FAILURES = frozenset({PARSE_FAILURE, JUDGE_ERROR})
"""Reasons that say the judge, not the answer, failed: no valid measurement of the policy."""


@dataclass(frozen=True)
class Judgement:
    """The judge's result for one answer.

    Attributes:
        reward: The environment's reward (0.0 for every reason but ``judged``).
        reason: One of :data:`nemo_genrm.samples.types.REASONS`.
        verdict: 1 or 0 when judged in a mode with a binary verdict, else ``None``.
        answer: What the judge was shown of the response (the extracted answer, or in pairwise
            and rubric modes the whole response as shown), ``None`` when nothing was sent.
        masked: The environment masked the sample (``incomplete_group``, a parse failure under
            ``verdict.on_parse_failure: mask``): its reward is no measurement of the policy.
        why: The reason's detail: what was wrong for ``bad_input``, why no verdict was read for
            ``parse_failure`` (:class:`~nemo_genrm.samples.types.SampleResult`), else ``None``.
    """

    reward: float
    reason: str
    verdict: int | None
    answer: str | None
    masked: bool = False
    why: str | None = None

    @property
    def judge_failed(self) -> bool:
        """Whether the judge failed (parse failure or engine error) rather than the answer."""
        return self.reason in JUDGE_FAILURES

    @property
    def reward_or_none(self) -> float | None:
        """The reward, or ``None`` when the judge failed or the sample is masked (no valid measurement)."""
        return None if self.judge_failed or self.masked else self.reward


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


def check_per_sample(cfg: Any, per_sample: str | None) -> None:
    """Refuse a pairwise mode that a framework calling once per sample cannot feed.

    Args:
        cfg: The validated ``env.genrm`` section.
        per_sample: The framework's name when it calls once per sample (verl, NeMo Gym), else ``None``.

    Raises:
        ConfigError: ``pairwise_group`` without ``reward.pairwise_group.group_size``: a judge call
            would rank whatever arrived together instead of waiting for each group.
    """
    from nemo_genrm.config import ConfigError
    from nemo_genrm.samples.groups import group_size_problems

    problems = group_size_problems(cfg.reward, one_by_one=per_sample)
    if problems:
        raise ConfigError(problems)


def rubric_items(value: Any) -> Any:
    """A rubric value as a drop-in passes it on: a list-like (list, tuple, array) as a list.

    Anything else (a single mapping, a string, a number) is passed on as it is, for the rubric
    mode to find malformed (``bad_input``: reward 0, counted, never judged): ``list()`` would
    turn a mapping into its keys and a string into its characters, and judge those.
    """
    if isinstance(value, (list, tuple)):
        return list(value)
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 1:  # a parquet column's list
        return value.tolist()
    return value


def _is_message_list(value: Any) -> bool:
    """Whether a response is a list of messages (each a dict with a ``role``), not content parts
    (dicts with a ``type`` and no ``role``) or text."""
    return (
        isinstance(value, (list, tuple)) and bool(value) and all(isinstance(m, Mapping) and "role" in m for m in value)
    )


class JudgeReward:
    """Judge answers against references with this package's environment logic, no Ray needed.

    Args:
        config: What :func:`genrm_section` accepts (a YAML path, a run config or the
            ``env.genrm`` section).
        judge: A ready judge to use instead of building one from ``config.judge`` (it is then
            not shut down by :meth:`close`).
        overrides: Overrides for a YAML ``config``.
        per_sample: The framework's name when it calls once per sample (verl, NeMo Gym): the
            pairwise mode then needs ``reward.pairwise_group.group_size``, so that a judge call
            waits for each group's responses instead of ranking whatever arrived together.

    Raises:
        ConfigError: Every problem with the config, at once, before any judge is started.

    Example:
        A stand-in judge (:class:`~nemo_genrm.testing.literal.LiteralJudge`: ``1`` when the
        answer it is shown states the reference's value, else ``0``) replaces the engine:

        >>> from nemo_genrm.integrations.judge_reward import JudgeReward
        >>> from nemo_genrm.testing.literal import LiteralJudge
        >>> reward = JudgeReward({"judge": {"model_name": "stand-in"}}, judge=LiteralJudge())
        >>> judgements = reward.judge(["Answer: 42", "Answer: 41", "Answer: 41 or 42"], references=["42"] * 3)
        >>> for j in judgements:
        ...     print(j.reward, j.reason, j.verdict, j.answer)
        1.0 judged 1 42
        0.0 judged 0 41
        0.0 hedged None None
        >>> reward.close()

        A judge whose reply holds no verdict failed; the answer did not: no reward to train on.

        >>> from nemo_genrm.testing.tagged_value_judges import RuleJudge
        >>> confused = JudgeReward({"judge": {"model_name": "stand-in"}}, judge=RuleJudge(lambda prompt: "maybe"))
        >>> (judgement,) = confused.judge(["Answer: 42"], references=["42"])
        >>> print(judgement.reason, judgement.judge_failed, judgement.reward_or_none)
        parse_failure True None
        >>> confused.close()
    """

    def __init__(
        self,
        config: Any,
        *,
        judge: Judge | None = None,
        overrides: Sequence[str] = (),
        per_sample: str | None = None,
    ) -> None:
        from nemo_genrm.config import GenRMConfig, validate
        from nemo_genrm.env.environment import GenRMEnvironmentImpl

        cfg = validate(GenRMConfig, genrm_section(config, overrides), prefix="env.genrm")
        check_per_sample(cfg, per_sample)
        self._env = GenRMEnvironmentImpl(cfg, judge=judge)

    @property
    def config(self) -> Any:
        """The validated ``env.genrm`` section."""
        return self._env.cfg

    @property
    def mode(self) -> str:
        """``reward.mode``: ``reference``, ``pairwise_group`` or ``rubric``."""
        return self._env.cfg.reward.mode

    def judge(
        self,
        answers: Sequence[Any],
        references: Sequence[Any] | None = None,
        questions: Sequence[Any] | None = None,
        extras: Sequence[Mapping[str, Any] | None] | None = None,
        *,
        whole_groups: bool = False,
    ) -> list[Judgement]:
        """Judge each answer in one batched judge call, as the configured mode does.

        Args:
            answers: The policy's responses (the answer is extracted from each as configured):
                each a string, OpenAI-style content parts, or a list of messages (dicts with a
                ``role``) whose last ``assistant`` message is the response.
            references: The reference answer of each (``None`` or empty:
                ``missing_ground_truth`` in reference mode; unused by the other modes).
            questions: The question of each, when known (shown to the judge): a string or
                content parts.
            extras: Further metadata of each sample: for pairwise groups what names the group
                (``group_id`` under ``reward.pairwise_group.group_key``, ``data_source``,
                ``genrm_prompt``, ``genrm_group_unique``: :mod:`nemo_genrm.samples.groups`), the
                rubric items under ``reward.rubric.items_key``.
            whole_groups: Pairwise with ``group_size``: the call holds every response of each of
                its groups (a TRL step, verl's whole batch), which are settled inside it: never
                held, never owed by another call.

        Returns:
            One :class:`Judgement` per answer, in order.

        Raises:
            ValueError: The lists differ in length.
            JudgeUnavailableError: The judge has been unreachable past
                ``fault_tolerance.unavailable_grace_s``.
        """
        logs, metas = self._inputs(answers, references, questions, extras)
        return self._judgements(self._env.step(logs, metas, whole_groups=whole_groups), len(logs)) if logs else []

    async def ajudge(
        self,
        answers: Sequence[Any],
        references: Sequence[Any] | None = None,
        questions: Sequence[Any] | None = None,
        extras: Sequence[Mapping[str, Any] | None] | None = None,
        *,
        whole_groups: bool = False,
    ) -> list[Judgement]:
        """:meth:`judge` awaited on the caller's event loop, without holding a thread.

        Concurrent calls join one judge batch (see :meth:`GenRMEnvironmentImpl.astep
        <nemo_genrm.env.environment.GenRMEnvironmentImpl.astep>`), however many there are.
        """
        logs, metas = self._inputs(answers, references, questions, extras)
        if not logs:
            return []
        return self._judgements(await self._env.astep(logs, metas, whole_groups=whole_groups), len(logs))

    @staticmethod
    def _inputs(
        answers: Sequence[Any],
        references: Sequence[Any] | None,
        questions: Sequence[Any] | None,
        extras: Sequence[Mapping[str, Any] | None] | None,
    ) -> tuple[list[list[Any]], list[dict[str, Any]]]:
        """The environment's message logs and metadata for these samples."""
        size = len(answers)
        references = list(references) if references is not None else [None] * size
        questions = list(questions) if questions is not None else [None] * size
        extras = list(extras) if extras is not None else [None] * size
        if not (size == len(references) == len(questions) == len(extras)):
            raise ValueError(
                f"{size} answers, {len(references)} references, {len(questions)} questions and "
                f"{len(extras)} extras: one of each per sample is needed"
            )
        logs, metas = [], []
        for answer, reference, question, extra in zip(answers, references, questions, extras, strict=True):
            user = {"role": "user", "content": question or ""}
            logs.append(
                [user, *answer] if _is_message_list(answer) else [user, {"role": "assistant", "content": answer}]
            )
            meta: dict[str, Any] = {**(extra or {}), "ground_truth": reference}
            if question:
                meta["question"] = question
            metas.append(meta)
        return logs, metas

    @staticmethod
    def _judgements(result: EnvironmentReturn, size: int) -> list[Judgement]:
        rewards = result.rewards.tolist()
        judgements = []
        for reward, outcome, ans in zip(rewards, sample_results(result.metadata, size), result.answers, strict=True):
            if outcome is None:  # every metadata entry sent is a dict, so each comes back with its result
                raise RuntimeError("the GenRM environment returned a sample without its result")
            judgements.append(
                Judgement(float(reward), outcome.reason, outcome.verdict, ans, outcome.masked, outcome.why)
            )
        return judgements

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
