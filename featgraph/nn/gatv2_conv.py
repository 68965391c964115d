"""``GATv2Conv`` (Brody et al.): dynamic attention ``att . leaky_relu(W_l x_u + W_r x_v + W_e e_uv)``, PyG's
layer on featgraph's fused score kernel, edge softmax and SpMM."""

from __future__ import annotations

import torch
import torch_geometric.nn
from torch_geometric.utils import add_self_loops, remove_self_loops

from ..graph import Graph
from ..graph.conversion import GraphLike
from ..ops.attention import gatv2_scores, softmax_aggregate
from ..ops.precision import with_bias
from .graph_input import PairTensor
from .layer_inputs import attention_blocker
from .pyg_layer import FusedLayer


def looped_edge_attr(graph: Graph, edge_attr: torch.Tensor, fill_value: float | torch.Tensor | str) -> torch.Tensor:
    """``edge_attr`` of ``graph.with_self_loops()``: the non-loop edges' rows, then one per loop filled as
    PyG's ``add_self_loops(fill_value=...)`` fills them (a constant, a tensor, or a reduction of the
    vertex's in-edges such as "mean")."""
    edge_index = torch.stack(graph.coo())
    kept, attr = remove_self_loops(edge_index, edge_attr)
    return add_self_loops(kept, attr, fill_value, min(graph.num_src_nodes, graph.num_dst_nodes))[1]


class GATv2Conv(FusedLayer, torch_geometric.nn.GATv2Conv):
    """PyG's ``GATv2Conv`` (constructor, parameters, ``share_weights``, ``edge_dim``, ``fill_value``,
    ``residual``, bipartite ``(x_src, x_dst)``), its attention fused: the scores are one SDDMM whose
    message forms ``x_l[u] + x_r[v] + lin_edge(e)`` per edge and head in registers (``ops.attention.
    gatv2_scores``), so only E x heads scores and weights exist, never PyG's E x heads x C sums (edge
    features are projected first, as PyG does); then the edge softmax and one SpMM. Attention dropout is
    ``F.dropout`` on the weights, as PyG's. Edge features with a sparse ``adj_t``, and attention weights
    asked for with one, run PyG's path."""

    def forward(
        self,
        x: PairTensor,
        edge_index: GraphLike,
        edge_attr: torch.Tensor | None = None,
        return_attention_weights: bool | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """As PyG's; ``edge_index`` may also be a ``featgraph.Graph`` (``edge_attr`` in its edge order)."""
        reason = self.fused_blocker(x, edge_index) or attention_blocker(
            self, x, edge_index, edge_attr, return_attention_weights, dims=(1, 2)
        )
        if edge_attr is not None and self.add_self_loops and torch.compiler.is_compiling():
            reason = reason or "edge features of added self loops in traced code (their rows depend on the edges)"
        if reason:
            return self.fallback(reason, x, edge_index, edge_attr, return_attention_weights)
        heads, channels = self.heads, self.out_channels
        x_src, x_dst, g = self.split(x, edge_index, None)
        if x_dst is None:
            raise ValueError("x: GATv2Conv needs the destinations' features, got (x_src, None)")
        feat_src = self.lin_l(x_src).view(-1, heads, channels)
        if self.share_weights and not isinstance(x, (tuple, list)):
            feat_dst = feat_src[: g.num_dst_nodes]
        else:
            feat_dst = self.lin_r(x_dst).view(-1, heads, channels)
        edge = ()
        if edge_attr is not None:
            edge_attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
            if self.add_self_loops:
                edge_attr = looped_edge_attr(g, edge_attr, self.fill_value)
            edge = (self.lin_edge(edge_attr).view(-1, heads, channels),)
        if self.add_self_loops:
            g = g.with_self_loops()
        scores = gatv2_scores(g, feat_src, feat_dst, self.att[0], self.negative_slope, *edge)
        out, _, alpha = softmax_aggregate(g, scores, feat_src, self.dropout, self.training)
        out = out.reshape(-1, heads * channels) if self.concat else out.mean(dim=1)
        if self.res is not None:
            out = out + self.res(x_dst)
        out = with_bias(out, self.bias)
        if return_attention_weights:
            return out, (torch.stack(g.coo()), alpha)
        return out
