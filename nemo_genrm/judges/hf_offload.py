"""Sleep and wake of a transformers judge's weights through host buffers allocated once.

Allocating pinned host memory is slow (it is page-locked by the driver: seconds for a few GB)
while copying into memory already pinned runs at the link's bandwidth. :class:`HostOffload`
therefore allocates one host buffer per weight at the first sleep (or up front with
:meth:`HostOffload.allocate`) and reuses the same buffers at every later sleep and wake, so
every cycle after that is only the copies.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)


@dataclass
class OffloadStats:
    """What the offload did so far.

    Attributes:
        host_bytes: Bytes of host buffers held (allocated once).
        allocations: Times the host buffers were allocated (1 after the first sleep).
        cycles: Completed sleeps.
        device_bytes_after_sleep: Device memory still allocated by torch right after the last
            sleep (``torch.cuda.memory_allocated``; 0 on CPU), or ``None`` before any sleep.
    """

    host_bytes: int = 0
    allocations: int = 0
    cycles: int = 0
    device_bytes_after_sleep: int | None = None


def _local_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """Each parameter's and buffer's own storage once (a DTensor's local shard, not a view)."""
    seen: set[int] = set()
    out = []
    for tensor in [*model.parameters(), *model.buffers()]:
        local = getattr(tensor, "_local_tensor", tensor)
        if id(local) not in seen:
            seen.add(id(local))
            out.append(local)
    return out


class HostOffload:
    """Moves a model's weights to reusable host buffers and back, keeping the module objects.

    Each parameter and buffer has its data swapped for an empty tensor on sleep (freeing its
    device memory without touching the module tree) and restored bit for bit on wake into a
    fresh device allocation.

    Args:
        model: The model whose weights move.
    """

    def __init__(self, model: torch.nn.Module):
        self._tensors = [t for t in _local_tensors(model) if t.numel() > 0]
        self._hosts: list[torch.Tensor] = []
        self.active = False
        self.stats = OffloadStats()

    @property
    def host_buffers(self) -> list[torch.Tensor]:
        """The host buffers (empty before the first allocation)."""
        return list(self._hosts)

    def allocate(self) -> None:
        """Allocate the host buffers now (pinned when the weights are on a GPU); once only."""
        if self._hosts:
            return
        for local in self._tensors:
            pin = local.device.type == "cuda"
            self._hosts.append(torch.empty(local.shape, dtype=local.dtype, device="cpu", pin_memory=pin))
        self.stats.host_bytes = sum(h.numel() * h.element_size() for h in self._hosts)
        self.stats.allocations += 1

    @torch.no_grad()
    def offload(self) -> int:
        """Copy every weight into its host buffer and free the device copy; returns bytes moved."""
        self.allocate()
        on_gpu = any(t.device.type == "cuda" for t in self._tensors)
        for local, host in zip(self._tensors, self._hosts, strict=True):
            host.copy_(local, non_blocking=on_gpu)
        if on_gpu:
            torch.cuda.synchronize()
        for local in self._tensors:
            local.data = torch.empty(0, dtype=local.dtype, device=local.device)
        self.active = True
        self.stats.cycles += 1
        if on_gpu:
            torch.cuda.empty_cache()
            device = next(t.device for t in self._tensors if t.device.type == "cuda")
            self.stats.device_bytes_after_sleep = torch.cuda.memory_allocated(device)
        else:
            self.stats.device_bytes_after_sleep = 0
        return self.stats.host_bytes

    @torch.no_grad()
    def restore(self) -> None:
        """Copy every weight back from its host buffer into a fresh device allocation."""
        on_gpu = False
        for local, host in zip(self._tensors, self._hosts, strict=True):
            fresh = torch.empty(host.shape, dtype=host.dtype, device=local.device)
            fresh.copy_(host, non_blocking=local.device.type == "cuda")
            on_gpu |= local.device.type == "cuda"
            local.data = fresh
        if on_gpu:
            torch.cuda.synchronize()
        self.active = False
