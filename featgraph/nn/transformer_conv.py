"""``TransformerConv`` (Shi et al.): multi-head scaled dot-product attention over in-edges, PyG's layer on
featgraph's fused score kernel, edge softmax and SpMMs."""

from __future__ import annotations

import math

import torch
import torch_geometric.nn

from ..graph.conversion import GraphLike
from ..ops.attention import dot_scores, softmax_aggregate, weighted_edge_sum
from .graph_input import PairTensor
from .layer_inputs import attention_blocker
from .pyg_layer import FusedLayer


class TransformerConv(FusedLayer, torch_geometric.nn.TransformerConv):
    """PyG's ``TransformerConv`` (constructor, parameters, ``beta``, ``root_weight``, ``edge_dim``, bipartite
    ``(x_src, x_dst)``). ``alpha = softmax_u(q_v . (k_u + W_e e_uv) / sqrt(C))``, ``out_v = sum_u alpha
    (v_u + W_e e_uv)``, computed without PyG's E x heads x C keys, values and messages: the scores are one
    SDDMM, the edge term through ``q_v W_e`` per vertex (``ops.attention.dot_scores``); the values one SpMM;
    the edge term of the output ``W_e sum_u alpha e_uv``, the projection after a per-vertex sum of the raw
    edge features. Attention dropout is ``F.dropout`` on the weights, as PyG's. Edge features with a
    sparse ``adj_t``, and attention weights asked for with one, run PyG's path."""

    def forward(
        self,
        x: PairTensor,
        edge_index: GraphLike,
        edge_attr: torch.Tensor | None = None,
        return_attention_weights: bool | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """As PyG's; ``edge_index`` may also be a ``featgraph.Graph`` (``edge_attr`` in its edge order)."""
        reason = self.fused_blocker(x, edge_index) or attention_blocker(
            self, x, edge_index, edge_attr, return_attention_weights
        )
        if reason:
            return self.fallback(reason, x, edge_index, edge_attr, return_attention_weights)
        heads, channels = self.heads, self.out_channels
        x_src, x_dst, g = self.split(x, edge_index, None)
        if x_dst is None:
            raise ValueError("x: TransformerConv needs the destinations' features, got (x_src, None)")
        query = self.lin_query(x_dst).view(-1, heads, channels)
        key = self.lin_key(x_src).view(-1, heads, channels)
        value = self.lin_value(x_src).view(-1, heads, channels)
        edge, weight = (), None
        if edge_attr is not None:
            weight = self.lin_edge.weight.view(heads, channels, -1)
            edge = (torch.einsum("nhc,hck->nhk", query, weight), edge_attr)
        scores = dot_scores(g, query, key, 1 / math.sqrt(channels), *edge)
        out, alpha, dropped = softmax_aggregate(g, scores, value, self.dropout, self.training)
        if weight is not None:
            out = out + torch.einsum("nhk,hck->nhc", weighted_edge_sum(g, dropped, edge_attr), weight)
        out = out.reshape(-1, heads * channels) if self.concat else out.mean(dim=1)
        if self.root_weight:
            x_r = self.lin_skip(x_dst)
            if self.lin_beta is not None:
                beta = self.lin_beta(torch.cat([out, x_r, out - x_r], dim=-1)).sigmoid()
                out = beta * x_r + (1 - beta) * out
            else:
                out = out + x_r
        if isinstance(return_attention_weights, bool):
            return out, (torch.stack(g.coo()), alpha)
        return out
