"""Compressed sparse formats built from COO: one grouping mechanism serves CSR and CSC."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..native import compile_source, launch
from ..native.sources import cpp_source
from ..native.toolchain import num_threads

INT32_LIMIT = 2**31 - 1


class Compressed(NamedTuple):
    """Edges grouped by one endpoint.

    ``indptr[v]:indptr[v+1]`` are the edges of group ``v``; ``indices`` holds the other endpoint and
    ``edge_ids`` the position of each edge in the user's (COO) order, i.e. the permutation from the
    compressed order back to the user's order.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    edge_ids: torch.Tensor

    def to(self, dtype: torch.dtype) -> Compressed:
        """The same format with every index array cast to ``dtype`` (int32 for kernels)."""
        return Compressed(*(t.to(dtype).contiguous() for t in self))


def compress(
    group: torch.Tensor,
    other: torch.Tensor,
    num_groups: int,
    index_dtype: torch.dtype = torch.int64,
    threads: int | None = None,
    sort_other: bool = False,
) -> Compressed:
    """Group edges by ``group`` (stable, so duplicate edges keep their relative order), the index arrays in
    ``index_dtype``; with ``sort_other`` each group's edges ascend by ``other`` (ties in id order), so one
    array serves every cut of the other endpoint's ids into ranges (``partition.SourcePartitions``). On the CPU
    one compiled counting sort (``native/cpp/compress.cpp``) on up to ``threads`` threads (None: the CPU
    kernels' count; the same output for any), O(E + groups) and written in ``index_dtype`` directly;
    elsewhere torch's stable sort."""
    if group.device.type == "cpu":
        return _compiled_compress(group, other, num_groups, index_dtype, threads or num_threads(), sort_other)
    return _sorted_compress(group, other, num_groups, index_dtype, sort_other)


def _sorted_compress(
    group: torch.Tensor, other: torch.Tensor, num_groups: int, index_dtype: torch.dtype, sort_other: bool
) -> Compressed:
    """``compress`` by torch's stable sorts, where no compiled counting sort runs (GPU tensors)."""
    if sort_other:  # by other endpoint, then stably by group: within a group, ascending other, ties in id order
        by_other = torch.sort(other, stable=True).indices
        order = by_other[torch.sort(group[by_other], stable=True).indices]
    else:
        order = torch.sort(group, stable=True).indices
    counts = torch.bincount(group, minlength=num_groups)
    indptr = torch.zeros(num_groups + 1, dtype=torch.int64, device=group.device)
    torch.cumsum(counts, dim=0, out=indptr[1:])
    compressed = Compressed(indptr, other[order].contiguous(), order)
    return compressed if index_dtype == torch.int64 else compressed.to(index_dtype)


def _compiled_compress(
    group: torch.Tensor, other: torch.Tensor, num_groups: int, index_dtype: torch.dtype, threads: int, sort_other: bool
) -> Compressed:
    if index_dtype not in (torch.int32, torch.int64):
        raise ValueError(f"index_dtype must be torch.int32 or torch.int64, got {index_dtype}")
    num_edges = group.numel()
    out = Compressed(
        torch.empty(num_groups + 1, dtype=index_dtype), *(torch.empty(num_edges, dtype=index_dtype) for _ in range(2))
    )
    ends = [t.to(torch.int64).contiguous() for t in (group, other)]
    width = 4 if index_dtype == torch.int32 else 8
    arguments = [width, num_edges, num_groups, threads, int(sort_other)]
    launch(compile_source(cpp_source("compress.cpp")), [*ends, *out], arguments)
    return out


def groups_ascend(compressed: Compressed, by_edge_id: bool = False) -> bool:
    """Whether every group lists its other endpoints in ascending order (as ``compress(..., sort_other=True)``
    writes them), or with ``by_edge_id`` its edge ids (as ``compress`` writes them)."""
    indptr, indices, edge_ids = compressed
    values = edge_ids if by_edge_id else indices
    if values.numel() < 2:
        return True
    falls = values[1:] < values[:-1]
    starts = indptr[1:-1].to(torch.int64)
    starts = starts[(starts > 0) & (starts < values.numel())]
    falls[starts - 1] = False  # a fall from one group's last edge to the next group's first is no fall
    return not bool(falls.any())


def index_dtype_for(num_nodes: int, num_edges: int) -> torch.dtype:
    """int32 when every id and offset fits, int64 otherwise."""
    return torch.int32 if max(num_nodes, num_edges) <= INT32_LIMIT else torch.int64


def with_loops(compressed: Compressed, keep: torch.Tensor | None, num_loops: int) -> Compressed:
    """``compressed`` (grouped stably: a group's edges in id order) for the graph whose edges are the kept ones
    (``keep``, a mask in edge id order; None keeps all), renumbered in order, then one self loop on each of the
    first ``num_loops`` groups, loop ``v`` numbered ``kept + v``: what ``compress`` gives for that graph, with
    no sort, since each group keeps its edges' order and gains its loop last (the largest id). On the CPU one
    compiled pass over the edges (``native/cpp/with_loops.cpp``), elsewhere a few linear torch passes. The
    index arrays keep ``compressed``'s dtype."""
    if compressed.indptr.device.type == "cpu":
        return _compiled_with_loops(compressed, keep, num_loops)
    return _vectorised_with_loops(compressed, keep, num_loops)


def _compiled_with_loops(compressed: Compressed, keep: torch.Tensor | None, num_loops: int) -> Compressed:
    indptr, indices, edge_ids = (t.contiguous() for t in compressed)
    num_edges = indices.numel()
    num_kept = num_edges if keep is None else int(keep.sum())
    out = Compressed(
        torch.empty_like(indptr), *(torch.empty(num_kept + num_loops, dtype=indptr.dtype) for _ in range(2))
    )
    keep = None if keep is None else keep.to(torch.bool).contiguous()
    width = 4 if indptr.dtype == torch.int32 else 8
    launch(
        compile_source(cpp_source("with_loops.cpp")),
        [indptr, indices, edge_ids, keep, *out],
        [width, indptr.numel() - 1, num_edges, num_loops],
    )
    return out


def _vectorised_with_loops(compressed: Compressed, keep: torch.Tensor | None, num_loops: int) -> Compressed:
    """``with_loops`` in linear torch passes, for tensors off the CPU."""
    indptr, indices, edge_ids = compressed
    dtype, device = indptr.dtype, indptr.device
    if keep is not None:
        kept_here = keep[edge_ids]  # the mask in compressed order
        renumbered = torch.cumsum(keep, 0, dtype=dtype) - 1  # a kept edge's new id
        indices, edge_ids = indices[kept_here], renumbered[edge_ids[kept_here]]
        running = torch.zeros(kept_here.numel() + 1, dtype=dtype, device=device)
        torch.cumsum(kept_here, 0, dtype=dtype, out=running[1:])
        indptr = running[indptr]
    num_kept = indices.numel()
    looped_before = torch.arange(indptr.numel(), dtype=dtype, device=device).clamp_(max=num_loops)
    new_indptr = indptr + looped_before
    # an edge moves right by the loops of the groups ending at or before it (index_copy_: index_put_ with the
    # same positions takes ten times as long)
    ends = torch.bincount(indptr[1 : num_loops + 1], minlength=num_kept + 1)[:num_kept]
    moved = torch.cumsum(ends, 0).add_(torch.arange(num_kept, device=device))
    loop_slots = new_indptr[1 : num_loops + 1].long() - 1
    loops = torch.arange(num_loops, dtype=dtype, device=device)
    new_indices = torch.empty(num_kept + num_loops, dtype=dtype, device=device)
    new_ids = torch.empty_like(new_indices)
    new_indices.index_copy_(0, moved, indices).index_copy_(0, loop_slots, loops)
    new_ids.index_copy_(0, moved, edge_ids).index_copy_(0, loop_slots, loops + num_kept)
    return Compressed(new_indptr, new_indices, new_ids)
