"""1D partitioning of source vertices (FeatGraph's graph partitioning).

Source ids are cut into ``K`` contiguous, equally wide segments; each segment keeps its own CSR of
in-edges grouped by destination. A kernel that walks one segment at a time reads only that segment's
source feature rows, which then stay in cache, at the price of revisiting every destination row once
per segment.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .formats import Compressed, compress


@dataclass(frozen=True)
class SourcePartitions:
    """Per-segment CSR: edges of segment ``k`` into destination ``v`` are
    ``indptr[k * num_nodes + v] : indptr[k * num_nodes + v + 1]``."""

    num_parts: int
    boundaries: torch.Tensor  # (K + 1,) source-id cut points, boundaries[0] = 0, boundaries[K] = num_nodes
    csr: Compressed  # indptr of length K * num_nodes + 1; indices are sources; edge_ids in user order

    def segment_of(self, part: int) -> tuple[int, int]:
        """Source-id range [lo, hi) of one segment."""
        return int(self.boundaries[part]), int(self.boundaries[part + 1])


def partition_sources(src: torch.Tensor, dst: torch.Tensor, num_nodes: int, num_parts: int) -> SourcePartitions:
    """Cut source ids into ``num_parts`` equal ranges and build each range's CSR."""
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    boundaries = torch.div(torch.arange(num_parts + 1, dtype=torch.int64) * num_nodes, num_parts, rounding_mode="floor")
    part = torch.searchsorted(boundaries[1:-1].to(src.device), src, right=True)
    csr = compress(part * num_nodes + dst, src, num_parts * num_nodes)
    return SourcePartitions(num_parts, boundaries, csr)
