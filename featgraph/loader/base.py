"""What the mini-batch loaders share: an epoch's inputs (seed vertices, or seed edges for the link loader) cut
into batches (shuffled by a torch ``Generator``), each batch sampled with its own seed, batches made ahead in a
background thread (``EpochLoader``); on one vertex set, the full graph and its ``NeighborSampler``, built once
(``SeedLoader``, whose subclasses say what one batch looks like)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

import numpy as np
import torch
import torch.distributed as dist

from ..backends.cpu import buffers
from ..graph import Graph
from ..native import toolchain
from ..sampling import MiniBatch, NeighborSampler
from ..sampling.disjoint import DisjointSampler
from ..sampling.negative import first_occurrences
from ..sampling.neighbor import SEED_LIMIT, checked_fanouts
from .prefetch import prefetched
from .source import (
    LoaderSource,
    StoreColumn,
    checked_count,
    checked_flag,
    checked_seed,
    checked_temporal_options,
)
from .workers import WorkerPool

BatchType = TypeVar("BatchType")
# whether the batch being made goes to page-locked memory: its gathers then write there directly, and pinning
# the batch copies only what was not gathered (a batch's features are most of its bytes, 58 MB for GraphSAGE's
# 3-hop batches of 1024 on products-like-0.25, and ``pin_memory`` copies on one thread)
_PINNED_GATHERS: ContextVar[bool] = ContextVar("featgraph_pinned_gathers", default=False)


class EpochLoader(Generic[BatchType]):
    """Iterates mini-batches of ``inputs`` (one example per row: seed vertices, or seed edges for the link
    loader), each once per epoch; subclasses sample one batch (``_batch``).

    ``seed`` makes the sequence of batches reproducible: two loaders with the same seed (and arguments) give
    the same batches, epoch after epoch, whatever ``prefetch`` and ``num_workers`` are; with ``seed=None``
    each epoch draws its seed from torch's generator, so ``torch.manual_seed`` reproduces a run.
    ``prefetch``: batches a background thread prepares ahead of the one in use (0: each is made when asked
    for). ``pin_memory``: the background thread puts each batch in page-locked memory (its features and other
    gathered rows written there directly), so the training loop's ``batch.to("cuda", non_blocking=True)``
    overlaps its copies (as torch's ``DataLoader`` option; without a
    CUDA GPU it warns and leaves batches as they are, as torch's does). ``worker_processes``: that many
    spawned processes make the batches instead of the background thread (``workers.WorkerPool``; at least one
    batch per process in flight, ``prefetch`` if more), each sampling on ``num_workers`` threads where that is
    given, else on an equal share of this machine's cores; the loader's callables (a ``transform``) must then
    pickle, as with torch's workers. ``use_ddp``: this process takes its rank's share of ``inputs`` under
    ``torch.distributed`` (``ddp_share``), as DGL's ``DataLoader(use_ddp=True)``.
    """

    def __init__(
        self, inputs: torch.Tensor, batch_size: int, shuffle: bool, seed: int | None, prefetch: int, drop_last: bool,
        pin_memory: bool, worker_processes: int = 0, use_ddp: bool = False,
    ) -> None:  # fmt: skip
        self.worker_processes = checked_count(worker_processes, "worker_processes", 0)
        self._workers: WorkerPool | None = None
        self.pin_memory = checked_flag(pin_memory, "pin_memory")
        if self.pin_memory and not torch.cuda.is_available():
            warnings.warn(
                "pin_memory=True: no CUDA GPU is visible, so batches stay in pageable memory", UserWarning, stacklevel=4
            )
            self.pin_memory = False
        self.batch_size = checked_count(batch_size, "batch_size", 1)
        self.shuffle = checked_flag(shuffle, "shuffle")
        self.drop_last = checked_flag(drop_last, "drop_last")
        self.prefetch = checked_count(prefetch, "prefetch", 0)
        self.use_ddp = checked_flag(use_ddp, "use_ddp")
        self.inputs = ddp_share(inputs, self.drop_last) if self.use_ddp else inputs
        # a share padded with its own first inputs may repeat one within a batch: a batch takes each once
        self._repeats = self.inputs.shape[0] != inputs.shape[0] and not self.drop_last
        self.seed = checked_seed(seed)
        self._generator = None if self.seed is None else torch.Generator().manual_seed(self.seed)

    def __len__(self) -> int:
        """Batches per epoch."""
        full, rest = divmod(self.inputs.shape[0], self.batch_size)
        return full + int(rest > 0 and not self.drop_last)

    def __iter__(self) -> Iterator[BatchType]:
        # every random draw of the epoch happens here, in order, so the batches do not depend on the
        # background thread's timing
        generator = self._generator
        if generator is None:
            generator = torch.Generator().manual_seed(int(torch.randint(0, SEED_LIMIT - 1, (1,))))
        count = self.inputs.shape[0]
        order = torch.randperm(count, generator=generator) if self.shuffle else torch.arange(count)
        positions = list(order.split(self.batch_size))[: len(self)]
        seeds = torch.randint(0, SEED_LIMIT - 1, (len(positions),), generator=generator).tolist()
        jobs = zip(positions, seeds, strict=True)
        if self.worker_processes:
            return map(self._pinned, self._pool().map(jobs, self.prefetch))
        return prefetched(jobs, self._sampled, self.prefetch)

    def _pool(self) -> WorkerPool:
        """The worker processes, started on first use and kept while the loader lives (started afresh after one
        of them died)."""
        if self._workers is None or self._workers.broken:
            threads = self.sampler.num_threads or max(1, (os.cpu_count() or 1) // self.worker_processes)
            self._workers = WorkerPool(self, self.worker_processes, threads)
        return self._workers

    def __getstate__(self) -> dict:
        """The loader without its worker pool or its epochs' generator (what a worker process gets: it makes the
        batches of the positions and seeds it is sent)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_workers", "_generator")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._workers = None
        self._generator = None if self.seed is None else torch.Generator().manual_seed(self.seed)

    def __call__(self, index: Any) -> BatchType:
        """The batch of the inputs at positions ``index`` (PyG's loaders take the same call), sampled with a
        seed from torch's generator."""
        positions = torch.as_tensor(index)
        if positions.numel() == 0:
            raise ValueError("index is empty: a batch needs at least one input")
        if positions.dim() != 1 or positions.dtype == torch.bool or positions.is_floating_point():
            raise ValueError(f"index must be a 1-D list of input positions, got {index!r}")
        positions = positions.to(device="cpu", dtype=torch.int64)
        count = self.inputs.shape[0]
        if int(positions.min()) < 0 or int(positions.max()) >= count:
            raise ValueError(f"index holds a position out of range for {count} inputs")
        return self._sampled((positions, int(torch.randint(0, SEED_LIMIT - 1, (1,)))))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def _sampled(self, job: tuple[torch.Tensor, int]) -> BatchType:
        if not self.pin_memory:
            return self._made(job)
        token = _PINNED_GATHERS.set(True)
        try:
            batch = self._made(job)
        finally:
            _PINNED_GATHERS.reset(token)
        return self._pinned(batch)

    def _made(self, job: tuple[torch.Tensor, int]) -> BatchType:
        positions, seed = job
        if self._repeats:
            positions = positions[first_occurrences(self.inputs[positions])]
        return self._batch(positions, seed)

    def _pinned(self, batch: BatchType) -> BatchType:
        return batch.pin_memory() if self.pin_memory else batch

    def _batch(self, positions: torch.Tensor, seed: int) -> BatchType:
        """The batch of ``inputs[positions]``, drawn with ``seed``."""
        raise NotImplementedError


class SeedLoader(EpochLoader[BatchType]):
    """An ``EpochLoader`` on one vertex set: the full graph and its ``NeighborSampler``, built here.
    ``num_workers``: threads the sampler's compiled code uses (0: the CPU kernels' count). ``self_loops``:
    each block also brings its graph with self loops (``NeighborSampler``'s option). The node loaders sample
    the seed vertices of ``inputs[positions]`` and say what one batch looks like (``_make``); the link loader
    overrides ``_batch``, since a batch's seeds are more than its inputs.
    """

    def __init__(
        self,
        source: LoaderSource,
        fanouts: Any,
        fanouts_name: str,
        batch_size: int,
        shuffle: bool,
        inputs: torch.Tensor,
        replace: bool,
        seed: int | None,
        num_workers: int,
        prefetch: int,
        drop_last: bool,
        weight_attr: str | None,
        self_loops: bool = False,
        pin_memory: bool = False,
        time_attr: str | None = None,
        temporal_strategy: str = "uniform",
        disjoint: bool = False,
        worker_processes: int = 0,
        use_ddp: bool = False,
    ) -> None:
        self.source = source
        super().__init__(inputs, batch_size, shuffle, seed, prefetch, drop_last, pin_memory, worker_processes, use_ddp)
        checked_temporal_options(time_attr, temporal_strategy, replace, weight_attr)
        weight = None
        if weight_attr is not None:
            if weight_attr not in source.edge_attrs:
                raise ValueError(
                    f"weight_attr {weight_attr!r} names no per-edge tensor of the data "
                    f"(per-edge tensors: {sorted(source.edge_attrs)})"
                )
            weight = source.edge_attrs[weight_attr]
        fanouts = checked_fanouts(fanouts, fanouts_name)
        replace = checked_flag(replace, "replace")
        self.sampler = NeighborSampler(
            source.graph,
            fanouts,
            replace=replace,
            weight=weight,
            num_threads=checked_workers(num_workers),
            self_loops=checked_flag(self_loops, "self_loops"),
        )
        self.time_attr = time_attr
        self.disjoint_sampler = None  # PyG's disjoint batches, temporal ones always
        if checked_flag(disjoint, "disjoint") or time_attr is not None:
            times = {} if time_attr is None else source_times(source, time_attr)
            self.disjoint_sampler = DisjointSampler(
                source.graph, fanouts, strategy=temporal_strategy, weight=weight, replace=replace, **times
            )

    @property
    def graph(self) -> Graph:
        """The full graph the batches are sampled from."""
        return self.source.graph

    def _batch(self, positions: torch.Tensor, seed: int) -> BatchType:
        return self._make(positions, self.sampler.sample(self.inputs[positions], seed))

    def _make(self, positions: torch.Tensor, batch: MiniBatch) -> BatchType:
        """One batch from the sampled ``batch`` of seeds ``inputs[positions]``."""
        raise NotImplementedError


def ddp_share(inputs: torch.Tensor, drop_last: bool) -> torch.Tensor:
    """This rank's share of ``inputs`` under ``torch.distributed``, split as DGL's ``DataLoader(use_ddp=True)``
    splits them: ``n`` = ``len(inputs) / world_size`` rounded down with ``drop_last`` (the rest left out), else
    up; rank ``r`` takes ``inputs[r * n : (r + 1) * n]``, a share short of ``n`` (the last ranks') padded with
    its own first inputs, cycled. Shares are not shuffled across ranks: each rank shuffles its own."""
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError(
            "use_ddp=True needs torch.distributed's process group: call torch.distributed.init_process_group"
        )
    rank, world = dist.get_rank(), dist.get_world_size()
    count = inputs.shape[0]
    size = count // world if drop_last else -(-count // world)
    share = inputs[rank * size : (rank + 1) * size]
    if size and not share.numel():
        raise ValueError(f"use_ddp: {count} inputs leave rank {rank} of {world} none of its own to pad its share with")
    if share.shape[0] < size:
        share = torch.cat([share, share[torch.arange(size - share.shape[0]) % share.shape[0]]])
    return share


def source_times(source: LoaderSource, time_attr: Any) -> dict[str, torch.Tensor]:
    """``{"node_time": ...}`` or ``{"edge_time": ...}``: ``source``'s per-vertex or per-edge tensor named
    ``time_attr``, as ``DisjointSampler`` takes it."""
    if not isinstance(time_attr, str):
        raise TypeError(f"time_attr must name a per-vertex or per-edge tensor, got {time_attr!r}")
    node_level, edge_level = time_attr in source.node_attrs, time_attr in source.edge_attrs
    if node_level == edge_level:
        held = "both a per-vertex and a per-edge tensor" if node_level else "no per-vertex or per-edge tensor"
        raise ValueError(f"time_attr {time_attr!r} names {held} of the data")
    times = source.node_attrs.get(time_attr) if node_level else source.edge_attrs.get(time_attr)
    if not isinstance(times, torch.Tensor):
        raise TypeError(f"time_attr {time_attr!r}: expected a tensor of times, got {type(times).__name__}")
    return {"node_time" if node_level else "edge_time": times}


def checked_workers(num_workers: Any) -> int | None:
    """``num_workers`` as the sampler's thread count (None for 0: the CPU kernels' count)."""
    threads = checked_count(num_workers, "num_workers", 0)
    return toolchain.checked_threads(threads, "num_workers") if threads else None


def gathered(values: Any, index: torch.Tensor) -> Any:
    """``values[index]`` along the first dimension: of a tensor (on its device; on the CPU into recycled memory,
    ``backends.cpu.buffers``, whose pages are already mapped, or page-locked memory while a loader with
    ``pin_memory`` makes its batch), a numpy array (as a tensor, as PyG gives it), a feature store's column or a
    list."""
    if isinstance(values, torch.Tensor):
        index = index.to(values.device)
        if values.device.type != "cpu":
            return values.index_select(0, index)
        shape = (index.numel(), *values.shape[1:])
        pinned = _PINNED_GATHERS.get()
        out = torch.empty(shape, dtype=values.dtype, pin_memory=True) if pinned else buffers.empty(shape, values.dtype)
        return torch.index_select(values, 0, index, out=out)
    if isinstance(values, np.ndarray):  # a memory-mapped array too: only the rows asked for are read
        return torch.from_numpy(np.ascontiguousarray(values[index.numpy()]))
    if isinstance(values, StoreColumn):
        return values.rows(index)
    return [values[i] for i in index.tolist()]
