"""``GATConv`` (Velickovic et al.): PyG's layer on featgraph's fused attention, edge softmax and aggregation."""

from __future__ import annotations

import torch

from ..ops import gat_attention
from .graph_input import GraphLike, PairTensor, split_input


class GATConv(torch.nn.Module):
    """Multi-head graph attention, parameters and results as PyG's ``GATConv`` (``lin.weight``, or
    ``lin_src.weight`` and ``lin_dst.weight`` for a pair of ``in_channels``; ``att_src``, ``att_dst``,
    ``bias``, ``res.weight``). Bipartite inputs as PyG's: ``x = (x_src, x_dst)``, ``size``, or a tensor of a
    sampled block's sources whose first rows are its destinations.

    Logits are computed per vertex (n inner products, not E) and, without attention dropout, the softmax
    weights are recomputed inside three fused passes so nothing per edge is stored; with dropout in training
    only E x heads weights exist (see ``ops.gat_attention``). Self loops are removed and one per vertex added,
    as PyG does (on a bipartite graph, destination v's loop comes from source v); the looped graph is cached.
    Edge features (``edge_dim``) are not supported.
    """

    def __init__(
        self,
        in_channels: int | tuple[int, int],
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
        self.in_channels, self.out_channels, self.heads, self.concat = in_channels, out_channels, heads, concat
        self.negative_slope, self.dropout, self.add_self_loops = negative_slope, dropout, add_self_loops
        total = out_channels * (heads if concat else 1)
        self.lin = self.lin_src = self.lin_dst = None
        if isinstance(in_channels, int):
            self.lin = torch.nn.Linear(in_channels, heads * out_channels, bias=False)
        else:
            self.lin_src = torch.nn.Linear(in_channels[0], heads * out_channels, bias=False)
            self.lin_dst = torch.nn.Linear(in_channels[1], heads * out_channels, bias=False)
        self.att_src = torch.nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = torch.nn.Parameter(torch.empty(1, heads, out_channels))
        in_dst = in_channels if isinstance(in_channels, int) else in_channels[1]
        self.res = torch.nn.Linear(in_dst, total, bias=False) if residual else None
        self.bias = torch.nn.Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise the parameters as PyG's layer of the same name does."""
        for layer in (self.lin, self.lin_src, self.lin_dst, self.res):
            if layer is not None:
                torch.nn.init.xavier_uniform_(layer.weight)  # PyG's glorot
        for weight in (self.att_src, self.att_dst):
            torch.nn.init.xavier_uniform_(weight)  # PyG's glorot
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(
        self,
        x: PairTensor,
        edge_index: GraphLike,
        return_attention_weights: bool | None = None,
        size: tuple[int, int] | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """As PyG: with ``return_attention_weights=True`` also ``(edge_index, alpha)`` of the edges attended over
        (self loops included), alpha (E, heads)."""
        x_src, x_dst, g = split_input(x, edge_index, size)
        if self.add_self_loops:
            g = g.with_self_loops()
        shape = (-1, self.heads, self.out_channels)
        lin_src, lin_dst = (self.lin, self.lin) if self.lin is not None else (self.lin_src, self.lin_dst)
        feat = lin_src(x_src).view(shape)
        if x_dst is None:  # PyG's (x_src, None): the destinations add no logit of their own
            feat_dst = torch.zeros(g.num_dst_nodes, *shape[1:], dtype=feat.dtype, device=feat.device)
        elif lin_dst is lin_src and not isinstance(x, (tuple, list)):
            feat_dst = None  # the destinations are the sources' first rows: their features are feat's
        else:
            feat_dst = lin_dst(x_dst).view(shape)
        attended = gat_attention(
            g, feat, self.att_src[0], self.att_dst[0], self.negative_slope, self.dropout, self.training,
            return_attention=bool(return_attention_weights), feat_dst=feat_dst,
        )  # fmt: skip
        out, alpha = attended if return_attention_weights else (attended, None)
        out = out.reshape(-1, self.heads * self.out_channels) if self.concat else out.mean(dim=1)
        if self.res is not None and x_dst is not None:
            out = out + self.res(x_dst)
        if self.bias is not None:
            out = out + self.bias
        return out if alpha is None else (out, (torch.stack(g.coo()), alpha))

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, heads={self.heads}"
