"""One judge per config for verl's pairwise groups, shared by every reward-loop worker process.

verl (0.9.1) scores responses in ``reward.num_workers`` RewardLoopWorker processes (8 by
default). Its batch path (``RewardLoopManager.compute_rm_score``) gives each worker a contiguous
chunk of the batch, which cuts a group whose size does not divide the chunk; its streaming path
(the agent loop, used when verl runs no reward model or one on resources of its own) scores
each trajectory as it finishes, on a worker picked at random. Either way the responses of one GRPO group reach several
processes at different times, and a judge per process would rank each process's part of the
group on its own.

So in ``pairwise_group`` mode inside a Ray actor (verl's reward-loop workers are actors; a
driver scoring alone keeps its judge in process), :func:`gathered_reward` hands every call to ONE
Ray actor per config (:class:`GroupJudgeActor`), named after a hash of the ``env.genrm``
section, created by whichever worker asks first (``get_if_exists``) in the job's namespace and
owned by it: its coalescer sees every member of a group, whichever worker verl picked, and
waits for the group by its key as the in-process judge does. The actor is an asyncio actor:
each waiting sample is a coroutine, not a thread, so a batch of any size waits together, and a
worker awaits the reply without holding a thread either.

The actor is not detached: Ray ends it with its owner, so it cannot outlive the job (a detached
actor, holding a judge and perhaps GPUs, would stay on a shared cluster after the run unless
something killed it, and nothing is sure to run at the end of a verl job). The price is that it
dies with the worker that created it, or on its own. A call that finds it dead (Ray's
``RayActorError``) therefore drops the dead handle, gets the actor again by its name or creates
it (the caller then owns it), and sends its samples once more; a group whose members were
waiting in the dead actor forms again in the new one, as each member's call is sent again.
When the second try fails too, the call raises :class:`~nemo_genrm.errors.JudgeUnavailableError`.

On verl's batch reward path (a reward model colocated with the policy) verl pads its batch
with exact copies of its first rows; there each row comes with its place in the padded batch,
and the actor judges the batch once it is whole, telling the copies apart
(:mod:`nemo_genrm.integrations.verl_padding`).

The reference and rubric modes judge each sample on its own and stay in the worker's process.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import ray

from nemo_genrm.config import GenRMConfig
from nemo_genrm.env.launch import STARTUP_ERRORS, keep_start_error
from nemo_genrm.errors import JudgeClosedError, JudgeUnavailableError
from nemo_genrm.integrations.judge_reward import Judgement, JudgeReward
from nemo_genrm.integrations.verl_padding import BatchSlot, PaddedBatches
from nemo_genrm.ray_env import actor_options

logger = logging.getLogger(__name__)

__all__ = ["GATHER_CONCURRENCY", "GatheredReward", "GroupJudgeActor", "actor_name", "gathered_reward"]

GATHER_CONCURRENCY = 65536
"""Samples the actor holds at once. Every response of a verl step may wait in it for its group
(one coroutine each); a call past this waits in Ray's queue, and its group with it."""

_NAME_PREFIX = "nemo_genrm_verl_groups_"
_RAISED_AS_IS = (*STARTUP_ERRORS, JudgeClosedError)  # the package's own errors, raised unwrapped


@keep_start_error
class GroupJudgeActor:
    """The body of the shared actor: a :class:`JudgeReward` awaited on the actor's event loop.

    A judge that fails to start is kept and raised from every call
    (:func:`~nemo_genrm.env.launch.keep_start_error`), so each worker's call raises the
    package's error instead of finding a dead actor.

    Args:
        section: The ``env.genrm`` section (validated again here).
    """

    def __init__(self, section: Any) -> None:
        self._reward = JudgeReward(section, per_sample="verl")
        wait_s = self._reward.config.reward.pairwise_group.group_wait_ms / 1000.0
        self._batches = PaddedBatches(self._reward, wait_s)  # verl's batch reward path

    async def judge(
        self, answer: str, reference: str | None, question: str | None, extras: Mapping[str, Any] | None
    ) -> Judgement:
        """Judge one response; it joins the open judge call, which waits for its group."""
        (judgement,) = await self._reward.ajudge([answer], [reference], [question], [extras])
        return judgement

    async def judge_in_batch(
        self,
        answer: str,
        reference: str | None,
        question: str | None,
        extras: Mapping[str, Any] | None,
        slot: Sequence[int],
    ) -> Judgement:
        """One row of verl's padded batch, judged once the whole batch is here
        (:class:`~nemo_genrm.integrations.verl_padding.PaddedBatches`).

        Args:
            answer, reference, question, extras: The row, as :meth:`judge` takes it.
            slot: Its :class:`~nemo_genrm.integrations.verl_padding.BatchSlot`.
        """
        return await self._batches.judge((answer, reference, question, extras), BatchSlot(*slot))

    def metrics(self) -> dict[str, float]:
        """The ``genrm/*`` metrics of the last judge call."""
        return self._reward.metrics()

    def shutdown(self) -> None:
        """Free the judge; safe to call twice."""
        self._reward.close()


_GroupJudge = ray.remote(max_concurrency=GATHER_CONCURRENCY)(GroupJudgeActor)


def actor_name(section: Mapping[str, Any]) -> str:
    """The shared actor's name: a hash of the section, so equal configs share one judge."""
    digest = hashlib.sha256(json.dumps(section, sort_keys=True, default=str).encode()).hexdigest()
    return _NAME_PREFIX + digest[:20]


class GatheredReward:
    """The worker's side of the shared actor, with :class:`JudgeReward`'s interface for verl.

    Args:
        section: The ``env.genrm`` section as a plain mapping.
        config: The same section, validated (the mode and its keys are read here).
    """

    def __init__(self, section: Mapping[str, Any], config: GenRMConfig) -> None:
        self.config = config
        self.name = actor_name(section)
        self._section = dict(section)
        self._lock = threading.Lock()  # one replacement of a dead handle, however many calls find it dead
        self._actor = self._connect()

    def _connect(self) -> Any:
        """The shared actor by its name, created (and owned by this process) when none lives.

        Non-detached: the actor ends with its owner, so it cannot outlive the job (see the
        module docstring).
        """
        return _GroupJudge.options(**actor_options(name=self.name, get_if_exists=True)).remote(self._section)

    def _replace(self, dead: Any) -> Any:
        """A live handle in place of ``dead``: the one another call already got, or a new one."""
        with self._lock:
            if self._actor is dead:
                logger.warning(
                    "pairwise_group: the shared judge actor %s died; getting or starting it again", self.name
                )
                self._actor = self._connect()
            return self._actor

    @property
    def mode(self) -> str:
        """``reward.mode`` (``pairwise_group``)."""
        return self.config.reward.mode

    async def ajudge(
        self,
        answers: Sequence[str],
        references: Sequence[Any] | None = None,
        questions: Sequence[str | None] | None = None,
        extras: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> list[Judgement]:
        """:meth:`JudgeReward.ajudge` in the shared actor: one remote call per sample, awaited.

        A call that finds the actor dead gets it again (or starts it) and sends its samples
        once more, once per call.

        Raises:
            ConfigError, JudgeStartupError, JudgeUnavailableError, JudgeClosedError: As the
                in-process judge raises them, unwrapped from Ray's error.
            JudgeUnavailableError: The actor was dead, and again after it was got once more.
        """
        size = len(answers)
        samples = list(
            zip(
                answers,
                list(references) if references is not None else [None] * size,
                list(questions) if questions is not None else [None] * size,
                [dict(e) if e is not None else None for e in extras] if extras is not None else [None] * size,
                strict=True,
            )
        )
        return await self._with_actor("judge", samples)

    async def ajudge_in_batch(
        self, answer: str, reference: Any, question: str | None, extras: Mapping[str, Any] | None, slot: BatchSlot
    ) -> Judgement:
        """One row of verl's padded batch, judged once the actor has the whole batch
        (:meth:`GroupJudgeActor.judge_in_batch`); errors as :meth:`ajudge` raises them."""
        sample = (answer, reference, question, dict(extras) if extras is not None else None, tuple(slot))
        (judgement,) = await self._with_actor("judge_in_batch", [sample])
        return judgement

    async def _with_actor(self, method: str, samples: list[tuple]) -> list[Judgement]:
        """``method`` of the actor for each sample; a dead actor is got again (or started) once."""
        actor = self._actor
        try:
            return await self._send(actor, method, samples)
        except ray.exceptions.RayActorError as exc:
            died_at = time.monotonic()
            actor, first = self._replace(actor), exc
        try:
            return await self._send(actor, method, samples)
        except ray.exceptions.RayActorError as exc:
            raise self._gone(first, exc, time.monotonic() - died_at) from exc

    @staticmethod
    async def _send(actor: Any, method: str, samples: list[tuple]) -> list[Judgement]:
        """Every sample to the actor's ``method``, awaited; the package's own errors unwrapped from Ray's."""
        refs = [getattr(actor, method).remote(*sample) for sample in samples]
        try:
            return [await ref for ref in refs]
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, _RAISED_AS_IS):
                raise cause.with_traceback(None) from None
            raise

    def _gone(self, first: BaseException, second: BaseException, down_s: float) -> JudgeUnavailableError:
        return JudgeUnavailableError(
            f"the shared pairwise judge actor {self.name} died ({type(first).__name__}), and the one got "
            f"or started in its place failed too ({type(second).__name__}: {(str(second).splitlines() or [''])[0]}); "
            "see the Ray logs of the GroupJudgeActor for why it died",
            down_s,
        )

    def metrics(self) -> dict[str, float]:
        """The shared judge's ``genrm/*`` metrics of its last judge call (blocks: not for the event loop).

        A dead actor is got again once (its metrics then start empty).
        """
        actor = self._actor
        try:
            return ray.get(actor.metrics.remote())
        except ray.exceptions.RayActorError:
            return ray.get(self._replace(actor).metrics.remote())

    def close(self) -> None:
        """Nothing to free here: the actor belongs to the run and ends with its owner."""


def gathered_reward(section: Mapping[str, Any], config: GenRMConfig) -> GatheredReward:
    """The worker's handle on the shared pairwise judge for this section (see the module docstring)."""
    reward = GatheredReward(section, config)
    logger.info("pairwise_group: this process judges through the shared Ray actor %s", reward.name)
    return reward
