"""Partitioning of source vertices (FeatGraph's graph partitioning and hybrid partitioning).

1D: source ids are cut into ``K`` contiguous, equally wide segments; each segment keeps its own CSR of
in-edges grouped by destination. A kernel that walks one segment at a time reads only that segment's
source feature rows, which then stay in cache, at the price of revisiting every destination row once
per segment. Hybrid (GPU): sources split by out-degree into hubs, staged on chip, and the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .formats import Compressed, compress


@dataclass(frozen=True)
class SourcePartitions:
    """Per-segment CSR: edges of segment ``k`` into destination ``v`` are
    ``indptr[k * num_dst + v] : indptr[k * num_dst + v + 1]``."""

    num_parts: int
    boundaries: torch.Tensor  # (K + 1,) source-id cut points, boundaries[0] = 0, boundaries[K] = num_src
    csr: Compressed  # indptr of length K * num_dst + 1; indices are sources; edge_ids in user order

    def segment_of(self, part: int) -> tuple[int, int]:
        """Source-id range [lo, hi) of one segment."""
        return int(self.boundaries[part]), int(self.boundaries[part + 1])


def partition_sources(
    src: torch.Tensor,
    dst: torch.Tensor,
    num_src: int,
    num_dst: int,
    num_parts: int,
    index_dtype: torch.dtype = torch.int64,
) -> SourcePartitions:
    """Cut source ids into ``num_parts`` equal ranges and build each range's CSR over the destinations, its
    index arrays in ``index_dtype`` (one E-sized int64 temporary besides them)."""
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    boundaries = torch.div(torch.arange(num_parts + 1, dtype=torch.int64) * num_src, num_parts, rounding_mode="floor")
    group = torch.searchsorted(boundaries[1:-1].to(src.device), src, right=True).mul_(num_dst).add_(dst)
    csr = compress(group, src, num_parts * num_dst, index_dtype)
    return SourcePartitions(num_parts, boundaries, csr)


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
