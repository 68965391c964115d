"""``GraphConv`` (Morris et al.): ``W_1 x_v + W_2 aggr_u e_uv x_u``, PyG's layer on featgraph's SpMM."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_geometric.nn

from ..graph import Graph
from ..graph.conversion import GraphLike
from ..ops import gspmm
from ..ops.linear_sum import linear_sum
from ..ops.precision import with_bias
from .graph_input import PairTensor
from .pyg_layer import FusedLayer, linear_first
from .relation_sum import RelationTerm


def weighted_aggregate(g: Graph, x: torch.Tensor, weight: torch.Tensor | None, reduce: str) -> torch.Tensor:
    """``reduce_{e = (u -> v)} w_e x_u`` (``w`` all 1 when None) as one SpMM."""
    if weight is None:
        return gspmm(g, "copy_lhs", reduce, x, None)
    return gspmm(g, "mul", reduce, x, weight.unsqueeze(1))


class GraphConv(FusedLayer, torch_geometric.nn.GraphConv):
    """``out_v = lin_root(x_v) + lin_rel(aggr_{u -> v} e_uv x_u)``: PyG's ``GraphConv`` (constructor,
    parameters, bipartite ``(x_src, x_dst)`` and ``size``), its aggregation one fused SpMM (sum, mean, max or
    min; the edge weight multiplies inside the kernel). For sum and mean ``lin_rel`` runs before the
    aggregation when that costs fewer multiply-adds (they commute; ``linear_first``). Other aggregations run
    PyG's path."""

    def forward(
        self,
        x: PairTensor,
        edge_index: GraphLike,
        edge_weight: torch.Tensor | None = None,
        size: tuple[int, int] | None = None,
    ) -> torch.Tensor:
        """As PyG's; ``edge_index`` may also be a ``featgraph.Graph`` (its edge weights serve when
        ``edge_weight`` is None)."""
        if isinstance(edge_index, Graph) and edge_weight is None:
            edge_weight = edge_index.edge_weight
        reason = self.fused_blocker(x, edge_index) or self._blocker(x, edge_weight)
        if reason:
            return self.fallback(reason, x, edge_index, edge_weight, size)
        x_src, x_dst, g = self.split(x, edge_index, size)
        weight = g.edge_weight if edge_weight is None else edge_weight
        reduce = self.fused_reduce()
        lin = self.lin_rel
        if reduce in ("sum", "mean") and linear_first(g, lin.weight.shape[1], lin.weight.shape[0]):
            out = weighted_aggregate(g, F.linear(x_src, lin.weight), weight, reduce)
            out = with_bias(out, lin.bias)
            return out if x_dst is None else out + self.lin_root(x_dst)
        aggregated = weighted_aggregate(g, x_src, weight, reduce)
        return lin(aggregated) if x_dst is None else linear_sum(aggregated, lin, x_dst, self.lin_root)

    def relation_term(self, x: PairTensor, edge_index: GraphLike) -> RelationTerm | str:
        """This call (no edge weights) as one relation of a sum over relations (``relation_sum``), or why it
        cannot be one."""
        reason = self.fused_blocker(x, edge_index) or self._blocker(x, None)
        if reason:
            return reason
        x_src, x_dst, g = self.split(x, edge_index, None)
        if g.edge_weight is not None:
            return "edge weights"
        root = None if x_dst is None else self.lin_root
        return RelationTerm(self.fused_reduce(), x_src, g, self.lin_rel, x_dst, root)

    def _blocker(self, x: PairTensor, edge_weight: torch.Tensor | None) -> str | None:
        if self.fused_reduce() is None:
            return f"aggr={self.aggr!r}"
        dtype = (x[0] if isinstance(x, (tuple, list)) else x).dtype
        if edge_weight is not None and edge_weight.dtype != dtype:
            return f"edge_weight of dtype {edge_weight.dtype} with x of {dtype}"
        return None
