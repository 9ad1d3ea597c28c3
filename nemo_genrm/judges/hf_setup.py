"""Setting up one rank of a transformers judge: its device, its process group, its weights.

Kept apart from :mod:`nemo_genrm.judges.transformers` (the worker and the judges built on it)
so each module stays small.
"""

from __future__ import annotations

import datetime
import logging
import os
from typing import Any

import torch

logger = logging.getLogger(__name__)


def pick_device(local_rank: int = 0) -> torch.device:
    """``cuda:<local_rank>`` (modulo the visible GPUs) when CUDA is available, else CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def init_process_group(
    rank: int, world_size: int, local_rank: int, master_addr: str, master_port: int, device: torch.device
) -> None:
    """Join the tensor-parallel process group of one judge replica (gloo on CPU, nccl on GPU).

    Args:
        rank: This process's rank in the replica.
        world_size: Ranks in the replica (its tensor parallel size).
        local_rank: Index of this process's GPU among the visible ones.
        master_addr: Address of rank 0.
        master_port: A free port on rank 0's node.
        device: The device this rank computes on.
    """
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(local_rank),
        MASTER_ADDR=str(master_addr),
        MASTER_PORT=str(master_port),
    )
    if torch.distributed.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.distributed.init_process_group(
        backend, rank=rank, world_size=world_size, timeout=datetime.timedelta(minutes=30)
    )
    logger.info("Rank %d/%d joined the %s process group at %s:%s", rank, world_size, backend, master_addr, master_port)


def tensor_parallel_kwargs(world_size: int, device: torch.device) -> dict[str, Any]:
    """``from_pretrained`` arguments that shard the model with its own tensor-parallel plan."""
    try:
        from transformers.distributed import DistributedConfig
    except ImportError:  # transformers < 5: the standalone tp_plan argument and a 1-D mesh
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device.type, (world_size,), mesh_dim_names=("tp",))
        return {"tp_plan": "auto", "device_mesh": mesh}
    return {"distributed_config": DistributedConfig(tp_size=world_size)}


@torch.no_grad()
def own_weights(model: torch.nn.Module) -> None:
    """Copy CPU weights out of the memory-mapped checkpoint into ordinary allocations.

    Kernels may round differently on the checkpoint's unaligned mmap views than on fresh
    (aligned) memory, so without this a sleep/wake cycle, which restores into fresh memory,
    could change the last bits of the outputs.
    """
    seen: set[int] = set()
    for tensor in [*model.parameters(), *model.buffers()]:
        local = getattr(tensor, "_local_tensor", tensor)
        if id(local) not in seen:
            seen.add(id(local))
            local.data = local.data.clone()
