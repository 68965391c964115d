"""Partitioning of source vertices (FeatGraph's graph partitioning and hybrid partitioning).

1D: source ids are cut into ``K`` contiguous, equally wide segments. A kernel that walks one segment at a time
reads only that segment's source feature rows, which then stay in cache, at the price of revisiting every
destination row once per segment. The segments are views of one CSR whose rows list their sources in ascending
order: segment ``k``'s edges into ``v`` are a run of row ``v``, found by pointers alone, so the graph's CSR
itself serves every segment count (and unpartitioned kernels) without a copy of its edges. Hybrid (GPU):
sources split by out-degree into hubs, staged on chip, and the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..native import compile_source, launch
from ..native.sources import cpp_source
from ..native.toolchain import num_threads
from .formats import Compressed, compress, groups_ascend


@dataclass(frozen=True)
class SourcePartitions:
    """Segment ``k``'s edges into destination ``v`` are ``csr.indices[p : q]`` (their user ids
    ``csr.edge_ids[p : q]``) with ``p, q = csr.indptr[v * K + k], csr.indptr[v * K + k + 1]``: ``csr`` shares
    its index arrays with a source-ascending CSR of the graph, its ``indptr`` the segment pointers."""

    num_parts: int
    boundaries: torch.Tensor  # (K + 1,) source-id cut points, boundaries[0] = 0, boundaries[K] = num_src
    csr: Compressed  # indptr of length num_dst * K + 1; indices are sources; edge_ids in user order

    def segment_of(self, part: int) -> tuple[int, int]:
        """Source-id range [lo, hi) of one segment."""
        return int(self.boundaries[part]), int(self.boundaries[part + 1])


def cut_points(num_src: int, num_parts: int) -> torch.Tensor:
    """The ``num_parts + 1`` source ids that cut ``num_src`` sources into equal ranges."""
    if type(num_parts) is not int or num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts!r}")
    return torch.div(torch.arange(num_parts + 1, dtype=torch.int64) * num_src, num_parts, rounding_mode="floor")


def partition_sources(csr: Compressed, num_src: int, num_parts: int) -> SourcePartitions:
    """Cut source ids into ``num_parts`` equal ranges over ``csr``, a CSR of in-edges whose rows list their
    sources in ascending order (``compress(..., sort_other=True)``): only the segment pointers are new
    (``native/cpp/segments.cpp``, a binary search per row and cut)."""
    boundaries = cut_points(num_src, num_parts)
    if not groups_ascend(csr):
        raise ValueError("csr must list each row's sources in ascending order (compress(..., sort_other=True))")
    indptr, indices, edge_ids = csr
    num_dst = indptr.numel() - 1
    if indptr.device.type != "cpu":  # no binary-search kernel there: the rows' counts below each cut
        return SourcePartitions(num_parts, boundaries, Compressed(_pointers(csr, boundaries), indices, edge_ids))
    pointers = torch.empty(num_dst * num_parts + 1, dtype=indptr.dtype)
    width = indptr.element_size()
    launch(
        compile_source(cpp_source("segments.cpp")),
        [indptr, indices, boundaries, pointers],
        [width, num_dst, num_parts, num_threads()],
    )
    return SourcePartitions(num_parts, boundaries, Compressed(pointers, indices, edge_ids))


def partition_sources_by_id(
    src: torch.Tensor, dst: torch.Tensor, num_src: int, num_dst: int, num_parts: int, index_dtype: torch.dtype
) -> SourcePartitions:
    """The same layout with each run's edges in id order, as a copy of the edges: for max and min, whose ties
    go to the first edge of a run (one E-sized int64 temporary besides the index arrays)."""
    boundaries = cut_points(num_src, num_parts)
    group = torch.searchsorted(boundaries[1:-1].to(src.device), src, right=True).add_(dst * num_parts)
    return SourcePartitions(num_parts, boundaries, compress(group, src, num_dst * num_parts, index_dtype))


def _pointers(csr: Compressed, boundaries: torch.Tensor) -> torch.Tensor:
    """The segment pointers with torch: each edge's segment, counted per (row, segment), summed up."""
    indptr, indices, _ = csr
    num_dst, num_parts = indptr.numel() - 1, boundaries.numel() - 1
    segment = torch.searchsorted(boundaries[1:-1].to(indices.device), indices.to(torch.int64), right=True)
    rows = torch.repeat_interleave(torch.arange(num_dst, device=indptr.device), indptr.diff().to(torch.int64))
    counts = torch.bincount(rows * num_parts + segment, minlength=num_dst * num_parts)
    pointers = torch.zeros(num_dst * num_parts + 1, dtype=torch.int64, device=indptr.device)
    torch.cumsum(counts, dim=0, out=pointers[1:])
    return pointers.to(indptr.dtype)


@dataclass(frozen=True)
class HubPartition:
    """FeatGraph's hybrid partitioning by degree: the source vertices with out-degree of at least a
    threshold (at most ``capacity`` of them, highest degree first) are hubs whose feature rows a GPU
    program stages on chip; ``slot[u]`` is u's row in that staged tile, -1 for the other vertices, which
    are read from global memory. ``ids`` lists the hubs by slot, padded with -1 to ``capacity``."""

    slot: torch.Tensor  # (num_nodes,) int32
    ids: torch.Tensor  # (capacity,) int64

    @property
    def num_hubs(self) -> int:
        return int((self.ids >= 0).sum())


def partition_hubs(out_degrees: torch.Tensor, threshold: int, capacity: int) -> HubPartition:
    """Hubs: vertices with out-degree >= ``threshold`` (>= 1), the ``capacity`` highest first (ties by id)."""
    if threshold < 1 or capacity < 1:
        raise ValueError(f"threshold and capacity must be >= 1, got {threshold} and {capacity}")
    candidates = torch.nonzero(out_degrees >= threshold).squeeze(1)
    order = torch.argsort(out_degrees[candidates], descending=True, stable=True)
    hubs = candidates[order][:capacity]
    slot = torch.full_like(out_degrees, -1, dtype=torch.int32)
    slot[hubs] = torch.arange(hubs.numel(), dtype=torch.int32, device=slot.device)
    ids = torch.full((capacity,), -1, dtype=torch.int64, device=out_degrees.device)
    ids[: hubs.numel()] = hubs
    return HubPartition(slot, ids)
