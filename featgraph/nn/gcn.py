"""``GCNConv`` (Kipf and Welling): PyG's layer on featgraph's fused normalised aggregation."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_geometric.nn
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from ..graph import Graph
from ..graph.conversion import GraphLike, as_graph
from ..ops import gcn_aggregate, linear
from ..ops.precision import with_bias
from .pyg_layer import FusedLayer, linear_first

# what one call aggregates over: the graph, its edge weights (None: all 1) and the weight of added loops
_Plan = tuple[Graph, torch.Tensor | None, float]


class GCNConv(FusedLayer, torch_geometric.nn.GCNConv):
    """``out = D^-1/2 (A + I) D^-1/2 x W + b``: PyG's ``GCNConv`` (constructor, parameters, ``cached``,
    hooks, ...), its forward on featgraph's fused aggregation.

    The normalisation is never materialised per edge: one fused SpMM scales each message by its two
    endpoints' factors; self loops are n extra edges of a cached looped graph. The linear map goes on
    whichever side costs fewer multiply-adds (it commutes with the aggregation; ``linear_first``). Loops
    follow PyG's input forms: an ``edge_index`` (or ``Graph``) keeps one loop per vertex, weighing its
    existing loop's weight, else 1, or 2 when ``improved`` and edge weights are given; a torch sparse
    ``adj_t`` gets ``I`` (``2I``) added on top, so one that has self loops runs PyG's path. A ``Graph``'s
    edge weights serve when ``edge_weight`` is None.
    """

    def forward(self, x: torch.Tensor, edge_index: GraphLike, edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        if isinstance(x, (tuple, list)) or isinstance(edge_index, Graph) and edge_index.is_bipartite:
            raise ValueError("x: GCNConv takes one vertex set, not a bipartite graph (try SAGEConv or GraphConv)")
        if isinstance(edge_index, Graph) and edge_weight is None:
            edge_weight = edge_index.edge_weight
        plan = self.fused_blocker(x, edge_index) or self._plan(x, edge_index, edge_weight)
        if isinstance(plan, str):
            return self.fallback(plan, x, edge_index, edge_weight)
        graph, weight, fill = plan

        def aggregate(h: torch.Tensor) -> torch.Tensor:
            return gcn_aggregate(graph, h, weight, self.add_self_loops, self.normalize, fill)

        lin = self.lin.weight
        out = aggregate(linear(x, lin)) if linear_first(graph, *lin.shape[::-1]) else F.linear(aggregate(x), lin)
        return with_bias(out, self.bias)

    def _plan(self, x: torch.Tensor, edge_index: GraphLike, edge_weight: torch.Tensor | None) -> _Plan | str:
        """The aggregation for this call, or why PyG's path must run it. With ``cached`` (PyG's meaning: the
        first call's graph serves until ``reset_parameters``), the first call's plan, and PyG's own cache
        filled so both paths agree."""
        cache = getattr(self, "_fused_cache", None)
        if self.cached and cache is not None and cache[0] is self._cached_edge_index:
            return cache[1]
        graph = as_graph(edge_index, x.shape[0])
        sparse_adj = isinstance(edge_index, torch.Tensor) and edge_index.layout != torch.strided
        if sparse_adj and self.add_self_loops and self.normalize and graph.self_loop_edges().numel():
            return "a sparse adj_t with self loops (PyG adds loops on top of them)"
        weight = graph.edge_weight if edge_weight is None else edge_weight
        plan = graph, weight, 2.0 if self.improved and (weight is not None or sparse_adj) else 1.0
        if self.cached and self.normalize:
            pyg_edges = torch.stack(graph.coo()) if isinstance(edge_index, Graph) else edge_index
            self._cached_edge_index = gcn_norm(
                pyg_edges, edge_weight, x.shape[0], self.improved, self.add_self_loops, self.flow, x.dtype
            )
            self._fused_cache = (self._cached_edge_index, plan)
        return plan
