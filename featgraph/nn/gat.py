"""``GATConv`` (Velickovic et al.): PyG's layer on featgraph's fused attention, edge softmax and aggregation."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_geometric.nn

from ..graph import Graph
from ..graph.conversion import GraphLike
from ..ops import SHORTCUTS, edge_softmax, gat_attention, gsddmm
from ..ops.precision import with_bias
from .graph_input import PairTensor
from .pyg_layer import FusedLayer, project

# fill_value strings whose loop edge term is linear in the incoming edges' terms: PyG's reduction of them
_LINEAR_FILLS = {"mean": "mean", "add": "sum", "sum": "sum"}

Attended = torch.Tensor | tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]


class GATConv(FusedLayer, torch_geometric.nn.GATConv):
    """Multi-head graph attention: PyG's ``GATConv`` (constructor, parameters, ``edge_dim``, ``fill_value``,
    hooks, ...), its forward on featgraph's fused ops. Bipartite inputs as PyG's, and on a sampled block (a
    bipartite ``Graph``) a tensor ``x`` of its sources whose first rows are its destinations.

    Logits are computed per vertex (n inner products, not E) and, without edge features or attention
    dropout, the softmax weights are recomputed inside three fused passes so nothing per edge is stored;
    otherwise only E x heads scores exist (see ``ops.gat_attention``). Edge features enter as one logit per
    edge and head, ``edge_attr @ M`` with ``M`` folded from ``lin_edge`` and ``att_edge``, so no E x heads x
    channels tensor is made; a self loop's term is ``fill_value`` times ``M``, or the mean (sum for
    ``"add"``) of its destination's incoming terms. Self loops are removed and one per vertex added, as PyG
    does; the looped graph is cached. Attention weights asked for with a torch sparse ``adj_t``, and the
    ``fill_value`` reductions max, min and mul, run PyG's path.
    """

    def forward(
        self,
        x: PairTensor,
        edge_index: GraphLike,
        edge_attr: torch.Tensor | None = None,
        size: tuple[int, int] | None = None,
        return_attention_weights: bool | None = None,
    ) -> Attended:
        """As PyG: with ``return_attention_weights=True`` also ``(edge_index, alpha)`` of the edges attended
        over (self loops included), alpha (E, heads)."""
        reason = self.fused_blocker(x, edge_index) or self._edge_blocker(edge_index, edge_attr)
        if reason is None and return_attention_weights and isinstance(edge_index, torch.Tensor):
            reason = None if edge_index.layout == torch.strided else "attention weights of a sparse adj_t"
        if reason is not None:
            return self.fallback(
                reason, x, edge_index, edge_attr, size=size, return_attention_weights=return_attention_weights
            )
        pair = isinstance(x, (tuple, list))
        x_src, x_dst, g = self.split(x, edge_index, size)
        edge_logit = None if edge_attr is None or self.lin_edge is None else self._edge_logits(g, edge_attr)
        if self.add_self_loops:
            g = g.with_self_loops()
        shape = (-1, self.heads, self.out_channels)
        lin_src, lin_dst = (self.lin, self.lin) if self.lin is not None else (self.lin_src, self.lin_dst)
        feat = project(lin_src, x_src).view(shape)
        if x_dst is None:  # PyG's (x_src, None): the destinations add no logit of their own
            feat_dst = torch.zeros(g.num_dst_nodes, *shape[1:], dtype=feat.dtype, device=feat.device)
        elif lin_dst is lin_src and not pair:
            feat_dst = None  # the destinations are the sources' first rows: their features are feat's
        else:
            feat_dst = project(lin_dst, x_dst).view(shape)
        weights, dropped = bool(return_attention_weights), self.training and self.dropout > 0
        if edge_logit is None and not (weights and dropped):
            # the fused passes give the output whether or not the weights are asked for, so both calls agree
            out = gat_attention(
                g, feat, self.att_src[0], self.att_dst[0], self.negative_slope, self.dropout, self.training,
                feat_dst=feat_dst,
            )  # fmt: skip
            alpha = self._attention_weights(g, feat, feat_dst, None) if weights else None
        elif edge_logit is None:  # the dropped weights, with the mask the output used
            out, alpha = gat_attention(
                g, feat, self.att_src[0], self.att_dst[0], self.negative_slope, self.dropout, self.training,
                return_attention=True, feat_dst=feat_dst,
            )  # fmt: skip
        else:
            alpha = F.dropout(self._attention_weights(g, feat, feat_dst, edge_logit), self.dropout, self.training)
            out = SHORTCUTS["u_mul_e_sum"](g, feat, alpha.unsqueeze(-1))
            alpha = alpha if weights else None
        out = out.reshape(-1, self.heads * self.out_channels) if self.concat else out.mean(dim=1)
        if self.res is not None and x_dst is not None:
            out = out + self.res(x_dst)
        out = with_bias(out, self.bias)
        return out if alpha is None else (out, (torch.stack(g.coo()), alpha))

    def _edge_blocker(self, edge_index: GraphLike, edge_attr: torch.Tensor | None) -> str | None:
        """Why edge features keep this call off the fused path, or None."""
        if edge_attr is None or self.lin_edge is None:
            return None
        if not (isinstance(edge_index, Graph) or edge_index.layout == torch.strided):
            return "edge_attr with a sparse adj_t"
        if self.add_self_loops and isinstance(self.fill_value, str) and self.fill_value not in _LINEAR_FILLS:
            return f"fill_value={self.fill_value!r}"
        return None

    def _edge_logits(self, g: Graph, edge_attr: torch.Tensor) -> torch.Tensor:
        """Each edge's logit term (E, heads), in the order of ``g.with_self_loops()`` when loops are added:
        ``edge_attr @ M``, ``M[k, h] = sum_c lin_edge.weight[h * C + c, k] * att_edge[h, c]``."""
        attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
        if attr.shape[0] != g.num_edges:
            raise ValueError(f"edge_attr: expected one row per edge ({g.num_edges}), got {attr.shape[0]}")
        weight = self.lin_edge.weight.view(self.heads, self.out_channels, -1)
        fold = torch.einsum("hck,hc->kh", weight, self.att_edge[0])
        logit = attr.to(fold.dtype) @ fold
        if not self.add_self_loops:
            return logit
        src, dst = g.coo()
        kept = logit[src != dst]
        loops = min(g.num_src_nodes, g.num_dst_nodes)
        if isinstance(self.fill_value, str):
            reduce = _LINEAR_FILLS[self.fill_value]
            dst_kept = dst[src != dst]
            total = torch.zeros(g.num_dst_nodes, self.heads, dtype=logit.dtype, device=logit.device)
            loop = total.index_add(0, dst_kept, kept)[:loops]
            if reduce == "mean":  # PyG's scatter mean: 0 where nothing comes in
                loop = loop / torch.bincount(dst_kept, minlength=g.num_dst_nodes)[:loops].clamp(min=1).unsqueeze(1)
        else:
            fill = torch.as_tensor(self.fill_value, dtype=fold.dtype, device=fold.device)
            loop = (fill.expand(fold.shape[0]) @ fold).expand(loops, self.heads)
        return torch.cat([kept, loop])

    def _attention_weights(
        self, g: Graph, feat: torch.Tensor, feat_dst: torch.Tensor | None, edge_logit: torch.Tensor | None
    ) -> torch.Tensor:
        """GAT's softmax weights (E, heads) by the ops one by one, with an extra logit per edge if given."""
        feat_dst = feat[: g.num_dst_nodes] if feat_dst is None else feat_dst
        logit_src, logit_dst = (feat * self.att_src).sum(-1), (feat_dst * self.att_dst).sum(-1)
        scores = gsddmm(g, "add", logit_src, logit_dst, "u", "v")
        scores = scores if edge_logit is None else scores + edge_logit
        return edge_softmax(g, F.leaky_relu(scores, self.negative_slope))
