"""``AGNNConv`` (Thekumparampil et al.): attention from cosine similarity, PyG's layer on featgraph's ops."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_geometric.nn

from ..graph import Graph
from ..graph.conversion import GraphLike, as_graph
from ..ops import SHORTCUTS, edge_softmax
from .pyg_layer import FusedLayer, weighted_sparse_adj


class AGNNConv(FusedLayer, torch_geometric.nn.AGNNConv):
    """``out_v = sum_u softmax_u(beta cos(x_u, x_v)) x_u`` over in-edges with self loops: PyG's
    ``AGNNConv`` (parameter ``beta``, a buffer when ``requires_grad=False``). Per edge only the scalar
    scores exist (one SDDMM dot product, the fused edge softmax, one weighted SpMM)."""

    def forward(self, x: torch.Tensor, edge_index: GraphLike) -> torch.Tensor:
        if isinstance(x, (tuple, list)) or isinstance(edge_index, Graph) and edge_index.is_bipartite:
            raise ValueError("x: AGNNConv takes one vertex set, not a bipartite graph")
        reason = self.fused_blocker(x, edge_index) or (None if self.fused_reduce() == "sum" else f"aggr={self.aggr}")
        if reason is None:
            g = as_graph(edge_index, x.shape[0])
            if weighted_sparse_adj(edge_index, g):
                reason = "a sparse adj_t with values"
        if reason is not None:
            return self.fallback(reason, x, edge_index)
        if self.add_self_loops:
            g = g.with_self_loops()
        unit = F.normalize(x, p=2.0, dim=-1)
        alpha = edge_softmax(g, self.beta * SHORTCUTS["u_dot_v"](g, unit, unit))
        return SHORTCUTS["u_mul_e_sum"](g, x, alpha)
