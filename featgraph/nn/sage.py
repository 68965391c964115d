"""``SAGEConv`` (Hamilton et al.): PyG's layer with mean, sum, max, min and pool aggregators."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..ops import gspmm
from .graph_input import GraphLike, PairTensor, split_input

AGGREGATORS = ("mean", "sum", "max", "min", "pool")
_LINEAR_AGGREGATORS = ("mean", "sum")


class SAGEConv(torch.nn.Module):
    """``out = lin_l(aggr_{u -> v} x_u) + lin_r(x_v)``, parameters and results as PyG's ``SAGEConv``.

    ``in_channels`` may be a pair (sources, destinations) for bipartite inputs, as PyG's; ``x`` a tensor or a
    pair ``(x_src, x_dst)``, ``size`` PyG's ``(num_src, num_dst)``, and on a sampled block (a bipartite
    ``Graph``) a tensor ``x`` of its sources gives the destinations its first rows.
    ``aggr="pool"`` is GraphSAGE's pooling aggregator (DGL's name): ``max_u relu(lin(x_u))``, the same as
    PyG's ``SAGEConv(aggr="max", project=True)`` and with its parameter names. For mean and sum, ``lin_l``
    runs before the aggregation when that makes the aggregated features narrower (they commute).
    """

    def __init__(
        self,
        in_channels: int | tuple[int, int],
        out_channels: int,
        aggr: str = "mean",
        normalize: bool = False,
        root_weight: bool = True,
        project: bool = False,
        bias: bool = True,
    ) -> None:
        super().__init__()
        aggr = "sum" if aggr == "add" else aggr
        if aggr not in AGGREGATORS:
            raise ValueError(f"aggr must be one of {AGGREGATORS} (or 'add'), got {aggr!r}")
        if aggr == "pool":
            aggr, project = "max", True
        self.in_channels, self.out_channels, self.aggr = in_channels, out_channels, aggr
        self.normalize, self.root_weight, self.project = normalize, root_weight, project
        in_src, in_dst = in_channels if isinstance(in_channels, (tuple, list)) else (in_channels, in_channels)
        if project:
            self.lin = torch.nn.Linear(in_src, in_src, bias=True)
        self.lin_l = torch.nn.Linear(in_src, out_channels, bias=bias)
        self.lin_r = torch.nn.Linear(in_dst, out_channels, bias=False) if root_weight else None

    def reset_parameters(self) -> None:
        """Initialise the parameters as PyG's layer of the same name does."""
        for lin in (getattr(self, "lin", None), self.lin_l, self.lin_r):
            if lin is not None:
                lin.reset_parameters()

    def forward(self, x: PairTensor, edge_index: GraphLike, size: tuple[int, int] | None = None) -> torch.Tensor:
        x, x_dst, g = split_input(x, edge_index, size)
        source = F.relu(self.lin(x)) if self.project else x
        if self.aggr in _LINEAR_AGGREGATORS and self.out_channels < source.shape[-1]:
            out = gspmm(g, "copy_lhs", self.aggr, F.linear(source, self.lin_l.weight), None)
            out = out if self.lin_l.bias is None else out + self.lin_l.bias
        else:
            out = self.lin_l(gspmm(g, "copy_lhs", self.aggr, source, None))
        if self.lin_r is not None and x_dst is not None:
            out = out + self.lin_r(x_dst)
        return F.normalize(out, p=2.0, dim=-1) if self.normalize else out

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, aggr={self.aggr!r}"
