"""Gathering GRPO groups by their key before they are ranked (``pairwise_group`` with ``group_size``).

Asynchronous rollouts send the responses of one group in separate ``step`` calls, from many
threads, at times nobody controls. A group can only be ranked once it is whole, and it must be
ranked the same whatever the timing, so :class:`GroupGate` holds each step call until every
group it touches is *settled*, then hands the settled calls on together:

- a group opens when the first response with its key arrives (when no response of that key is
  owed, below) and is whole once ``size`` responses have arrived (an empty one counts too: it
  came); the next response with that key opens a new group, so a question asked again in a
  later GRPO step forms a group of its own;
- a group still short ``wait_s`` after it opened is settled as short: each of its responses is
  masked, never ranked among the part that came (whose rewards would depend on timing);
- the responses it still lacks are remembered by key as *owed* (``size`` minus those that came):
  the next ones with that key are stragglers, tagged late and released at once, to be masked
  without a judge prompt and without a wait. The memory of a key ends when its debt is paid, or
  ``memory_s`` after its group was settled (a key that comes back after that opens a new group),
  and at most ``max_owed`` keys are remembered (the oldest go first);
- a key's debt may be paid by the first responses of the key's next group rather than by
  stragglers (nothing in a response tells them apart), which leaves that group short too. So a
  group opened within ``wait_s`` of its key's debt being paid owes nothing when it is settled
  short: one lost response costs at most its own group and the next one of its key, never every
  later group of that key;
- a key that names one group only (``GroupKey.unique``: verl's ``uid``, drawn afresh for every
  prompt of every step and every validation batch) is gathered once: once its group is settled,
  whole or short, a later response with that key (the extra trajectories verl's legacy
  validation generates for its padding rows, which carry their row's ``uid``; a straggler) is
  tagged late and released at once, never opening a group of its own and never waiting, however
  late it comes: the key is remembered until ``max_owed`` newer ones push it out, never by time
  (it cannot come back as another group). Such a key leaves no debt on any other key, so a short
  group costs nothing beyond itself, and no step or phase (validation, training) can mask
  another's groups;
- calls are released as soon as every group they touch is settled, together with every other
  call holding a response of those groups (a *component*), so a whole group goes on in one
  piece, and never waits for a short group unless one of its calls also holds a response of it.

A released component goes to ``release`` as one item (the environment hands it to the
coalescer, which never splits an item), so a batch boundary can never cut a group either.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from nemo_genrm.env.coalesce import running_future
from nemo_genrm.samples.groups import GroupTag

T = TypeVar("T")

logger = logging.getLogger(__name__)

MAX_OWED = 65_536
"""Keys whose stragglers are remembered at most; past it the oldest are forgotten."""

Bundle = list[tuple[Any, tuple[GroupTag | None, ...]]]
"""Released calls: each item with its samples' group tags (``None``: in no group)."""


@dataclass(eq=False)
class _Group:
    """One group being gathered."""

    key: Hashable
    serial: int
    deadline: float
    arrived: int = 0
    whole: bool | None = None  # None while open
    calls: list[_Held] = field(default_factory=list)
    # Opened right after its key's debt was paid (perhaps by its own first responses): settled
    # short, it leaves no debt, so a lost response cannot mask every later group of its key.
    owes_nothing: bool = False


@dataclass(eq=False)
class _Held:
    """One step call held by the gate."""

    item: Any
    slots: list[_Group | GroupTag | None]  # per sample: its group, a late tag, or no group
    future: concurrent.futures.Future = field(default_factory=running_future)
    released: bool = False


@dataclass
class _Owed:
    count: int
    expires: float
    tag: GroupTag


class GroupGate(Generic[T]):
    """Holds step calls until their groups are settled (see the module docstring).

    Args:
        size: Responses per group (``reward.pairwise_group.group_size``).
        wait_s: How long a group may take to fill from its first response (``group_wait_ms``).
        release: ``bundle -> future of one result (or exception) per item``; called outside the
            gate's lock, from the admitting thread or the gate's timer thread, so it must not
            block on the judge.
        memory_s: How long a short group's stragglers are recognised after it was settled (keys
            that name one group only are remembered regardless).
        max_owed: Keys whose stragglers are remembered at most (and, apart, settled keys that
            name one group only).
    """

    def __init__(
        self,
        size: int,
        *,
        wait_s: float,
        release: Callable[[Bundle], concurrent.futures.Future],
        memory_s: float,
        max_owed: int = MAX_OWED,
    ) -> None:
        self._size, self._wait_s, self._release = size, wait_s, release
        self._memory_s, self._max_owed = memory_s, max_owed
        self._cond = threading.Condition()
        self._open: dict[Hashable, _Group] = {}
        self._owed: OrderedDict[Hashable, _Owed] = OrderedDict()  # settled order = expiry order
        self._paid: OrderedDict[Hashable, float] = OrderedDict()  # key -> when its debt was paid
        # Keys that name one group only, settled: key -> the tag of its late responses, oldest first.
        self._settled: OrderedDict[Hashable, GroupTag] = OrderedDict()
        self._deadlines: list[tuple[float, int, _Group]] = []
        self._held: set[_Held] = set()
        self._serial = itertools.count()
        self._timer: threading.Thread | None = None
        self._error: BaseException | None = None
        self._warned_at = float("-inf")  # when a short group was last warned about

    def admit(self, item: T, keys: Sequence[Hashable | None]) -> concurrent.futures.Future:
        """Hold one step call until its groups are settled.

        Args:
            item: The call, handed to ``release`` with its tags.
            keys: Per sample, its group key, or ``None`` for a sample in no group.

        Returns:
            A future of the call's result from ``release``.

        Raises:
            BaseException: The error the gate was closed with.
        """
        with self._cond:
            if self._error is not None:
                raise self._error
            now = time.monotonic()
            self._forget(now)
            held = _Held(item, [self._place(key, now) for key in keys])
            for slot in held.slots:
                if isinstance(slot, _Group) and held not in slot.calls:
                    slot.calls.append(held)
            self._held.add(held)
            bundle = self._take([held])
            self._start_timer()
        self._send(bundle)
        return held.future

    def close(self, error: BaseException) -> None:
        """Fail every call still held with ``error``, and every later :meth:`admit`."""
        with self._cond:
            self._error = error
            held, self._held = list(self._held), set()
            self._cond.notify_all()
        for call in held:
            call.future.set_exception(error)

    def owed_keys(self) -> list[Hashable]:
        """Keys whose stragglers are remembered, oldest first."""
        with self._cond:
            return list(self._owed)

    # ----------------------------------------------------------------------------- internals
    def _place(self, key: Hashable | None, now: float) -> _Group | GroupTag | None:
        """The group a response with ``key`` joins (or its late tag); under the lock."""
        if key is None:
            return None
        settled = self._settled.get(key)
        if settled is not None:  # a key gathered once, already settled: an extra row or a straggler
            return settled
        owed = self._owed.get(key)
        if owed is not None:  # a straggler of a group settled short
            owed.count -= 1
            if owed.count <= 0:
                del self._owed[key]
                self._paid.pop(key, None)
                self._paid[key] = now
            return owed.tag
        group = self._open.get(key)
        if group is None:
            group = self._open[key] = _Group(key, next(self._serial), now + self._wait_s)
            paid = self._paid.pop(key, None)
            group.owes_nothing = paid is not None and now - paid <= self._wait_s
            heapq.heappush(self._deadlines, (group.deadline, group.serial, group))
            self._cond.notify_all()  # the timer may have to wake earlier
        group.arrived += 1
        if group.arrived >= self._size:
            group.whole = True
            del self._open[key]
            self._remember_settled(group)
        return group

    def _remember_settled(self, group: _Group) -> None:
        """Under the lock: a settled group whose key names it alone turns later arrivals late."""
        if not _unique(group.key):
            return
        tag = GroupTag(id=group.serial, key=group.key, whole=False, arrived=group.arrived, late=True)
        self._settled.pop(group.key, None)
        # Never forgotten by time: the key cannot name another group, while a late response of
        # it, forgotten, would open a phantom group that waits wait_s for members that never come.
        self._settled[group.key] = tag

    def _forget(self, now: float) -> None:
        """Drop the owed keys past ``memory_s`` (in expiry order) and past ``max_owed``, the settled
        one-group keys past ``max_owed`` (oldest first), and the paid debts older than ``wait_s``."""
        while self._owed and (next(iter(self._owed.values())).expires <= now or len(self._owed) > self._max_owed):
            self._owed.popitem(last=False)
        while self._paid and (next(iter(self._paid.values())) < now - self._wait_s or len(self._paid) > self._max_owed):
            self._paid.popitem(last=False)
        while len(self._settled) > self._max_owed:
            self._settled.popitem(last=False)

    def _settle_due(self, now: float) -> list[_Held]:
        """Settle as short every open group past its deadline; the calls they hold."""
        calls: list[_Held] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            _, _, group = heapq.heappop(self._deadlines)
            if group.whole is not None:  # filled in time
                continue
            group.whole = False
            del self._open[group.key]
            if _unique(group.key):
                self._remember_settled(group)
            elif not group.owes_nothing:
                missing = self._size - group.arrived
                tag = GroupTag(id=group.serial, key=group.key, whole=False, arrived=group.arrived, late=True)
                self._owed.pop(group.key, None)
                self._owed[group.key] = _Owed(missing, now + self._memory_s, tag)
            calls += group.calls
            if now - self._warned_at >= _WARN_EVERY_S:
                self._warned_at = now
                _warn_short(group.arrived, self._size, self._wait_s, len(self._held))
        self._forget(now)
        return calls

    def _take(self, starts: list[_Held]) -> Bundle:
        """The calls of every settled component reached from ``starts``, marked released."""
        bundle: Bundle = []
        for start in starts:
            component = self._component(start)
            for call in component or ():
                call.released = True
                self._held.discard(call)
                bundle.append((call, tuple(_tag(slot) for slot in call.slots)))
        return bundle

    def _component(self, start: _Held) -> list[_Held] | None:
        """``start`` and the calls linked to it through shared groups; ``None`` while one of those
        groups is open (or when already released)."""
        if start.released:
            return None
        calls, seen, stack = [start], {id(start)}, [start]
        while stack:
            for slot in stack.pop().slots:
                if not isinstance(slot, _Group):
                    continue
                if slot.whole is None:
                    return None
                for other in slot.calls:
                    if id(other) not in seen:
                        seen.add(id(other))
                        calls.append(other)
                        stack.append(other)
        return calls

    def _send(self, bundle: Bundle) -> None:
        """Hand a released bundle on (outside the lock) and route each result to its caller."""
        if not bundle:
            return
        calls = [call for call, _ in bundle]
        try:
            done = self._release([(call.item, tags) for call, tags in bundle])
        except BaseException as exc:  # noqa: BLE001 - each caller gets it
            for call in calls:
                call.future.set_exception(exc)
            return

        def route(future: concurrent.futures.Future) -> None:
            # Runs as a future's callback, where an exception would be logged and lost, leaving
            # callers waiting forever: every caller gets a result or an error.
            try:
                error = future.exception()
                results = [error] * len(calls) if error is not None else list(future.result())
                if len(results) != len(calls):
                    raise RuntimeError(f"{len(results)} results for {len(calls)} released calls")
            except BaseException as exc:  # noqa: BLE001
                results = [exc] * len(calls)
            for call, result in zip(calls, results, strict=True):
                if isinstance(result, BaseException):
                    call.future.set_exception(result)
                else:
                    call.future.set_result(result)

        done.add_done_callback(route)

    def _start_timer(self) -> None:
        """Under the lock: make sure a timer thread watches the deadlines."""
        if self._timer is None and self._deadlines:
            self._timer = threading.Thread(target=self._run_timer, name="genrm-group-gate", daemon=True)
            self._timer.start()

    def _run_timer(self) -> None:
        """Settle groups at their deadlines and release what that frees; the thread ends when
        no deadline is left (the next group starts another), or when the gate is closed."""
        while True:
            with self._cond:
                if self._error is not None or not self._deadlines:
                    self._timer = None
                    return
                wait = self._deadlines[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                bundle = self._take(self._settle_due(time.monotonic()))
            self._send(bundle)


_WARN_EVERY_S = 60.0


def _warn_short(arrived: int, size: int, wait_s: float, held: int) -> None:
    """Say that a group was masked short and what usually causes it (the gate says it at most
    once every ``_WARN_EVERY_S``)."""
    logger.warning(
        "pairwise_group: a group was masked short (%d of %d responses within group_wait_ms = %.0f ms; "
        "%d step calls held for their groups). If one group's responses finish further apart, raise "
        "reward.pairwise_group.group_wait_ms; check that group_size is the number of responses per "
        "prompt; a caller that waits for each reward from a bounded thread pool (NeMo-RL's asynchronous "
        "rollouts) cannot fill groups: send whole groups per step call instead (genrm/pairwise/"
        "incomplete_groups counts them; this warning repeats at most once a minute)",
        arrived,
        size,
        wait_s * 1000.0,
        held,
    )


def _unique(key: Hashable) -> bool:
    """Whether ``key`` names one group only (a :class:`~nemo_genrm.samples.groups.GroupKey` saying so)."""
    return bool(getattr(key, "unique", False))


def _tag(slot: _Group | GroupTag | None) -> GroupTag | None:
    """A settled slot as the tag the mode reads."""
    if not isinstance(slot, _Group):
        return slot
    return GroupTag(id=slot.serial, key=slot.key, whole=bool(slot.whole), arrived=slot.arrived)
