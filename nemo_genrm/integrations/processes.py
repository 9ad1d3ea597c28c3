"""The training job's processes, for a drop-in that must see the whole batch (TRL under accelerate).

With more than one process, TRL (1.16) calls each process's reward function at the same step
with that process's slice of the global batch, and a prompt's completions may be split between
processes; the global batch is the slices in process order. A pairwise group must be ranked
whole, so the pairwise reward sends its inputs to the first process, which judges the whole
batch and hands every process its results (:meth:`Processes.judge_on_first`).

Every process makes the same collectives at every call, whatever fails: a process whose inputs
cannot be prepared or sent sends a failure marker in their place, so each failure before or
during the exchange is raised on every process (where it happened as itself, elsewhere as a
:class:`ProcessFailedError` naming it). A process that raised before its collective would leave
the others waiting, or worse, meet their next call's collective with this one's and judge
slices of different steps together.

The exchange uses a gloo process group (the default one when it is gloo already): Python objects
sent over NCCL travel as CUDA tensors on the calling thread's current device, and TRL calls
reward functions from its event-loop thread, where that device is ``cuda:0`` on every rank.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ProcessFailedError", "Processes", "current_processes", "launched_rank"]

_GLOO_GROUPS: dict[int, Any] = {}  # by id of the default group: a gloo group for object exchange


class ProcessFailedError(RuntimeError):
    """Another process of the job failed to prepare or send its part of the exchange."""


@dataclass(frozen=True)
class _Failed:
    """What a process sends in place of its part when preparing, sending or judging it failed."""

    rank: int
    what: str  # the error's type and message


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class Processes:
    """This process's place among the job's processes.

    Attributes:
        rank: This process's index (0 judges).
        size: The number of processes.
        group: The gloo process group the objects travel on (``None``: the default group).
    """

    rank: int
    size: int
    group: Any

    def judge_on_first(self, prepare: Callable[[], Any], judge: Callable[[list[Any]], Sequence[Any]]) -> Any:
        """Every process's ``prepare()`` to process 0, ``judge`` there on them all, each process its share.

        A collective: every process calls it at the same step, and each makes exactly two
        collectives (a gather, then a broadcast) whatever fails, so the processes stay in step.

        Args:
            prepare: This process's part (run here; its value must pickle).
            judge: On process 0: the parts in process order -> one result per process.

        Returns:
            This process's entry of ``judge``'s result.

        Raises:
            Exception: What ``prepare`` raised here, or what ``judge`` raised on process 0 (on
                every process; one that cannot be pickled as a :class:`RuntimeError` naming it).
            ProcessFailedError: ``prepare`` failed, or its value could not be pickled, on
                another process.
        """
        mine: BaseException | None = None
        try:
            # Pickled here, so what cannot be sent fails on this process, before the collective.
            part: bytes | _Failed = pickle.dumps(prepare())
        except Exception as exc:  # noqa: BLE001 - sent to every process, raised here below
            mine, part = exc, _Failed(self.rank, _describe(exc))
        parts = self._gather(part)
        outcome: tuple[str, Any] = ("", None)
        if self.rank == 0:
            outcome = self._judged(parts, judge)
        kind, value = self.broadcast(outcome)
        if kind == "failed":
            if mine is not None:
                raise mine
            failures = "; ".join(f"process {f.rank}: {f.what}" for f in value)
            raise ProcessFailedError(f"another process of the {self.size} failed before the judge call ({failures})")
        if kind == "error":
            raise value
        return value[self.rank]

    def _judged(self, parts: list[Any], judge: Callable[[list[Any]], Sequence[Any]]) -> tuple[str, Any]:
        """Process 0's outcome for everyone: ``("ok", one result per process)``, ``("failed",
        the failures of processes)`` or ``("error", judge's exception)``."""
        failed = [p for p in parts if isinstance(p, _Failed)]
        if failed:
            return "failed", failed
        try:
            results = list(judge([pickle.loads(p) for p in parts]))
        except Exception as exc:  # noqa: BLE001 - every process raises it, not only this one
            return "error", self._sendable(exc)
        if len(results) != self.size:
            return "error", RuntimeError(f"the judge gave {len(results)} results for {self.size} processes")
        return "ok", results

    def _gather(self, value: Any) -> list[Any] | None:
        """Every process's ``value`` on process 0, in process order (``None`` elsewhere)."""
        import torch.distributed as dist

        out: list[Any] | None = [None] * self.size if self.rank == 0 else None
        dist.gather_object(value, out, dst=0, group=self.group)
        return out

    @staticmethod
    def _sendable(exc: BaseException) -> BaseException:
        """``exc``, or a :class:`RuntimeError` naming it when it cannot be pickled, so that the
        other processes raise too instead of failing to receive it."""
        try:
            pickle.dumps(exc)
        except Exception:  # noqa: BLE001 - anything unpicklable is replaced, never lost
            return RuntimeError(_describe(exc))
        return exc

    def broadcast(self, value: Any) -> Any:
        """Process 0's ``value`` on every process (a collective: every process calls it)."""
        import torch.distributed as dist

        box = [value]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]


def launched_rank() -> int | None:
    """This process's rank when the job has several processes, ``None`` when it has one.

    Known before ``torch.distributed`` starts (a reward function is built before TRL's trainer
    starts it) from the launcher's ``RANK`` and ``WORLD_SIZE`` (torchrun, ``accelerate launch``,
    DeepSpeed set them); from ``torch.distributed`` once it is initialised.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() if dist.get_world_size() > 1 else None
    try:
        rank, size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return None
    return rank if size > 1 else None


def current_processes() -> Processes | None:
    """The job's processes when there are several (``torch.distributed`` initialised), else ``None``.

    The first call with a non-gloo default group creates the gloo group: like every collective,
    it must be made by every process at the same point (TRL calls reward functions in step).
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() <= 1:
        return None
    group = None
    if dist.get_backend() != "gloo":
        default = id(dist.group.WORLD)
        if default not in _GLOO_GROUPS:
            _GLOO_GROUPS[default] = dist.new_group(backend="gloo")
        group = _GLOO_GROUPS[default]
    return Processes(dist.get_rank(), dist.get_world_size(), group)
