"""``SGConv`` (Wu et al.): ``lin((D^-1/2 (A + I) D^-1/2)^K x)``, PyG's layer on featgraph's fused GCN aggregation."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_geometric.nn

from ..graph import Graph
from ..graph.conversion import GraphLike, as_graph
from ..ops import gcn_aggregate
from ..ops.precision import with_bias
from .pyg_layer import FusedLayer, linear_first


def propagation_graph(
    x: torch.Tensor, edge_index: GraphLike, edge_weight: torch.Tensor | None, add_self_loops: bool
) -> tuple[Graph, torch.Tensor | None] | str:
    """The graph and edge weights (None: all 1) that PyG's ``gcn_norm`` propagation runs over for this call,
    or why only PyG's path gives its answer. A sparse ``adj_t`` carries its own weights (PyG ignores
    ``edge_weight`` there) and gets ``I`` added on top of any loops it has, where an ``edge_index`` keeps one
    loop per vertex: a sparse ``adj_t`` with self loops runs PyG's path."""
    if isinstance(x, (tuple, list)) or isinstance(edge_index, Graph) and edge_index.is_bipartite:
        raise ValueError("x: this layer takes one vertex set, not a bipartite graph (try GraphConv)")
    graph = as_graph(edge_index, x.shape[0])
    sparse_adj = isinstance(edge_index, torch.Tensor) and edge_index.layout != torch.strided
    if sparse_adj and add_self_loops and graph.self_loop_edges().numel():
        return "a sparse adj_t with self loops (PyG adds loops on top of them)"
    if sparse_adj or edge_weight is None:
        edge_weight = graph.edge_weight
    if edge_weight is not None and edge_weight.dtype != x.dtype:
        return f"edge_weight of dtype {edge_weight.dtype} with x of {x.dtype}"
    return graph, edge_weight


class SGConv(FusedLayer, torch_geometric.nn.SGConv):
    """Simplified graph convolution: PyG's ``SGConv`` (constructor, parameters, ``cached``: the first call's
    propagated features serve until ``reset_parameters``), its K propagation steps each one fused SpMM that
    scales messages by both endpoints' ``deg^-1/2`` (``ops.gcn_aggregate``). Without ``cached``, ``lin``'s
    weight goes before the propagation when that costs fewer multiply-adds (they commute; ``linear_first``)."""

    def forward(self, x: torch.Tensor, edge_index: GraphLike, edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        """As PyG's; ``edge_index`` may also be a ``featgraph.Graph`` (its edge weights serve when
        ``edge_weight`` is None)."""
        if self.cached and self._cached_x is not None:
            return self.lin(self._cached_x.detach())
        plan = self.fused_blocker(x, edge_index) or propagation_graph(x, edge_index, edge_weight, self.add_self_loops)
        if isinstance(plan, str):
            return self.fallback(plan, x, edge_index, edge_weight)
        graph, weight = plan
        lin = self.lin
        first = not self.cached and linear_first(graph, lin.weight.shape[1], lin.weight.shape[0])
        h = F.linear(x, lin.weight) if first else x
        for _ in range(self.K):
            h = gcn_aggregate(graph, h, weight, self.add_self_loops)
        if first:
            return with_bias(h, lin.bias)
        if self.cached:
            self._cached_x = h
        return lin(h)
