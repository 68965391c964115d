"""``APPNP`` (Gasteiger et al.): personalized-PageRank propagation, PyG's layer on featgraph's fused GCN
aggregation."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_geometric.nn
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from ..graph import Graph
from ..graph.conversion import GraphLike
from ..ops import gcn_aggregate, gspmm
from .layer_inputs import is_sparse_adj
from .pyg_layer import FusedLayer
from .sg_conv import propagation_graph


class APPNP(FusedLayer, torch_geometric.nn.APPNP):
    """``x_k = (1 - alpha) A_hat x_{k-1} + alpha x_0``, K times: PyG's ``APPNP`` (constructor, ``cached``:
    the first call's normalised graph serves until ``reset_parameters``), each step one fused SpMM that
    scales messages by both endpoints' ``deg^-1/2`` (``ops.gcn_aggregate``; plain weighted sums with
    ``normalize=False``). Edge dropout in training drops PyG's normalised weights as PyG does and
    aggregates with them inside the SpMM (without ``normalize``, or on a sparse ``adj_t``, it runs PyG's
    path)."""

    def forward(self, x: torch.Tensor, edge_index: GraphLike, edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        """As PyG's; ``edge_index`` may also be a ``featgraph.Graph`` (its edge weights serve when
        ``edge_weight`` is None)."""
        reason = self.fused_blocker(x, edge_index)
        dropping = self.dropout > 0 and self.training
        if not reason and dropping and (not self.normalize or is_sparse_adj(edge_index)):
            reason = "edge dropout in training without normalize, or on a sparse adj_t"
        plan = reason or self._plan(x, edge_index, edge_weight)
        if isinstance(plan, str):
            return self.fallback(plan, x, edge_index, edge_weight)
        graph, weight = plan
        loops = self.add_self_loops and self.normalize
        if dropping:
            return self._propagate_dropped(x, graph, weight)
        h, teleport = x, self.alpha * x  # one product for the K steps, each step one add into a new h
        for _ in range(self.K):
            h = torch.add(teleport, gcn_aggregate(graph, h, weight, loops, self.normalize), alpha=1 - self.alpha)
        return h

    def _propagate_dropped(self, x: torch.Tensor, graph: Graph, weight: torch.Tensor | None) -> torch.Tensor:
        """PyG's edge dropout: each step applies ``F.dropout`` to the weights the previous step used, starting
        from PyG's ``gcn_norm`` weights in the looped graph's edge order (so the same seed drops the same
        edges), and aggregates with them inside the SpMM."""
        edges = torch.stack(graph.coo())
        norm = gcn_norm(edges, weight, graph.num_nodes, False, self.add_self_loops, self.flow, x.dtype)[1]
        looped = graph.with_self_loops() if self.add_self_loops else graph
        h, teleport = x, self.alpha * x
        for _ in range(self.K):
            norm = F.dropout(norm, p=self.dropout)  # PyG drops the previous step's dropped weights again
            h = torch.add(teleport, gspmm(looped, "mul", "sum", h, norm.unsqueeze(1)), alpha=1 - self.alpha)
        return h

    def _plan(
        self, x: torch.Tensor, edge_index: GraphLike, edge_weight: torch.Tensor | None
    ) -> tuple[Graph, torch.Tensor | None] | str:
        """The propagation graph for this call, or why PyG's path must run it. With ``cached`` and
        ``normalize`` (PyG's meaning: the first call's graph serves until ``reset_parameters``), the first
        call's, with PyG's own cache filled so both paths agree."""
        cache = getattr(self, "_fused_cache", None)
        if self.cached and self.normalize and cache is not None and cache[0] is self._cached_edge_index:
            return cache[1]
        plan = propagation_graph(x, edge_index, edge_weight, self.add_self_loops and self.normalize)
        if self.cached and self.normalize and not isinstance(plan, str):
            graph = plan[0]
            pyg_edges = torch.stack(graph.coo()) if isinstance(edge_index, Graph) else edge_index
            self._cached_edge_index = gcn_norm(
                pyg_edges, edge_weight, x.shape[0], False, self.add_self_loops, self.flow, x.dtype
            )
            self._fused_cache = (self._cached_edge_index, plan)
        return plan
