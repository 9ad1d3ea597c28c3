"""Coalescing of concurrent calls into batches: many callers, one batched run for all of them.

NeMo-RL's asynchronous rollout calls the environment once per sample, from many threads at
once. :class:`Coalescer` gathers the calls that arrive within a short window into one batch and
runs them together, one batch at a time:

- the first call of a batch is its *leader*: it waits until ``max_wait_s`` has passed since it
  arrived (or the batch holds ``max_items``), then until the previous batch has finished, and
  only then closes the batch, so calls keep joining while the previous batch runs;
- ``run_batch`` gets every call's item in arrival order and returns one result per item: a
  value, or an exception that only that item's caller sees;
- an exception raised by ``run_batch`` itself reaches every caller of the batch;
- a call bigger than ``max_items`` is never split: it runs in a batch of its own (an item may
  hold several step calls, e.g. every call of a GRPO group: they stay together);
- a full batch takes no further calls.

Callers on an event loop use :meth:`Coalescer.asubmit`: the call joins the open batch at once
and awaits its result without holding a thread; a batch opened by such a call is led by a
thread of its own (one per batch, not per caller). :meth:`Coalescer.enqueue` does the same for
any caller and returns a future. So a drop-in awaited by its framework for
every sample at once (verl's reward loop, NeMo Gym's concurrent ``/verify`` posts) gathers every
call into one judge call, whatever the size of the loop's thread pool.

The class knows nothing of judges; :class:`nemo_genrm.env.environment.GenRMEnvironmentImpl` uses it
with one call's prepared samples as the item. Because batches run one at a time, a call that
arrives while a batch runs waits for the next one even when its work is already under way there:
:class:`CarriedResults` hands a batch's results to the next, so identical work that arrived in
that window is shared instead of done twice (the environment shares judge verdicts this way).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from nemo_genrm.prompts.request import JudgeRequest

T = TypeVar("T")
R = TypeVar("R")


async def awaited(future: concurrent.futures.Future, then: Callable[[Any], Any] | None = None) -> Any:
    """Await a thread-side future from an event loop; ``then`` maps its result."""
    result = await asyncio.wrap_future(future)
    return result if then is None else then(result)


def running_future() -> concurrent.futures.Future:
    """A future already marked running: a waiter that gives up cannot cancel it for the others."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_running_or_notify_cancel()
    return future


@dataclass
class _Batch(Generic[T]):
    opened: float
    items: list[T] = field(default_factory=list)
    size: int = 0
    full: bool = False
    results: Sequence[object] = ()
    error: BaseException | None = None
    # Completed when the batch has run (running at once: see running_future).
    done: concurrent.futures.Future = field(default_factory=running_future)


class Coalescer(Generic[T, R]):
    """Runs concurrent calls in shared batches (see the module docstring).

    Args:
        run_batch: ``items -> one result (or exception) per item``, same order.
        max_wait_s: How long a batch's first call waits for others to join.
        max_items: Size at which a batch stops taking calls (sizes as given to :meth:`submit`).
    """

    def __init__(
        self,
        run_batch: Callable[[list[T]], Sequence[R | BaseException]],
        *,
        max_wait_s: float,
        max_items: int,
    ) -> None:
        self._run_batch = run_batch
        self._max_wait_s = max_wait_s
        self._max_items = max_items
        self._cond = threading.Condition()
        self._open: _Batch[T] | None = None
        self._running = threading.Lock()  # one batch runs at a time
        self.batches_run = 0

    def submit(self, item: T, size: int = 1) -> R:
        """Add ``item`` to the open batch (or open one) and block until its result is ready.

        Args:
            item: What ``run_batch`` gets for this call.
            size: Its weight against ``max_items`` (e.g. its number of samples).

        Returns:
            This item's result.

        Raises:
            BaseException: The item's own exception, or the batch's.
        """
        batch, index, leader = self._join(item, size)
        if leader:
            self._lead(batch)
        else:
            batch.done.result()
        return self._result(batch, index)

    async def asubmit(self, item: T, size: int = 1) -> R:
        """:meth:`submit` for a caller on an event loop: joins the open batch and awaits its
        result without holding a thread (a batch this call opens is led by a new thread).

        Args:
            item: What ``run_batch`` gets for this call.
            size: Its weight against ``max_items``.

        Returns:
            This item's result.

        Raises:
            BaseException: The item's own exception, or the batch's.
        """
        return await awaited(self.enqueue(item, size))

    def enqueue(self, item: T, size: int = 1) -> concurrent.futures.Future:
        """Add ``item`` to the open batch (or open one, led by a new thread) without waiting.

        Args:
            item: What ``run_batch`` gets for this call.
            size: Its weight against ``max_items``.

        Returns:
            A future of this item's result (or its exception, or the batch's); already running,
            so a waiter that gives up cannot cancel it.
        """
        batch, index, leader = self._join(item, size)
        future = running_future()

        def settle(_: object) -> None:
            try:
                future.set_result(self._result(batch, index))
            except BaseException as exc:  # noqa: BLE001 - this item's caller gets it
                future.set_exception(exc)

        batch.done.add_done_callback(settle)
        if leader:
            threading.Thread(target=self._lead, args=(batch,), name="genrm-coalesce", daemon=True).start()
        return future

    def _join(self, item: T, size: int) -> tuple[_Batch[T], int, bool]:
        """Add ``item`` to the open batch, or open one: (batch, index in it, leads it)."""
        with self._cond:
            batch = self._open
            if batch is not None and batch.items and (batch.full or batch.size + size > self._max_items):
                # Its leader stops waiting; this call opens the next batch.
                batch.full = True
                self._cond.notify_all()
                batch = None
            leader = batch is None
            if batch is None:
                batch = self._open = _Batch(opened=time.monotonic())
            index = len(batch.items)
            batch.items.append(item)
            batch.size += size
            if batch.size >= self._max_items:
                batch.full = True
                self._cond.notify_all()
        return batch, index, leader

    @staticmethod
    def _result(batch: _Batch[T], index: int) -> R:
        if batch.error is not None:
            raise batch.error
        result = batch.results[index]
        if isinstance(result, BaseException):
            raise result
        return result  # type: ignore[return-value]

    def _lead(self, batch: _Batch[T]) -> None:
        """Wait out the window and the running batch, then run this batch for every caller."""
        with self._cond:
            self._cond.wait_for(
                lambda: batch.full, timeout=max(0.0, batch.opened + self._max_wait_s - time.monotonic())
            )
        with self._running:
            with self._cond:
                if self._open is batch:
                    self._open = None
                items = list(batch.items)
            try:
                results = self._run_batch(items)
                if len(results) != len(items):
                    raise RuntimeError(f"run_batch returned {len(results)} results for {len(items)} calls")
                batch.results = results
            except BaseException as exc:  # every caller of the batch gets it
                batch.error = exc
            finally:
                self.batches_run += 1
                batch.done.set_result(None)


class CarriedResults(Generic[T, R]):
    """Results of one batch offered to the next: identical work that arrived while it ran is shared.

    Batches run one at a time, and the calls that arrive while one runs wait in the next. Work
    identical to a piece of the running batch (the same judge prompt, say) that arrived in that
    window would otherwise be done again, a moment later: the next batch takes what the previous
    one finished (:meth:`take`) for the work that arrived before it finished, and hands its own
    results on (:meth:`keep`). Results pass on one batch only, and never to work that arrived
    after they were known (a later step asking the same again is asked again).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._previous: dict[T, R] = {}
        self._finished = float("-inf")  # time.perf_counter() when the previous batch's results were kept

    def take(self, keys: Sequence[T], arrived: Sequence[float]) -> dict[int, R]:
        """Per index of ``keys``, the previous batch's result for it, where it has one and the work
        arrived (``time.perf_counter()``) before that batch finished."""
        with self._lock:
            previous, finished = self._previous, self._finished
        return {
            i: previous[key]
            for i, (key, when) in enumerate(zip(keys, arrived, strict=True))
            if key in previous and when < finished
        }

    def keep(self, results: dict[T, R]) -> None:
        """This batch's own results, for the next batch (they replace the previous batch's)."""
        with self._lock:
            self._previous, self._finished = dict(results), time.perf_counter()


def carry_key(member: int, request: JudgeRequest) -> Hashable:
    """What makes two judge requests the same work for :class:`CarriedResults`: the voting judge
    asked, the conversation, and which vote of it the request is (its sampling seed)."""
    messages = tuple(tuple(sorted(message.items())) for message in request.messages)
    return (member, messages, request.shrinkable, request.span, request.vote)
