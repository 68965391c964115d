"""``RelGraphConv``: DGL's relational graph convolution (R-GCN) with DGL's constructor, parameters and forward,
its message passing one ``ops.relational_aggregate`` call.

DGL's layer runs ``update_all`` with a message function that multiplies every edge's source row by its
relation's weight (``TypedLinear``: an E x out message tensor, and for the "bdd" regularizer an E x blocks x
in/blocks x out/blocks weight per edge). Here the aggregation multiplies each (relation, vertex) pair once and
never forms a per-edge message or weight; the rest (layer norm, bias, self loop, activation, dropout) is
DGL's, in DGL's order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..graph import Graph
from ..ops import relational_aggregate
from .typed_linear import TypedLinear


class RelGraphConv(nn.Module):
    """DGL's ``RelGraphConv(in_feat, out_feat, num_rels, regularizer=None, num_bases=None, bias=True,
    activation=None, self_loop=True, dropout=0.0, layer_norm=False)``; ``forward(g, feat, etypes, norm=None,
    *, presorted=False)`` with ``g`` a ``featgraph.Graph`` (bipartite too: a sampled block) or a DGL graph,
    which is converted on each call (pass a ``Graph`` to keep its formats between calls). A DGL state dict
    loads as it is."""

    def __init__(
        self, in_feat: int, out_feat: int, num_rels: int, regularizer: str | None = None,
        num_bases: int | None = None, bias: bool = True, activation: Callable | None = None,
        self_loop: bool = True, dropout: float = 0.0, layer_norm: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        if regularizer is not None and num_bases is None:
            num_bases = num_rels  # DGL's default
        self.linear_r = TypedLinear(in_feat, out_feat, num_rels, regularizer, num_bases)
        self.bias, self.activation, self.self_loop, self.layer_norm = bias, activation, self_loop, layer_norm
        if bias:
            self.h_bias = nn.Parameter(torch.zeros(out_feat))
        if layer_norm:
            self.layer_norm_weight = nn.LayerNorm(out_feat, elementwise_affine=True)
        if self_loop:
            self.loop_weight = nn.Parameter(torch.empty(in_feat, out_feat))
            nn.init.xavier_uniform_(self.loop_weight, gain=nn.init.calculate_gain("relu"))
        self.dropout = nn.Dropout(dropout)

    def relation_weights(self) -> torch.Tensor:
        """Each relation's weight in the form ``relational_aggregate`` takes: (relations, in, out), or the
        blocks (relations, blocks, in / blocks, out / blocks) for the "bdd" regularizer."""
        linear = self.linear_r
        if linear.regularizer == "bdd":
            return linear.W.view(linear.num_types, linear.num_bases, linear.submat_in, linear.submat_out)
        return linear.get_weight()

    def forward(
        self, g: Graph | Any, feat: torch.Tensor, etypes: torch.Tensor, norm: torch.Tensor | None = None,
        *, presorted: bool = False,
    ) -> torch.Tensor:  # fmt: skip
        """New features of ``g``'s destination nodes: ``sum over in-edges e = (u -> v) of norm[e] * feat[u] @
        W[etypes[e]]``, then DGL's layer norm, bias, self loop (``feat[:num_dst] @ loop_weight``), activation
        and dropout. ``presorted`` (edges grouped by type) is DGL's speed hint; the aggregation needs none."""
        graph = g if isinstance(g, Graph) else Graph.from_dgl(g)
        etypes = torch.as_tensor(etypes, device=feat.device)
        edge_weight = None if norm is None else norm.reshape(-1)
        if edge_weight is not None and edge_weight.numel() != graph.num_edges:
            raise ValueError(f"norm: expected one value per edge ({graph.num_edges}), got shape {tuple(norm.shape)}")
        if edge_weight is not None and edge_weight.requires_grad:
            raise ValueError("norm: a constant per edge is supported, not one that requires grad")
        h = relational_aggregate(graph, feat, self.relation_weights(), etypes, "sum", edge_weight)
        if self.layer_norm:
            h = self.layer_norm_weight(h)
        if self.bias:
            h = h + self.h_bias
        if self.self_loop:
            h = h + feat[: graph.num_dst_nodes] @ self.loop_weight
        if self.activation:
            h = self.activation(h)
        return self.dropout(h)
