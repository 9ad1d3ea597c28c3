"""The GenRM environment: a frozen judge LLM turns each policy answer into a reward.

:class:`GenRMEnvironmentImpl` holds the logic and runs without Ray when given a judge;
:class:`GenRMEnvironment` is the Ray actor a GRPO loop (NeMo-RL's or this package's) starts with
the ``env.genrm`` config section (``GenRMEnvironment.start(cfg)`` from a script, checked in the
driver: :mod:`nemo_genrm.env.launch`). One :meth:`~GenRMEnvironmentImpl.step`:

1. reads each sample (last assistant message, ``metadata["question"]`` or the user message,
   ``metadata["ground_truth"]``) and extracts the answer; malformed samples are decided here;
2. joins the concurrent step calls (:mod:`nemo_genrm.env.coalesce`): calls that arrive within
   ``coalesce.max_wait_ms`` of each other, or while the judge is busy, share one judge call
   (NeMo-RL's asynchronous rollout calls ``step`` once per sample, from many threads); in
   ``pairwise_group`` mode with ``group_size``, a call is first held until its GRPO groups are
   whole or past their wait (:mod:`nemo_genrm.env.gather`), and goes on with the other calls of
   those groups (:mod:`nemo_genrm.env.intake`);
3. hands the samples of those calls to the reward mode, built once from ``reward``
   (:mod:`nemo_genrm.modes`): reference mode (the default) renders one judge prompt per
   distinct (question, reference, answer) across those calls (``reward.dedup``), the
   pairwise-group and rubric modes theirs;
4. makes ONE batched judge call per voting judge (``generate`` then parse, or ``score`` for
   verdicts from logprobs), waking a colocated judge before it and putting it to sleep after;
5. returns to each caller NeMo-RL's ``EnvironmentReturn`` with one reward per sample of its own
   call, in its input order.

A caller's bad input raises in that caller only; when a judge call shared by several step calls
raises, each call (or the calls of one gathered GRPO group) is judged again on its own, in every
mode, so one caller's samples never change another's rewards.

Bad data never raises out of ``step``: every sample gets a reward and a reason
(:data:`nemo_genrm.samples.types.REASONS`), and a judge engine that fails at run time gives its
samples ``judge_error``. What training must not run through raises: caller bugs (a ``metadata``
list whose length differs from the batch, or ``metadata`` that is not a list), a judge config
the engine refuses (:class:`~nemo_genrm.errors.ConfigError`), a judge that was shut down
(:class:`~nemo_genrm.errors.JudgeClosedError`) and a judge that is gone for good
(:class:`~nemo_genrm.errors.JudgeUnavailableError`); all are told apart by type.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any

import ray

from nemo_genrm.config import GenRMConfig, JudgeConfig, validate
from nemo_genrm.env.answer_room import TooLongWatch, check_answer_room, judge_tokenizers
from nemo_genrm.env.coalesce import CarriedResults, carry_key
from nemo_genrm.env.intake import Intake, StepCall, refuse_lone_pairwise_call
from nemo_genrm.env.launch import EnvironmentLauncher, keep_start_error
from nemo_genrm.env.special_tokens import tokenizer_special_tokens, warn_unknown_special_tokens
from nemo_genrm.env.startup import check_score_labels, judge_config, placement_info, sleep_judge, start_judge
from nemo_genrm.env.watching import build_watchdog, canary_preparer, judge_canaries, observe_calls
from nemo_genrm.errors import JudgeClosedError, RewardHackingSuspected, is_fatal
from nemo_genrm.judges.base import Judge, JudgeRequest, JudgeStats
from nemo_genrm.judges.deadline import step_deadline
from nemo_genrm.judges.placement import JudgeResources
from nemo_genrm.judges.results import CallCounter
from nemo_genrm.modes import Ask, Counters, Mode, Reader, Vote, assemble, build_mode, read_replies
from nemo_genrm.prompts import PromptBuilder
from nemo_genrm.ray_runtime import actor_runtime_env
from nemo_genrm.samples.inputs import PreparedSample, message_logs, metadata_list, prepare_sample
from nemo_genrm.samples.metrics import RECENT_JUDGE_CALLS, StepTally
from nemo_genrm.samples.types import JUDGE_ERROR, JUDGED, EnvironmentInterface, EnvironmentReturn, SampleResult
from nemo_genrm.watchdog import WatchTally

logger = logging.getLogger(__name__)


class _SharedCallFailed(Exception):
    """A judge call shared by several units of step calls raised; retry each unit alone."""


def _units(calls: Sequence[StepCall]) -> list[list[int]]:
    """The step calls that must be judged together, as lists of indices into ``calls``: each
    call alone, except the calls of one gathered GRPO group (pairwise with ``group_size``), which
    stay together so that a retry never ranks part of a group."""
    parent = list(range(len(calls)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    first_call: dict[Hashable, int] = {}
    for index, call in enumerate(calls):
        for tag in call.groups or ():
            if tag is not None:
                parent[root(index)] = root(first_call.setdefault(tag.id, index))
    units: dict[int, list[int]] = {}
    for index in range(len(calls)):
        units.setdefault(root(index), []).append(index)
    return list(units.values())


class GenRMEnvironmentImpl(EnvironmentInterface):
    """The environment's logic, usable without Ray (see the module docstring).

    Args:
        cfg: The ``env.genrm`` section (dict, DictConfig or :class:`GenRMConfig`).
        judge: A ready judge to use instead of building one (it is then not shut down here).
        placement_group: Colocated only: the placement group to join (wins over
            ``resources.colocate_with``).
        policy_gpu_fraction: Colocated only: share of each GPU the policy holds, when known,
            to check that the fractions add up to at most 1.
        judges: Ready judges voting with ``judge`` instead of starting ``reward.judges`` (one per
            entry, in order; not shut down here).

    Raises:
        ConfigError: Every problem with the config or the resource layout, at once.

    Example:
        A stand-in judge (:class:`~nemo_genrm.testing.literal.LiteralJudge`: ``1`` when the
        answer it is shown states the reference's value, else ``0``) replaces the engine; the
        config still names a model, as a user's would:

        >>> from nemo_genrm.env.environment import GenRMEnvironmentImpl
        >>> from nemo_genrm.testing.literal import LiteralJudge
        >>> env = GenRMEnvironmentImpl({"judge": {"model_name": "stand-in"}}, judge=LiteralJudge())
        >>> env.cfg.reward.mode, env.cfg.verdict.on_parse_failure
        ('reference', 'zero')
        >>> env.shutdown()
    """

    def __init__(
        self,
        cfg: Any,
        *,
        judge: Judge | None = None,
        placement_group: Any = None,
        policy_gpu_fraction: float | None = None,
        judges: Sequence[Judge] | None = None,
    ) -> None:
        self.cfg: GenRMConfig = validate(GenRMConfig, cfg, prefix="env.genrm")
        if judges is not None and len(judges) != len(self.cfg.reward.judges):
            raise ValueError(f"{len(judges)} voting judge(s) given for {len(self.cfg.reward.judges)} in reward.judges")
        self._colocated = self.cfg.resources.placement == "colocated"
        self._resources: JudgeResources | None = None
        self._owns_judge = judge is None
        self._judge: Judge | None = None
        self._members: list[Judge] = list(judges or [])  # further voting judges (reward.judges)
        self._owned_members: list[tuple[Judge, JudgeResources]] = []
        # Every judge's tokenizer, before any worker starts: its special tokens are defanged inside
        # answers too, and the mode's fixed prompt must leave room in its context.
        tokenizers = judge_tokenizers(self.cfg, [judge, *(judges or ())])
        warn_unknown_special_tokens([self.cfg.judge, *self.cfg.reward.judges])
        special = sorted({t for tokenizer in tokenizers for t in tokenizer_special_tokens(tokenizer)})
        self._builder = PromptBuilder(self.cfg.prompt, self.cfg.verdict, special_tokens=special)
        self._mode: Mode = build_mode(self.cfg, self._builder, special)  # built once, here
        check_answer_room(self.cfg, self._mode.fixed_request(), tokenizers)
        self._needs_reference = self._mode.needs_reference and "reference" in self._builder.template.fields
        # Modes that judge the whole response show it, shortened to the cap, not the extracted answer.
        self._response_chars = self.cfg.prompt.response.max_chars if self._mode.shows_response else None
        self._too_long = TooLongWatch(self.cfg)
        if judge is None:
            judge, self._resources = start_judge(
                self._judge_config(),
                self.cfg,
                placement_group=placement_group,
                policy_gpu_fraction=policy_gpu_fraction,
            )
        self._judge = judge
        try:
            for member in self.cfg.reward.judges if judges is None else ():  # each on resources of its own
                started = start_judge(member, self.cfg)
                self._members.append(started[0])
                self._owned_members.append(started)
            check_score_labels(self.cfg, [judge, *self._members])  # labels an engine cannot score: now
            if self._colocated:
                judge.sleep()  # free the device for the policy until the first step
        except BaseException:
            self.shutdown()
            raise
        self._latencies: collections.deque[float] = collections.deque(maxlen=RECENT_JUDGE_CALLS)
        self._last = StepTally()
        self._since_global = StepTally()
        self._metrics_lock = threading.Lock()
        pairwise = self.cfg.reward.pairwise_group if self.cfg.reward.mode == "pairwise_group" else None
        self._intake = Intake(self._run_calls, self.cfg.coalesce, pairwise)
        self._carried: CarriedResults[Hashable, Vote] = CarriedResults()
        self._watchdog = build_watchdog(self.cfg, self._mode.name)
        self._prepare_canary = canary_preparer(self._builder, self._needs_reference, self._response_chars)
        self._watch_last, self._watch_since = WatchTally(), WatchTally()

    def _judge_config(self) -> JudgeConfig:
        """The judge section as started here (:func:`nemo_genrm.env.startup.judge_config`)."""
        return judge_config(self.cfg)

    # ------------------------------------------------------------------------------ step
    def step(
        self,
        message_log_batch: Sequence[Any],
        metadata: Sequence[Any] | None,
        return_extracted_answer: bool = False,
        *,
        whole_groups: bool = False,
    ) -> EnvironmentReturn:
        """Judge a batch of responses; one reward per sample, in order.

        Safe to call from many threads at once: concurrent calls share judge calls (see the
        module docstring) and each gets exactly its own results.

        Args:
            message_log_batch: Per sample, the conversation (dicts with ``role`` and
                ``content``); the last ``assistant`` message is the response judged.
            metadata: Per sample, a dict with ``ground_truth`` and optionally ``question``
                (``None`` entries, or ``None`` for the whole batch, are accepted).
            return_extracted_answer: NeMo-RL's flag (its eval loop passes ``True``, as the third
                positional argument, to read ``answers`` for ``cons@k``); the answers judged
                are returned either way.
            whole_groups: ``pairwise_group`` with ``group_size``: the call holds every response
                of each of its groups, so they are settled inside it, never held
                (:mod:`nemo_genrm.env.intake`).

        Returns:
            ``EnvironmentReturn(observations, metadata, next_stop_strings, rewards,
            terminateds, answers)``; ``rewards`` is float32 ``[B]``, ``terminateds`` all True.

        Raises:
            ValueError: ``metadata`` has a different length than the batch.
            TypeError: ``message_log_batch`` or ``metadata`` is a string or a mapping (or
                ``metadata`` is neither ``None`` nor a list): a bug in the caller.
            ConfigError: The judge refused its config (e.g. labels it cannot score).
            JudgeClosedError: The environment or its judge was shut down.
            JudgeUnavailableError: The judge has had no live worker past
                ``fault_tolerance.unavailable_grace_s``.
            RewardHackingSuspected: The watchdog's alarm fired under ``reward.watchdog.action: stop``
                (every step after the judge call that fired it raises, with the evidence).

        Example:
            A right answer, a wrong one and a hedge, judged by a stand-in that says ``1`` when
            the answer it is shown states the reference's value. The hedge never reaches the
            judge: it offers two values for a reference that holds one (reason ``hedged``):

            >>> from nemo_genrm.env.environment import GenRMEnvironmentImpl
            >>> from nemo_genrm.testing.literal import LiteralJudge
            >>> judge = LiteralJudge()
            >>> env = GenRMEnvironmentImpl({"judge": {"model_name": "stand-in"}}, judge=judge)
            >>> def chat(answer):
            ...     return [{"role": "user", "content": "What is 6 times 7?"}, {"role": "assistant", "content": answer}]
            >>> result = env.step(
            ...     [chat("Answer: 42"), chat("Answer: 41"), chat("Answer: 41 or 42")],
            ...     [{"ground_truth": "42"}] * 3,
            ... )
            >>> result.rewards
            tensor([1., 0., 0.])
            >>> [str(meta["genrm"]["reason"]) for meta in result.metadata]
            ['judged', 'judged', 'hedged']
            >>> result.answers  # what the judge was shown of each (None: nothing was sent)
            ['42', '41', None]
            >>> len(judge.shown)  # one judge prompt per judged sample
            2
            >>> env.shutdown()
        """
        if (stop := self.watchdog_stop()) is not None:
            raise stop
        return self._intake.submit(self._prepare(message_log_batch, metadata, whole_groups))

    def astep(
        self,
        message_log_batch: Sequence[Any],
        metadata: Sequence[Any] | None,
        return_extracted_answer: bool = False,
        *,
        whole_groups: bool = False,
    ) -> Awaitable[EnvironmentReturn]:
        """:meth:`step` for callers on an event loop: await what it returns. The call joins the
        open judge call without holding a thread, so any number of concurrent callers share one
        judge call, whatever the loop's thread pool (:meth:`~nemo_genrm.env.intake.Intake.asubmit`).

        A plain method returning the awaitable, for in-process use (the drop-ins): an
        ``async def`` would make Ray run the actor as an async actor, every method on one loop.

        Raises:
            The same as :meth:`step` (caller bugs at once, the rest when awaited).
        """
        if (stop := self.watchdog_stop()) is not None:
            raise stop
        return self._intake.asubmit(self._prepare(message_log_batch, metadata, whole_groups))

    def _prepare(
        self, message_log_batch: Sequence[Any], metadata: Sequence[Any] | None, whole_groups: bool = False
    ) -> StepCall:
        """Read one step call's samples (caller bugs raise here, in the caller)."""
        start = time.perf_counter()
        # The deadline starts now: input checks, coalescing waits and fitting all count.
        deadline = time.monotonic() + self.cfg.fault_tolerance.step_timeout_s
        logs = message_logs(message_log_batch)
        metas = metadata_list(metadata, len(logs))
        samples = [
            prepare_sample(
                log, meta, self._builder, needs_reference=self._needs_reference, response_chars=self._response_chars
            )
            for log, meta in zip(logs, metas, strict=True)
        ]
        return StepCall(samples, metas, start, deadline, logs=logs, whole=whole_groups)

    def _run_calls(self, calls: list[StepCall]) -> list[EnvironmentReturn | BaseException]:
        """Judge every call's samples in one engine call; one result (or error) per call."""
        batch = StepTally()
        answered: dict[Hashable, Vote] = {}  # this judge call's verdicts, offered to the next one
        with step_deadline(min(call.deadline for call in calls)):  # the earliest caller's
            per_call = self._judge_calls(calls, batch, answered)
        watch = WatchTally()
        if self._watchdog is not None:
            per_call = observe_calls(self._watchdog, calls, per_call, batch, watch)
        if self.cfg.reward.dedup:
            self._carried.keep(answered)
        logger.debug("genrm judge call for %d step call(s): %d prompt(s)", len(calls), batch.judge_prompts)
        out: list[EnvironmentReturn | BaseException] = []
        for call, results in zip(calls, per_call, strict=True):
            tally = StepTally(steps=1, samples=len(call.samples))
            try:
                out.append(
                    assemble(
                        call.samples,
                        results,
                        call.metas,
                        tally,
                        mask_parse_failures=self.cfg.verdict.on_parse_failure == "mask",
                    )
                )
            except Exception as exc:  # this caller's own failure; the others keep their results
                logger.exception("could not assemble the results of one step call")
                out.append(exc)
                continue
            tally.step_time_s = time.perf_counter() - call.start
            batch.add(tally)
        if self._watchdog is not None:  # after the real results: canaries never change them
            self._judge_canaries(calls, batch.judge_prompts, watch, per_call)
            self._watchdog.close(watch)
        with self._metrics_lock:
            self._last = batch
            self._since_global.add(batch)
            self._watch_last = watch
            self._watch_since.add(watch)
        self._too_long.observe(batch, [s for call in calls for s in call.samples])
        return out

    # ------------------------------------------------------------------------- watchdog
    def _judge_canaries(
        self, calls: list[StepCall], real_prompts: int, watch: WatchTally, per_call: list[list[SampleResult]]
    ) -> None:
        """The watchdog's canaries for this judge call, judged after it (:mod:`nemo_genrm.env.watching`)."""

        def judge(samples: list[PreparedSample], metas: list[Any]) -> tuple[list[SampleResult], StepTally]:
            tally = StepTally()
            ask = self._asker(tally, False, time.perf_counter(), {}, canary=True)
            with step_deadline(time.monotonic() + self.cfg.fault_tolerance.step_timeout_s):
                return self._mode.judge(samples, metas, ask, Counters(), None), tally

        if self._watchdog is not None:
            judge_canaries(
                self._watchdog, calls, real_prompts, watch, prepare=self._prepare_canary, judge=judge, per_call=per_call
            )

    def watchdog_stop(self) -> RewardHackingSuspected | None:
        """The watchdog's stop, once its alarm fired under ``reward.watchdog.action: stop`` (else ``None``):
        the GRPO driver raises it after the step's checkpoint."""
        watchdog = getattr(self, "_watchdog", None)
        return watchdog.stop_error() if watchdog is not None else None

    def _judge_calls(
        self, calls: list[StepCall], tally: StepTally, answered: dict[Hashable, Vote]
    ) -> list[list[SampleResult]]:
        """Per call, the mode's results, the calls judged together.

        When the shared engine call raises (a non-fatal error), each unit of calls (a call, or
        the calls of one gathered GRPO group) is judged again on its own, so a prompt that
        breaks the engine only costs its own caller, in every mode and with every option.
        """
        units = _units(calls)
        try:
            return self._mode_results(calls, tally, answered, isolate=len(units) > 1)
        except _SharedCallFailed:
            logger.warning("a judge call shared by %d step calls failed; judging each alone", len(calls))
        per_call: list[list[SampleResult]] = [[] for _ in calls]
        for unit in units:
            alone = self._mode_results([calls[i] for i in unit], tally, answered, isolate=False)
            for index, results in zip(unit, alone, strict=True):
                per_call[index] = results
        return per_call

    def _mode_results(
        self, calls: list[StepCall], tally: StepTally, answered: dict[Hashable, Vote], *, isolate: bool
    ) -> list[list[SampleResult]]:
        """Per call, the reward mode's results (:mod:`nemo_genrm.modes`): the mode judges the
        samples of all calls together (a gathered GRPO group may span calls; without
        ``group_size`` a group is one call's); an engine failure gives the prompts it held
        ``judge_error``, in every call that shared them, or with ``isolate`` raises
        :class:`_SharedCallFailed` (the mode's counters of that try are then dropped)."""
        samples = [s for call in calls for s in call.samples]
        metas = [m for call in calls for m in call.metas]
        counters = Counters()
        ask = self._asker(tally, isolate, max(call.start for call in calls), answered)
        results = self._mode.judge(samples, metas, ask, counters, self._intake.groups(calls))
        for name, value in counters.items():
            tally.modes[name] = tally.modes.get(name, 0.0) + value
        per_call, offset = [], 0
        for call in calls:
            per_call.append(results[offset : offset + len(call.samples)])
            offset += len(call.samples)
        return per_call

    def _asker(
        self, tally: StepTally, isolate: bool, arrived: float, answered: dict[Hashable, Vote], *, canary: bool = False
    ) -> Ask:
        """The modes' batched judge call: voting judge ``member`` (0: ``judge``), votes back.

        With ``reward.dedup``, a prompt the previous judge call answered while these step calls
        (the last of them arriving at ``arrived``) waited for it is shared, not asked again
        (:class:`~nemo_genrm.env.coalesce.CarriedResults`; counted as dedup hits), and this
        call's own verdicts are put in ``answered`` for the next one. A ``canary`` call neither
        takes nor offers carried verdicts, nor counts in the latency percentiles.
        """
        judges = [self._require_judge(), *self._members]
        configs = [self.cfg.judge, *self.cfg.reward.judges]
        verdict_from = [c.verdict_from for c in configs]
        budgets = [c.sampling.reply_tokens for c in configs]

        def ask(member: int, requests: list[JudgeRequest], reader: Reader) -> list[Vote]:
            def call(judge: Judge, batch: list[JudgeRequest]) -> list[Vote]:
                return read_replies(judge, batch, reader, verdict_from[member], reply_tokens=budgets[member])

            if not self.cfg.reward.dedup or canary:
                return self._judge_all(requests, tally, judges[member], call, isolate=isolate, latency=not canary)
            keys = [carry_key(member, request) for request in requests]
            votes = self._carried.take(keys, [arrived] * len(keys))
            fresh = [i for i in range(len(requests)) if i not in votes]
            judged = self._judge_all([requests[i] for i in fresh], tally, judges[member], call, isolate=isolate)
            votes.update(zip(fresh, judged, strict=True))
            answered.update({keys[i]: votes[i] for i in fresh if votes[i].reason == JUDGED})
            return [votes[i] for i in range(len(requests))]

        return ask

    def _judge_all(
        self,
        requests: list[JudgeRequest],
        tally: StepTally,
        judge: Judge,
        call: Callable[[Judge, list[JudgeRequest]], list[Vote]],
        *,
        isolate: bool,
        latency: bool = True,
    ) -> list[Vote]:
        """One batched judge call (``call(judge, requests)``); one vote per request, whatever happens.

        With ``isolate``, a non-fatal engine exception raises :class:`_SharedCallFailed` (the
        caller retries per unit of step calls) instead of giving every request ``judge_error``.
        """
        if not requests:
            return []
        counter = CallCounter(judge)  # the counts of this call's results, whoever else calls the judge
        try:
            if self._colocated:
                t0 = time.perf_counter()
                judge.wake()
                tally.wake_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            try:
                outcomes = call(counter, requests)
            finally:
                elapsed = time.perf_counter() - t0
                tally.judge_calls += 1
                tally.judge_time_s += elapsed
                if latency:
                    with self._metrics_lock:
                        self._latencies.append(elapsed)
        except Exception as exc:
            if is_fatal(exc):
                raise
            if isolate:
                raise _SharedCallFailed from exc
            logger.exception("judge call failed for %d prompt(s); their samples get judge_error", len(requests))
            outcomes = [Vote(JUDGE_ERROR)] * len(requests)
        finally:
            if self._colocated:
                sleep_judge(judge, tally)
            # Counted on every path: a shared call that failed (and is retried per caller) still
            # sent its prompts; the token and error counts are those of the results it returned.
            tally.judge_prompts += len(requests)
            tally.judge.add(counter.counts)
        return outcomes

    # -------------------------------------------------------------------------- metrics
    def last_metrics(self) -> dict[str, float]:
        """The ``genrm/*`` metrics of the last judge call (see :mod:`nemo_genrm.samples.metrics`).

        That is every step call that shared the most recent judge call, together: the last
        step when calls do not overlap (synchronous rollouts), the last coalesced group of
        per-sample calls under asynchronous rollouts. For a whole training step use
        :meth:`global_post_process_and_metrics`.
        """
        with self._metrics_lock:
            return {
                **self._last.metrics(list(self._latencies)),
                **(self._watch_last.metrics() if self._watchdog else {}),
            }

    def global_post_process_and_metrics(self, batch: Any) -> tuple[Any, dict[str, float]]:
        """Return the batch unchanged and the metrics of every step since the previous call.

        Args:
            batch: The rollout batch (a ``BatchedDataDict`` or a dict); not modified.

        Returns:
            ``(batch, metrics)`` with the ``genrm/*`` metrics summed over those steps.
        """
        with self._metrics_lock:
            metrics = {
                **self._since_global.metrics(list(self._latencies)),
                **(self._watch_since.metrics() if self._watchdog else {}),
            }
            self._since_global, self._watch_since = StepTally(), WatchTally()
        return batch, metrics

    # ------------------------------------------------------------------------- lifecycle
    def judge_stats(self) -> JudgeStats:
        """The judge engine's own counters (for tests and benchmarks)."""
        return self._require_judge().stats()

    def placement_info(self) -> dict[str, Any]:
        """Where the judge runs (see :func:`nemo_genrm.env.startup.placement_info`)."""
        return placement_info(self._resources, self._require_judge())

    def shutdown(self) -> None:
        """Stop the judge's workers and remove its placement groups; safe to call twice."""
        judge, self._judge = self._judge, None
        owned, self._owned_members = getattr(self, "_owned_members", []), []
        if getattr(self, "_intake", None) is not None:
            self._intake.close(JudgeClosedError("the GenRM environment was shut down"))
        try:
            if judge is not None and self._owns_judge:
                judge.shutdown()
        finally:
            if self._resources is not None:
                self._resources.release()
            for member, resources in owned:
                try:
                    member.shutdown()
                finally:
                    resources.release()

    def _require_judge(self) -> Judge:
        if self._judge is None:
            raise JudgeClosedError("the GenRM environment was shut down")
        return self._judge


MAX_CONCURRENCY = 512
"""Step calls the actor runs at once (threads); calls beyond wait in Ray's queue."""


@keep_start_error
class GenRMEnvironmentActor(GenRMEnvironmentImpl):
    """The body of the ``GenRMEnvironment`` Ray actor: :class:`GenRMEnvironmentImpl`, with a
    start-up error kept and raised from every call instead of killing the actor
    (:func:`~nemo_genrm.env.launch.keep_start_error`), and ``ready()``."""

    def step(
        self, message_log_batch: Sequence[Any], metadata: Sequence[Any] | None, *args: Any, **kwargs: Any
    ) -> EnvironmentReturn:
        """:meth:`GenRMEnvironmentImpl.step` (whatever else it takes is passed on); a pairwise call of
        one response (NeMo-RL's per-sample rollout path) is refused
        (:func:`~nemo_genrm.env.intake.refuse_lone_pairwise_call`), so every call holds whole
        groups (NeMo-RL's batched rollout and eval loop, the built-in driver: a batch of whole
        prompts at a time): with ``group_size`` its groups are settled inside it, never held, and
        nothing of one call (a validation at one response per prompt) is owed by another."""
        refuse_lone_pairwise_call(self.cfg, len(message_log_batch))
        return super().step(message_log_batch, metadata, *args, whole_groups=True, **kwargs)


GenRMEnvironment = EnvironmentLauncher(
    ray.remote(max_concurrency=MAX_CONCURRENCY, runtime_env=actor_runtime_env())(GenRMEnvironmentActor)
)
"""The GenRM environment as a Ray actor: ``GenRMEnvironment.start(cfg)`` (see :mod:`nemo_genrm.env.launch`).

``start`` checks the config in the driver, creates the actor and waits for its judge, raising a
failure to start as the package's own error. NeMo-RL starts it from its registry with
``options(runtime_env=...).remote(cfg)`` (the ``env.genrm`` section), checked in the driver too.
Its methods are those of :class:`GenRMEnvironmentImpl` (``step``,
``global_post_process_and_metrics``, ``last_metrics``, ``shutdown``) and ``ready``. It is a
threaded actor, so concurrent ``step`` calls share judge calls, and it runs on the driver's
interpreter (:mod:`nemo_genrm.ray_runtime`): a caller that passes ``.options(runtime_env=...)``
replaces that default and should build its runtime environment with
:func:`nemo_genrm.ray_runtime.actor_runtime_env`.
"""
