"""Checks of PyG's call forms shared by the layers with edge features and attention: which edge-feature and
attention-weight calls only PyG's path answers as PyG does."""

from __future__ import annotations

import torch

from ..graph.conversion import GraphLike
from .graph_input import PairTensor


def is_sparse_adj(edge_index: GraphLike) -> bool:
    """Whether the graph argument is a torch sparse ``adj_t`` (PyG's sparse path)."""
    return isinstance(edge_index, torch.Tensor) and edge_index.layout != torch.strided


def edge_attr_blocker(
    x: PairTensor, edge_index: GraphLike, edge_attr: torch.Tensor, dims: tuple[int, ...]
) -> str | None:
    """Why the fused path cannot take ``edge_attr``, or None: with a sparse ``adj_t`` PyG pairs the features
    with the adjacency's own edge order; the kernels take dense tensors of ``dims`` dimensions in x's dtype."""
    if is_sparse_adj(edge_index):
        return "edge features with a sparse adj_t"
    dtype = (x[0] if isinstance(x, (tuple, list)) else x).dtype
    if not isinstance(edge_attr, torch.Tensor) or edge_attr.layout != torch.strided or edge_attr.dim() not in dims:
        return "edge_attr is not a dense (num_edges, features) tensor"
    if edge_attr.dtype != dtype:
        return f"edge_attr of dtype {edge_attr.dtype} with x of {dtype}"
    return None


def attention_blocker(
    layer: torch.nn.Module,
    x: PairTensor,
    edge_index: GraphLike,
    edge_attr: torch.Tensor | None,
    return_attention: bool | None,
    dims: tuple[int, ...] = (2,),
) -> str | None:
    """Why an attention layer's fused path cannot take this call, or None: attention weights of a sparse
    ``adj_t`` (PyG returns them as a sparse tensor) or in code ``torch.compile`` traces (the graph is a
    ``GraphRef`` there, its edges the operators' to read), or edge features it cannot take. Edge features
    given to a layer without ``edge_dim``, or missing where it has one, raise ``ValueError``."""
    if return_attention and torch.compiler.is_compiling():
        return "attention weights in traced code"
    if is_sparse_adj(edge_index) and return_attention:
        return "attention weights of a sparse adj_t (returned as a sparse tensor)"
    name = type(layer).__name__
    if edge_attr is not None and layer.lin_edge is None:
        raise ValueError(f"edge_attr: given to a {name} without edge_dim")
    if edge_attr is None and layer.lin_edge is not None:
        raise ValueError(f"edge_attr: this {name} has edge_dim={layer.edge_dim} and needs edge features")
    return None if edge_attr is None else edge_attr_blocker(x, edge_index, edge_attr, dims)
