"""``SAGEConv`` (Hamilton et al.): PyG's layer, its mean, sum, max and min aggregations fused."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_geometric.nn
from torch_geometric.nn import aggr as pyg_aggr

from ..graph.conversion import GraphLike
from ..ops import gspmm
from ..ops.linear_sum import linear_sum
from ..ops.precision import with_bias
from .graph_input import PairTensor
from .pyg_layer import FusedLayer, linear_first
from .relation_sum import RelationTerm

_LINEAR_AGGREGATORS = ("mean", "sum")


class SAGEConv(FusedLayer, torch_geometric.nn.SAGEConv):
    """``out = lin_l(aggr_{u -> v} x_u) + lin_r(x_v)``: PyG's ``SAGEConv`` (every ``aggr`` it takes; mean,
    sum, max and min run fused, the others on PyG's path).

    Besides PyG's bipartite forms, on a sampled block (a bipartite ``Graph``) a tensor ``x`` of its sources
    gives the destinations its first rows. ``aggr="pool"`` is GraphSAGE's pooling aggregator (DGL's name):
    ``max_u relu(lin(x_u))``, PyG's ``aggr="max", project=True``. For mean and sum, ``lin_l`` runs before
    the aggregation when that costs fewer multiply-adds (they commute; ``linear_first``).
    """

    def __init__(
        self,
        in_channels: int | tuple[int, int],
        out_channels: int,
        aggr: str | list | pyg_aggr.Aggregation | None = "mean",
        normalize: bool = False,
        root_weight: bool = True,
        project: bool = False,
        bias: bool = True,
        **kwargs,
    ) -> None:
        if aggr == "pool":
            aggr, project = "max", True
        super().__init__(in_channels, out_channels, aggr, normalize, root_weight, project, bias, **kwargs)

    def forward(self, x: PairTensor, edge_index: GraphLike, size: tuple[int, int] | None = None) -> torch.Tensor:
        reason, fused = self.aggregation_inputs(x, edge_index, size)
        if fused is None:
            return self.fallback(reason, x, edge_index, size=size)
        reduce, x_src, x_dst, g = fused
        source = F.relu(self.lin(x_src)) if self.project else x_src
        root = self.root_weight and x_dst is not None
        if reduce in _LINEAR_AGGREGATORS and linear_first(g, source.shape[-1], self.out_channels):
            out = gspmm(g, "copy_lhs", reduce, F.linear(source, self.lin_l.weight), None)
            out = with_bias(out, self.lin_l.bias)
            if root:
                out = out + self.lin_r(x_dst)
        elif root:
            out = linear_sum(gspmm(g, "copy_lhs", reduce, source, None), self.lin_l, x_dst, self.lin_r)
        else:
            out = self.lin_l(gspmm(g, "copy_lhs", reduce, source, None))
        return F.normalize(out, p=2.0, dim=-1) if self.normalize else out

    def relation_term(self, x: PairTensor, edge_index: GraphLike) -> RelationTerm | str:
        """This call as one relation of a sum over relations (``relation_sum``), or why it cannot be one."""
        if self.project or self.normalize:
            return "project or normalize: not linear in the aggregation"
        reason, fused = self.aggregation_inputs(x, edge_index, None)
        if fused is None:
            return reason
        reduce, x_src, x_dst, g = fused
        root = self.root_weight and x_dst is not None
        return RelationTerm(reduce, x_src, g, self.lin_l, x_dst if root else None, self.lin_r if root else None)
