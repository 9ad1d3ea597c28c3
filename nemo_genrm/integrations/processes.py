"""The training job's processes, for a drop-in that must see the whole batch (TRL under accelerate).

With more than one process, TRL (1.16) calls each process's reward function at the same step
with that process's slice of the global batch, and a prompt's completions may be split between
processes; the global batch is the slices in process order. A pairwise group must be ranked
whole, so the pairwise reward exchanges its inputs with :meth:`Processes.all_gather`, judges
the whole batch on the first process and hands every process the results with
:meth:`Processes.broadcast`.

The exchange uses a gloo process group (the default one when it is gloo already): Python objects
sent over NCCL travel as CUDA tensors on the calling thread's current device, and TRL calls
reward functions from its event-loop thread, where that device is ``cuda:0`` on every rank.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

__all__ = ["Processes", "current_processes"]

_GLOO_GROUPS: dict[int, Any] = {}  # by id of the default group: a gloo group for object exchange


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

    def all_gather(self, value: Any) -> list[Any]:
        """Every process's ``value``, in process order (a collective: every process calls it)."""
        import torch.distributed as dist

        out: list[Any] = [None] * self.size
        dist.all_gather_object(out, value, group=self.group)
        return out

    def broadcast(self, value: Any) -> Any:
        """Process 0's ``value`` on every process (a collective: every process calls it).

        An exception that cannot be pickled is sent as a :class:`RuntimeError` naming it, so
        that the other processes raise too instead of waiting for ever.
        """
        import torch.distributed as dist

        if isinstance(value, BaseException):
            try:
                pickle.dumps(value)
            except Exception:  # noqa: BLE001 - anything unpicklable is replaced, never lost
                value = RuntimeError(f"{type(value).__name__}: {value}")
        box = [value]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]


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
