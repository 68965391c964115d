"""``segment_reduce``: reduce consecutive runs of rows, as a gspmm over a graph whose edges are the rows."""

from __future__ import annotations

import torch

from ..graph import Graph
from .checks import check_tensor
from .gspmm import REDUCERS, gspmm


def segment_reduce(seglen: torch.Tensor, value: torch.Tensor, reducer: str = "sum") -> torch.Tensor:
    """``out[i] = reducer(value[offset_i : offset_i + seglen[i]])`` (0 for empty segments; max/min as
    ``gspmm``'s); differentiable."""
    if reducer not in REDUCERS:
        raise ValueError(f"reducer must be one of {REDUCERS}, got {reducer!r}")
    check_tensor("value", value)
    seglen = torch.as_tensor(seglen, device=value.device)
    if seglen.dim() != 1 or seglen.is_floating_point() or seglen.dtype == torch.bool or bool((seglen < 0).any()):
        raise ValueError("seglen must be a 1-D tensor of non-negative integer lengths")
    if int(seglen.sum()) != value.shape[0]:
        raise ValueError(f"seglen sums to {int(seglen.sum())} but value has {value.shape[0]} rows")
    segments = seglen.numel()
    dst = torch.repeat_interleave(torch.arange(segments, device=value.device), seglen.to(torch.int64))
    rows = Graph(torch.zeros_like(dst), dst, max(segments, 1))
    out = gspmm(rows, "copy_rhs", reducer, None, value)
    return out[:segments]
