"""How ``step`` calls reach a judge call: coalesced, and in ``pairwise_group`` mode grouped first.

:class:`Intake` owns the environment's :class:`~nemo_genrm.env.coalesce.Coalescer` and, in
``pairwise_group`` mode with ``group_size``, its :class:`~nemo_genrm.env.gather.GroupGate`:

- a call is first held until its GRPO groups are whole or past their wait, then goes on with
  every other call of those groups as one coalescer item (never split by a batch boundary);
  calls with nothing to rank (short groups, stragglers) are answered at once, with no judge call;
- a call that holds every response of each of its groups (:attr:`StepCall.whole`: the
  environment actor's calls, which NeMo-RL's batched rollout and the built-in driver send a
  batch at a time; a TRL step; verl's whole batch) is never held: its groups are settled inside
  it (:func:`~nemo_genrm.samples.groups.call_tags`: a group of ``group_size`` is ranked, a
  smaller one is masked at once, responses past the size are late), and it touches no other
  call's groups and leaves nothing owed, so no step, split or phase can reach another's groups;
- any other call is an item of its own.

It also says which group each sample of a judge call is in (:meth:`Intake.groups`): as gathered,
or, without ``group_size``, the groups of the sample's own step call.
"""

from __future__ import annotations

import concurrent.futures
import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nemo_genrm.config import CoalesceConfig, ConfigError, GenRMConfig, PairwiseGroupConfig
from nemo_genrm.env.coalesce import Coalescer, awaited, running_future
from nemo_genrm.env.gather import Bundle, GroupGate
from nemo_genrm.samples.groups import GroupKey, GroupTag, call_tags, sample_keys
from nemo_genrm.samples.inputs import PreparedSample
from nemo_genrm.samples.types import EnvironmentReturn

Outcome = EnvironmentReturn | BaseException
"""A step call's result, or the error only its caller sees."""


@dataclass(frozen=True)
class StepCall:
    """One ``step`` call waiting for its share of a judge call."""

    samples: list[PreparedSample]
    metas: list[Any]
    start: float
    deadline: float  # time.monotonic() by which this call must be answered
    groups: tuple[GroupTag | None, ...] | None = None  # pairwise with group_size: as gathered
    logs: list[Any] | None = None  # per sample, its message log (its prompt names its group)
    whole: bool = False  # it holds every response of each of its groups (see the module docstring)

    @property
    def size(self) -> int:
        """Its weight against ``coalesce.max_samples``."""
        return max(1, len(self.samples))


class Intake:
    """Routes step calls to shared judge calls (see the module docstring).

    Args:
        run_calls: ``calls -> one outcome per call``: judges the calls together.
        coalesce: ``coalesce`` (window and size of a shared judge call).
        pairwise: ``reward.pairwise_group`` in that mode, else ``None``.
    """

    def __init__(
        self,
        run_calls: Callable[[list[StepCall]], list[Outcome]],
        coalesce: CoalesceConfig,
        pairwise: PairwiseGroupConfig | None,
    ) -> None:
        self._run_calls, self._pairwise = run_calls, pairwise
        # An item is a list of calls that must share a judge call (the calls of GRPO groups).
        self._coalescer: Coalescer[list[StepCall], list[Outcome]] = Coalescer(
            self._run_items, max_wait_s=coalesce.max_wait_ms / 1000.0, max_items=coalesce.max_samples
        )
        self._gate: GroupGate[StepCall] | None = None
        self._whole_calls = itertools.count()  # scopes the groups of whole calls
        if pairwise is not None and pairwise.group_size is not None:
            self._gate = GroupGate(
                pairwise.group_size,
                wait_s=pairwise.group_wait_ms / 1000.0,
                release=self._release,
                memory_s=pairwise.straggler_memory_s,
            )

    def submit(self, call: StepCall) -> EnvironmentReturn:
        """Block until the call's result is ready (this thread may lead the judge call)."""
        if self._gate is not None and call.whole:
            return _only(self._settled_inside(call).result())
        if self._gate is not None:
            return self._gate.admit(call, self._keys(call)).result()
        return _only(self._coalescer.submit([call], size=call.size))

    def asubmit(self, call: StepCall) -> Awaitable[EnvironmentReturn]:
        """An awaitable of the call's result that holds no thread while it waits; errors are raised
        when it is awaited, as for :meth:`submit`'s caller."""
        if self._gate is None:
            return awaited(self._coalescer.enqueue([call], size=call.size), _only)
        if call.whole:
            return awaited(self._settled_inside(call), _only)
        try:
            future = self._gate.admit(call, self._keys(call))
        except BaseException as exc:  # noqa: BLE001 - a closed gate: raised when awaited
            future = running_future()
            future.set_exception(exc)
        return awaited(future)

    def groups(self, calls: Sequence[StepCall]) -> list[GroupTag | None] | None:
        """Per sample of ``calls`` (in order), its group; ``None`` outside ``pairwise_group``."""
        if self._pairwise is None:
            return None
        return [
            tag
            for index, call in enumerate(calls)
            for tag in (call.groups if call.groups is not None else call_tags(self._keys(call), index))
        ]

    def close(self, error: BaseException) -> None:
        """Fail the calls still held for their groups (they would wait for nothing)."""
        if self._gate is not None:
            self._gate.close(error)

    def _keys(self, call: StepCall) -> list[GroupKey | None]:
        """Per sample, the key of its group (:func:`~nemo_genrm.samples.groups.group_key`), or
        ``None`` for a sample that cannot be placed in one (the mode's rule)."""
        assert self._pairwise is not None
        return sample_keys(call.samples, call.metas, call.logs, self._pairwise.group_key)

    def _settled_inside(self, call: StepCall) -> concurrent.futures.Future:
        """A whole call, its groups settled inside it (never held): a future of its one outcome."""
        assert self._pairwise is not None
        tags = call_tags(self._keys(call), ("whole", next(self._whole_calls)), self._pairwise.group_size)
        return self._release([(call, tuple(tags))])

    def _release(self, bundle: Bundle) -> concurrent.futures.Future:
        """The calls the gate released together: a future of one outcome per call."""
        calls = [replace(call, groups=tags) for call, tags in bundle]
        ranked = any(
            tag is not None and tag.whole and sample.reason is None
            for call in calls
            for sample, tag in zip(call.samples, call.groups or (), strict=True)
        )
        if ranked:
            return self._coalescer.enqueue(calls, size=sum(call.size for call in calls))
        # Nothing to rank: answered now, without a judge call and without waiting for the running one.
        future = running_future()
        try:
            future.set_result(self._run_calls(calls))
        except BaseException as exc:  # noqa: BLE001 - each caller of the bundle gets it
            future.set_exception(exc)
        return future

    def _run_items(self, items: list[list[StepCall]]) -> list[list[Outcome]]:
        """The coalescer's batch: every item's calls in one judge call; outcomes per item."""
        outcomes = self._run_calls([call for item in items for call in item])
        out, offset = [], 0
        for item in items:
            out.append(outcomes[offset : offset + len(item)])
            offset += len(item)
        return out


def _only(outcomes: list[Outcome]) -> EnvironmentReturn:
    """The result of a one-call item (raised when it is its caller's error)."""
    (outcome,) = outcomes
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


# ------------------------------------------------------------- NeMo-RL's per-sample rollout path
_PER_SAMPLE_PATH = (
    "env.genrm.reward.mode pairwise_group cannot rank whole groups on NeMo-RL's asynchronous rollout path "
    "({settings}): it sends each response in its own step call, from a bounded pool of worker threads that "
    "each wait for their response's reward, so responses held for their groups keep the threads the rest "
    "of those groups need, and every group would be masked. Use synchronous rollouts "
    "(policy.generation.vllm_cfg.async_engine=false, grpo.async_grpo.enabled=false: each step's batch in one "
    "call), or the reference or rubric mode"
)


def _field(section: Any, name: str) -> Any:
    """``section[name]`` of a mapping or an attribute of a config object; ``None`` when absent."""
    if isinstance(section, Mapping):
        return section.get(name)
    return getattr(section, name, None)


def _streaming_setting(generation: Any) -> str | None:
    """The ``policy.generation`` setting that sends NeMo-RL down its per-sample rollout path, if any
    (NeMo-RL's own ``should_use_async_rollouts`` decides where it is importable)."""
    if generation is None:
        return None
    backend = _field(generation, "backend")
    try:
        from nemo_rl.models.generation.interfaces import should_use_async_rollouts

        streams = bool(should_use_async_rollouts(generation))
    except ImportError:
        streams = bool(_field(_field(generation, "vllm_cfg") or {}, "async_engine"))
    except AssertionError:  # NeMo-RL refuses the backend's settings; those backends always stream
        streams = True
    if not streams:
        return None
    if backend == "vllm":
        return "policy.generation.vllm_cfg.async_engine"
    if backend == "sglang":
        return "policy.generation.use_async_rollouts"
    return f"policy.generation.backend: {backend}, always asynchronous"


def check_pairwise_rollouts(genrm: GenRMConfig, generation: Any, grpo: Any) -> None:
    """Refuse ``pairwise_group`` where NeMo-RL will call ``step`` once per sample.

    NeMo-RL's ``grpo_train`` takes ``run_async_multi_turn_rollout`` whenever its generation
    backend streams (``policy.generation.vllm_cfg.async_engine``, sync GRPO included), and async
    GRPO always does. Call this wherever NeMo-RL's config is known, before any environment starts
    (``--engine nemo_rl``; a NeMo-RL script that holds its ``MasterConfig``).

    Args:
        genrm: The validated ``env.genrm`` section.
        generation: NeMo-RL's ``policy.generation`` (a mapping or its config object).
        grpo: NeMo-RL's ``grpo`` section.

    Raises:
        ConfigError: ``pairwise_group`` with a per-sample rollout path; the message names the setting.
    """
    if genrm.reward.mode != "pairwise_group":
        return
    settings = []
    if _field(_field(grpo, "async_grpo"), "enabled"):
        settings.append("grpo.async_grpo.enabled")
    streaming = _streaming_setting(generation)
    if streaming is not None:
        settings.append(streaming)
    if settings:
        raise ConfigError([_PER_SAMPLE_PATH.format(settings=" and ".join(settings))])


def refuse_lone_pairwise_call(genrm: GenRMConfig, size: int) -> None:
    """Refuse a ``pairwise_group`` step call of one response from a caller that blocks on it.

    The environment actor's callers send a step's batch in one call; a call of one response is
    NeMo-RL's per-sample rollout path, where whole groups cannot be promised (see
    :func:`check_pairwise_rollouts`), and where every group was masked. Refused at its first
    call, whatever NeMo-RL's config said, so a run is never masked silently.

    Raises:
        ConfigError: ``pairwise_group`` and a call holding one response.
    """
    if genrm.reward.mode == "pairwise_group" and size == 1:
        settings = (
            "policy.generation.vllm_cfg.async_engine, a generation backend that always streams, or "
            "grpo.async_grpo.enabled; a synchronous batch of one response cannot form a group either"
        )
        raise ConfigError([_PER_SAMPLE_PATH.format(settings=settings)])
