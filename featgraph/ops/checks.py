"""Checks of the ops' arguments, made before any kernel is built: each error names the caller's argument
(``lhs``, ``scores``, ``edge_weight``, ...) and what it should have been, instead of a kernel's internal
placeholder or an IndexError from deep inside an op."""

from __future__ import annotations

from typing import Any

import torch

from ..graph import Graph
from ..graph.graph import GraphRef
from .udfs import TORCH_TO_TE


def check_graph(g: Any, name: str = "g") -> Graph:
    """``g`` itself if it is a ``Graph`` (or, in traced code, the ``GraphRef`` a layer made of an edge_index)."""
    if not isinstance(g, (Graph, GraphRef)):
        raise TypeError(f"{name}: expected a featgraph.Graph, got {type(g).__name__}")
    return g


def vertex_rows(g: Graph, side: str) -> tuple[int, str]:
    """Rows of a vertex tensor on ``side`` ("src"/"u" or "dst"/"v") of ``g``, and what they count."""
    source = side in ("src", "u")
    rows = g.num_src_nodes if source else g.num_dst_nodes
    if not g.is_bipartite:
        return rows, "the graph's nodes"
    return rows, f"the graph's {'source' if source else 'destination'} nodes"


def check_tensor(
    name: str,
    x: Any,
    *,
    dims: int | None = None,
    min_dims: int = 1,
    rows: int | None = None,
    rows_are: str = "",
    like: torch.Tensor | None = None,
    device: torch.device | None = None,
) -> torch.Tensor:
    """``x`` is a floating tensor with ``dims`` dimensions (else at least ``min_dims``), ``rows`` rows
    (``rows_are`` says what they count), the dtype of ``like`` and its device (else ``device``)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in TORCH_TO_TE:
        raise TypeError(f"{name}: expected a floating tensor ({', '.join(map(str, TORCH_TO_TE))}), got {x.dtype}")
    if dims is not None and x.dim() != dims:
        raise ValueError(f"{name}: expected {dims} dimension{'s' * (dims != 1)}, got shape {tuple(x.shape)}")
    if x.dim() < min_dims:
        raise ValueError(f"{name}: expected at least {min_dims} dimension(s), rows first, got shape {tuple(x.shape)}")
    if rows is not None and x.shape[0] != rows:
        raise ValueError(f"{name}: expected {rows} rows ({rows_are}), got {x.shape[0]}")
    if like is not None and x.dtype != like.dtype:
        raise TypeError(f"{name}: expected {like.dtype} like the features, got {x.dtype}")
    device = like.device if like is not None else device
    if device is not None and x.device != device:
        raise ValueError(f"{name}: expected a tensor on {device}, got one on {x.device}")
    return x
