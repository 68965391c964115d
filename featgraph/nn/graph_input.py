"""Turn a layer's graph argument (PyG ``edge_index``, a torch sparse ``adj_t`` or a ``Graph``) into a ``Graph``.

A training loop passes the same ``edge_index`` tensor every epoch; its ``Graph`` (and with it the formats,
normalisation data and compiled kernels cached on the graph) is remembered for as long as that tensor lives
and is not modified in place, so per-graph preprocessing happens once, not once per epoch.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict

import torch

from ..graph import Graph

GraphLike = torch.Tensor | Graph
_REMEMBERED = 16
_graphs: OrderedDict[int, tuple[weakref.ref, int, int, Graph]] = OrderedDict()


def as_graph(edges: GraphLike, num_nodes: int) -> Graph:
    """The ``Graph`` for ``edges`` on ``num_nodes`` vertices: an ``edge_index`` (2, E), a square torch sparse
    ``adj_t`` (row = destination, column = source, as PyG's ``SparseTensor`` path; values other than 1 become
    edge weights), or a ``Graph``."""
    if isinstance(edges, Graph):
        if edges.num_nodes != num_nodes:
            raise ValueError(f"the graph has {edges.num_nodes} vertices but x has {num_nodes} rows")
        return edges
    if not isinstance(edges, torch.Tensor):
        raise TypeError(f"expected an edge_index tensor or a featgraph.Graph, got {type(edges).__name__}")
    key = id(edges)
    entry = _graphs.get(key)
    if entry is not None and entry[0]() is edges and entry[1] == edges._version and entry[2] == num_nodes:
        _graphs.move_to_end(key)
        return entry[3]
    graph = _from_tensor(edges, num_nodes)
    _graphs[key] = (weakref.ref(edges), edges._version, num_nodes, graph)
    if len(_graphs) > _REMEMBERED:
        _graphs.popitem(last=False)
    return graph


def _from_tensor(edges: torch.Tensor, num_nodes: int) -> Graph:
    if edges.layout == torch.strided:
        return Graph.from_edge_index(edges, num_nodes=num_nodes)
    if edges.dim() != 2 or edges.shape[0] != edges.shape[1] or edges.shape[0] != num_nodes:
        raise ValueError(f"a sparse adj_t must be ({num_nodes}, {num_nodes}), got {tuple(edges.shape)}")
    coo = edges.to_sparse_coo().coalesce()
    dst, src = coo.indices()
    values = coo.values()
    weighted = values.is_floating_point() and not bool((values == 1).all())
    return Graph(src, dst, num_nodes, values if weighted else None)
