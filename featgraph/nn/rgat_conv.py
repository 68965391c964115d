"""``RGATConv`` (Busbridge et al.): PyG's relational graph attention layer, its forward on featgraph's grouped
products, SDDMM, edge softmax and SpMM instead of PyG's per-edge weight tensor ``weight[edge_type]`` of shape
(E, in, heads * out)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
import torch_geometric.nn

from ..graph import Graph, HeteroGraph
from ..graph.conversion import GraphLike
from ..ops import edge_softmax, gsddmm, gspmm, segment_mm
from ..ops.relational import Pairs, block_diagonal, plan
from .pyg_layer import FusedLayer

_DTYPES = (torch.float32, torch.float64)
Attended = torch.Tensor | tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]


class RGATConv(FusedLayer, torch_geometric.nn.RGATConv):
    """PyG's ``RGATConv`` (constructor, parameters, state dict, ``num_bases``/``num_blocks``, both attention
    mechanisms and modes, ``mod``, ``edge_dim``, ``dropout``, hooks, ...), its forward without a per-edge weight.

    Each node is transformed once per relation it takes part in: one grouped product over the (relation,
    source) pairs gives the values and keys, one over the (relation, destination) pairs the queries (by
    ``W_r @ q``); the per-relation weights are formed once per call (bases combined, blocks placed on the
    diagonal). The logits are one SDDMM between the pairs (plus ``edge_attr @ lin_edge.weight^T @ e``), the
    softmax runs over each destination's in-edges (``"across-relation"``) or over its in-edges of each
    relation (``"within-relation"``), and one SpMM weights the source pairs' rows by it, so only
    E x heads x dim attention values exist per edge. The ``mod`` variants act on those values or on the
    aggregate (``"additive"``: plus ``w`` times the unweighted sum; ``"scaled"``, ``"f-scaled"``: times a
    function of the destination's in-degree). ``edge_index`` may also be a ``Graph`` or a ``HeteroGraph``
    (its own edge types). PyG's own forward runs featureless or 16-bit input, an ``aggr`` other than add/sum,
    a sparse adjacency, ``edge_attr`` without ``edge_dim``, a ``size`` with one ``x`` and no ``edge_type``.
    """

    def forward(
        self,
        x: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
        edge_index: GraphLike | HeteroGraph,
        edge_type: torch.Tensor | None = None,
        edge_attr: torch.Tensor | None = None,
        size: tuple[int, int] | None = None,
        return_attention_weights: bool | None = None,
    ) -> Attended:
        """As PyG: with ``return_attention_weights`` a bool, also ``(edge_index, alpha)``, alpha (E, heads * dim)
        the softmax weights (before ``mod`` and dropout)."""
        if isinstance(edge_index, HeteroGraph):
            if edge_type is not None:
                raise ValueError("edge_type: a HeteroGraph carries its own edge types; pass edge_type only with edges")
            edge_index, edge_type = edge_index.graph, edge_index.etype
        reason = self._blocker(x, edge_index, edge_type, edge_attr, size)
        if reason is not None:
            return self.fallback(
                reason, x, edge_index, edge_type, edge_attr, size, return_attention_weights=return_attention_weights
            )
        x_src, x_dst, g = self.split(x, edge_index, size)
        pairs = plan(g, self._checked_types(edge_type, g), self.num_relations)
        sources, destinations = pairs.sources, pairs.destinations
        heads, dim, channels = self.heads, self.dim, self.out_channels
        weight = self.relation_weights()
        values = segment_mm(_rows(x_src, sources), weight, torch.tensor(sources.lengths))
        queries = segment_mm(_rows(x_dst, destinations), weight @ self.q, torch.tensor(destinations.lengths))
        additive = self.attention_mode == "additive-self-attention"
        logits = gsddmm(pairs.between, "add" if additive else "mul", values @ self.k, queries, "u", "v")
        if edge_attr is not None:
            term = self._edge_term(edge_attr, g.num_edges)
            logits = logits + term if additive else logits * term
        if additive:
            logits = F.leaky_relu(logits, self.negative_slope)
        alpha = edge_softmax(pairs.between if self.attention_mechanism == "within-relation" else g, logits)
        weights = alpha
        if self.mod == "f-additive":
            weights = torch.where(alpha > 0, alpha + 1, alpha)
        elif self.mod is None and self.training and self.dropout > 0:
            weights = F.dropout(alpha, self.dropout, training=True)
        rows = values.view(-1, heads, 1, channels)
        out = gspmm(sources.graph, "mul", "sum", rows, weights.view(-1, heads, dim, 1))  # (n, heads, dim, out)
        if self.mod == "additive":
            out = out + self.w * gspmm(sources.graph, "copy_lhs", "sum", rows, None)
        elif self.mod in ("scaled", "f-scaled"):
            out = out * self._degree_scale(g).view(g.num_dst_nodes, 1, 1, -1)
        out = out.reshape(g.num_dst_nodes, -1) if self.concat else out.mean(dim=1).reshape(g.num_dst_nodes, -1)
        out = out if self.bias is None else out + self.bias
        if not isinstance(return_attention_weights, bool):
            return out
        edges = edge_index if isinstance(edge_index, torch.Tensor) else torch.stack(g.coo())
        return out, (edges, alpha)

    def _blocker(self, x: Any, edge_index: Any, edge_type: Any, edge_attr: Any, size: Any) -> str | None:
        """Why the fused path cannot take this call (else None)."""
        parts = x if isinstance(x, (tuple, list)) else (x,)
        if any(part is None for part in parts):
            return "featureless input (x None: node indices) or no x_dst"
        reason = self.fused_blocker(x, edge_index)
        if reason is not None:
            return reason
        if self.fused_reduce() != "sum":
            return f"aggr={self.aggr!r}"
        for part in parts:
            if part.dtype not in _DTYPES:
                return f"x of dtype {part.dtype}"
        if isinstance(edge_index, torch.Tensor) and edge_index.layout != torch.strided:
            return "a torch sparse adjacency"
        if edge_type is None:
            return "no edge_type"
        if edge_attr is not None and self.lin_edge is None:
            return "edge_attr without edge_dim"
        if size is not None and not isinstance(x, (tuple, list)) and size[0] != size[1]:
            return "a bipartite size with one x"
        return None

    def _checked_types(self, edge_type: torch.Tensor, g: Graph) -> torch.Tensor:
        """``edge_type`` as int64 on the graph's device, after checking it holds one relation id per edge."""
        if not isinstance(edge_type, torch.Tensor) or edge_type.is_floating_point() or edge_type.dtype == torch.bool:
            raise TypeError(f"edge_type: expected an integer tensor, got {getattr(edge_type, 'dtype', edge_type)}")
        if edge_type.dim() != 1 or edge_type.numel() != g.num_edges:
            raise ValueError(f"edge_type: expected one relation id per edge ({g.num_edges}), got shape "
                             f"{tuple(edge_type.shape)}")  # fmt: skip
        if edge_type.numel() and (int(edge_type.min()) < 0 or int(edge_type.max()) >= self.num_relations):
            raise IndexError(f"edge_type: relation ids must lie in [0, {self.num_relations}) (num_relations), got "
                             f"[{int(edge_type.min())}, {int(edge_type.max())}]")  # fmt: skip
        return edge_type.to(device=g.device, dtype=torch.int64)

    def relation_weights(self) -> torch.Tensor:
        """Each relation's (in, heads * out) weight: PyG's basis combination, or its blocks on the diagonal."""
        if self.num_bases is not None:
            combined = self.att @ self.basis.view(self.num_bases, -1)
            return combined.view(self.num_relations, self.in_channels, self.heads * self.out_channels)
        return self.weight if self.num_blocks is None else block_diagonal(self.weight)

    def _edge_term(self, edge_attr: torch.Tensor, edges: int) -> torch.Tensor:
        """Each edge's (heads * dim) logit term ``lin_edge(edge_attr) @ e``, as ``edge_attr @ (W^T e)``."""
        attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
        if attr.dim() != 2 or attr.shape[0] != edges:
            raise ValueError(f"edge_attr: expected one row per edge ({edges}), got shape {tuple(edge_attr.shape)}")
        return attr @ (self.lin_edge.weight.t() @ self.e)

    def _degree_scale(self, g: Graph) -> torch.Tensor:
        """Each destination's factor for ``mod="scaled"`` (PyG's two-layer map of its in-degree, (n, out)) or
        ``"f-scaled"`` (its in-degree, (n, 1))."""
        degree = g.in_degrees().to(self.l1.dtype).unsqueeze(-1)
        if self.mod == "f-scaled":
            return degree
        return self.activation(degree @ self.l1 + self.b1) @ self.l2 + self.b2


def _rows(x: torch.Tensor, pairs: Pairs) -> torch.Tensor:
    """Each pair's vertex's row of ``x``, as an SpMM from the vertices to the pairs: its gradient sums each
    vertex's pairs in one parallel SpMM, where indexing's gradient is a serial ``index_put_``."""
    return gspmm(pairs.to_vertex.reverse(), "copy_lhs", "sum", x, None)
