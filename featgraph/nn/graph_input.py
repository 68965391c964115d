"""A layer's inputs as PyG passes them: features as one tensor or a ``(x_src, x_dst)`` pair, and a graph argument
(an ``edge_index``, an ``EdgeIndex``, a torch sparse ``adj_t`` or a ``Graph``, turned into a ``Graph`` by
``graph.conversion.as_graph``)."""

from __future__ import annotations

import torch

from ..graph import Graph
from ..graph.conversion import GraphLike, Sizes, as_graph

PairTensor = torch.Tensor | tuple[torch.Tensor, torch.Tensor | None]


def split_input(
    x: PairTensor, edges: GraphLike, size: tuple[int, int] | None = None
) -> tuple[torch.Tensor, torch.Tensor | None, Graph]:
    """A layer's ``(x_src, x_dst, graph)`` from PyG's forms: ``x`` one tensor (one vertex set; or the sources
    of a bipartite graph, whose destinations are its first rows, as in DGL's and featgraph's sampled blocks)
    or a pair ``(x_src, x_dst)`` (``x_dst`` None: the destinations' features are not given); ``size``
    PyG's ``(num_src, num_dst)``. ``x_dst`` is None only where the pair gave None."""
    pair = isinstance(x, (tuple, list))
    if pair and len(x) != 2:
        raise ValueError(f"x: expected a tensor or a pair (x_src, x_dst), got {len(x)} items")
    x_src, x_dst = x if pair else (x, None)
    if not isinstance(x_src, torch.Tensor):
        raise TypeError(f"x: expected a tensor or a pair of tensors, got {type(x_src).__name__}")
    if size is not None:
        if len(size) != 2 or size[0] != x_src.shape[0]:
            raise ValueError(f"size={tuple(size)}: expected (num_src, num_dst), num_src = x's {x_src.shape[0]} rows")
        sizes: Sizes = (int(size[0]), int(size[1]))
    elif isinstance(edges, Graph):
        sizes = (edges.num_src_nodes, edges.num_dst_nodes)
    elif pair:
        sizes = (x_src.shape[0], x_src.shape[0] if x_dst is None else x_dst.shape[0])
    else:
        sizes = x_src.shape[0]
    if isinstance(sizes, tuple) and sizes[0] == sizes[1]:
        sizes = sizes[0]
    graph = as_graph(edges, sizes)
    if x_src.shape[0] != graph.num_src_nodes:
        raise ValueError(f"x: expected {graph.num_src_nodes} rows (the graph's sources), got {x_src.shape[0]}")
    if x_dst is not None and x_dst.shape[0] != graph.num_dst_nodes:
        raise ValueError(f"x_dst: expected {graph.num_dst_nodes} rows (the destinations), got {x_dst.shape[0]}")
    if not pair and graph.num_dst_nodes == x_src.shape[0]:
        x_dst = x_src  # one vertex set: the destinations' rows are all of x
    elif not pair:
        x_src, x_dst = _SharedPrefix.apply(x_src, graph.num_dst_nodes)
    return x_src, x_dst, graph


class _SharedPrefix(torch.autograd.Function):
    """``(x, x[:n])``: a block's sources and, as their first rows, its destinations. The backward adds the
    destinations' gradient into a copy of the sources' (n rows), where slicing pads it with zeros to x's
    size and then sums two full-size gradients."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: D102
        ctx.set_materialize_grads(False)
        ctx.n, ctx.shape = n, x.shape
        return x.view_as(x), x[:n]

    @staticmethod
    def backward(ctx, grad_all: torch.Tensor | None, grad_prefix: torch.Tensor | None):  # noqa: D102
        if grad_prefix is None:
            return grad_all, None
        grad = grad_prefix.new_zeros(ctx.shape) if grad_all is None else grad_all.clone()
        grad[: ctx.n] += grad_prefix
        return grad, None
