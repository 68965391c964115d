"""Compressed sparse formats built from COO: one grouping mechanism serves CSR and CSC."""

from __future__ import annotations

from typing import NamedTuple

import torch

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


def compress(group: torch.Tensor, other: torch.Tensor, num_groups: int) -> Compressed:
    """Group edges by ``group`` (stable, so duplicate edges keep their relative order)."""
    order = torch.sort(group, stable=True).indices
    counts = torch.bincount(group, minlength=num_groups)
    indptr = torch.zeros(num_groups + 1, dtype=torch.int64, device=group.device)
    torch.cumsum(counts, dim=0, out=indptr[1:])
    return Compressed(indptr, other[order].contiguous(), order)


def index_dtype_for(num_nodes: int, num_edges: int) -> torch.dtype:
    """int32 when every id and offset fits, int64 otherwise."""
    return torch.int32 if max(num_nodes, num_edges) <= INT32_LIMIT else torch.int64
