"""Run a function on several processes joined by gloo on 127.0.0.1 (forked, so no child imports anything
again), one thread each, and collect what each rank returns."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import featgraph.nn  # noqa: F401 - imported once before the forks, not by every rank (seconds each: torch_geometric)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(rank: int, fn: Callable, world_size: int, port: int, out: Path, args: tuple) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, timeout=timedelta(seconds=60)
    )
    try:
        torch.save(fn(rank, world_size, *args), out / f"rank-{rank}.pt")
    finally:
        dist.destroy_process_group()


def run_ranks(fn: Callable, world_size: int, tmp_path: Path, *args) -> list:
    """``fn(rank, world_size, *args)`` on ``world_size`` processes of one gloo group; their results by rank."""
    mp.start_processes(_child, (fn, world_size, free_port(), tmp_path, args), nprocs=world_size, start_method="fork")
    return [torch.load(tmp_path / f"rank-{rank}.pt", weights_only=False) for rank in range(world_size)]
