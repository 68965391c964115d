"""``GINConv`` (Xu et al.): ``nn((1 + eps) x_v + sum_u x_u)``, PyG's layer on featgraph's SpMM."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_geometric.nn

from ..graph.conversion import GraphLike
from ..ops import gspmm
from ..ops.precision import with_bias
from .graph_input import PairTensor
from .pyg_layer import FusedLayer, linear_first


class GINConv(FusedLayer, torch_geometric.nn.GINConv):
    """Graph isomorphism layer: PyG's ``GINConv`` (``nn``, ``eps``, ``train_eps``, any ``aggr``; sum, mean,
    max and min run fused).

    For sum and mean, when ``nn`` begins with a ``Linear``, that linear map runs before the aggregation where
    that costs fewer multiply-adds (it commutes with it; ``linear_first``).
    """

    def forward(self, x: PairTensor, edge_index: GraphLike, size: tuple[int, int] | None = None) -> torch.Tensor:
        """``nn((1 + eps) x_dst + aggr_u x_src[u])``; ``x`` a tensor or PyG's pair ``(x_src, x_dst)``."""
        reason, fused = self.aggregation_inputs(x, edge_index, size)
        if fused is None:
            return self.fallback(reason, x, edge_index, size=size)
        reduce, x_src, x_dst, g = fused
        first, rest = _leading_linear(self.nn)
        project = (
            reduce in ("sum", "mean") and first is not None and linear_first(g, first.in_features, first.out_features)
        )
        if project:  # the Linear commutes with the aggregation: apply it first
            pair = isinstance(x, (tuple, list))
            x_src = F.linear(x_src, first.weight)
            x_dst = x_src[: g.num_dst_nodes] if not pair else None if x_dst is None else F.linear(x_dst, first.weight)
        out = gspmm(g, "copy_lhs", reduce, x_src, None)
        if x_dst is not None:
            out = out + (1 + self.eps) * x_dst
        if not project:
            return self.nn(out)
        return rest(with_bias(out.to(x_src.dtype), first.bias))  # the dtype Linear gives


def _leading_linear(nn: torch.nn.Module) -> tuple[torch.nn.Linear | None, torch.nn.Module]:
    """``nn`` split as (its first Linear, the rest), or (None, nn) when it does not start with one."""
    if isinstance(nn, torch.nn.Linear):
        return nn, torch.nn.Identity()
    if isinstance(nn, torch.nn.Sequential) and len(nn) and isinstance(nn[0], torch.nn.Linear):
        return nn[0], nn[1:]
    return None, nn
