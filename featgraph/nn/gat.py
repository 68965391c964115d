"""``GATConv`` (Velickovic et al.): PyG's layer on featgraph's fused attention, edge softmax and aggregation."""

from __future__ import annotations

import torch

from ..ops import gat_attention
from .graph_input import GraphLike, as_graph


class GATConv(torch.nn.Module):
    """Multi-head graph attention, parameters and results as PyG's ``GATConv`` (``lin.weight``, ``att_src``,
    ``att_dst``, ``bias``, ``res.weight``).

    Logits are computed per vertex (n inner products, not E) and, without attention dropout, the softmax
    weights are recomputed inside three fused passes so nothing per edge is stored; with dropout in training
    only E x heads weights exist (see ``ops.gat_attention``). Self loops are removed and one per vertex added,
    as PyG does; the looped graph is cached. Edge features (``edge_dim``) and bipartite inputs are not
    supported.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        negative_slope: float = 0.2,
        dropout: float = 0.0,
        add_self_loops: bool = True,
        edge_dim: int | None = None,
        bias: bool = True,
        residual: bool = False,
    ) -> None:
        super().__init__()
        if edge_dim is not None:
            raise NotImplementedError("GATConv with edge features (edge_dim) is not supported by featgraph yet")
        if not isinstance(in_channels, int):
            raise NotImplementedError("GATConv on bipartite inputs (a pair of in_channels) is not supported yet")
        self.in_channels, self.out_channels, self.heads, self.concat = in_channels, out_channels, heads, concat
        self.negative_slope, self.dropout, self.add_self_loops = negative_slope, dropout, add_self_loops
        total = out_channels * (heads if concat else 1)
        self.lin = torch.nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = torch.nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = torch.nn.Parameter(torch.empty(1, heads, out_channels))
        self.res = torch.nn.Linear(in_channels, total, bias=False) if residual else None
        self.bias = torch.nn.Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for weight in (self.lin.weight, self.att_src, self.att_dst, None if self.res is None else self.res.weight):
            if weight is not None:
                torch.nn.init.xavier_uniform_(weight)  # PyG's glorot
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(
        self, x: torch.Tensor, edge_index: GraphLike, return_attention_weights: bool | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """As PyG: with ``return_attention_weights=True`` also ``(edge_index, alpha)`` of the edges attended over
        (self loops included), alpha (E, heads)."""
        g = as_graph(edge_index, x.shape[0])
        if self.add_self_loops:
            g = g.with_self_loops()
        feat = self.lin(x).view(-1, self.heads, self.out_channels)
        attended = gat_attention(
            g, feat, self.att_src[0], self.att_dst[0], self.negative_slope, self.dropout, self.training,
            return_attention=bool(return_attention_weights),
        )  # fmt: skip
        out, alpha = attended if return_attention_weights else (attended, None)
        out = out.reshape(-1, self.heads * self.out_channels) if self.concat else out.mean(dim=1)
        if self.res is not None:
            out = out + self.res(x)
        if self.bias is not None:
            out = out + self.bias
        return out if alpha is None else (out, (torch.stack(g.coo()), alpha))

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, heads={self.heads}"
