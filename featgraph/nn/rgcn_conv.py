"""``RGCNConv`` and ``FastRGCNConv`` (Schlichtkrull et al.): PyG's layers, their relational aggregation one
``ops.relational_aggregate`` call instead of PyG's loop over relations (``RGCNConv``) or its per-edge weight
tensor ``weight[edge_type]`` of shape (E, in, out) (``FastRGCNConv``)."""

from __future__ import annotations

from typing import Any

import torch
import torch_geometric.nn

from ..graph import Graph, HeteroGraph
from ..graph.conversion import GraphLike
from ..ops import relational_aggregate
from .graph_input import PairTensor
from .pyg_layer import FusedLayer

_REDUCE = {"mean": "mean", "add": "sum", "sum": "sum"}  # PyG's aggr -> relational_aggregate's reduce
_DTYPES = (torch.float32, torch.float64)


class RGCNConv(FusedLayer, torch_geometric.nn.RGCNConv):
    """``x'_v = x_v Theta_root + sum_r sum_{u in N_r(v)} c_{v,r} x_u Theta_r + b``: PyG's ``RGCNConv``
    (constructor, ``num_bases`` and ``num_blocks`` decompositions, parameters, hooks, ...), its aggregation one
    fused ``relational_aggregate`` (``c_{v,r}`` is ``1 / |N_r(v)|`` for ``aggr="mean"``, 1 for ``"add"``/
    ``"sum"``).

    The relation weights are formed as PyG forms them (``comp @ weight`` for bases; for blocks, each
    relation's diagonal blocks, multiplied block by block), then the op takes the cheaper of transforming each
    (relation, source) pair or each (relation, destination) pair's aggregate; no per-edge weight exists.
    ``edge_index`` may also be a ``Graph`` (bipartite too) or a ``HeteroGraph`` (its own edge types; ``x``
    then holds all node types' rows, ``hg.stack``). ``is_sorted`` is PyG's hint that the edges come sorted by
    type: featgraph sorts once per graph and keeps the result, so sorted or not, the hint changes nothing.
    ``strategy`` (an attribute, ``"auto"`` unless set) is ``relational_aggregate``'s: ``"transform_first"``,
    ``"aggregate_first"`` or ``"fused"`` fix the way. PyG's path runs featureless input (``x`` None or node
    indices), ``aggr="max"``, torch_sparse's ``SparseTensor`` and 16-bit features.
    """

    strategy: str = "auto"

    def forward(
        self, x: PairTensor | None, edge_index: GraphLike | HeteroGraph, edge_type: torch.Tensor | None = None
    ) -> torch.Tensor:
        if isinstance(edge_index, HeteroGraph):
            if edge_type is not None:
                raise ValueError("edge_type: a HeteroGraph carries its own edge types; pass edge_type only with edges")
            edge_index, edge_type = edge_index.graph, edge_index.etype
        reason = self._blocker(x, edge_index, edge_type)
        if reason is not None:
            return self.fallback(reason, x, edge_index, edge_type)
        x_src, x_dst, graph = self.split(x, edge_index, None)
        out = relational_aggregate(
            graph, x_src, self.relation_weights(), edge_type, _REDUCE[self.aggr], strategy=self.strategy
        )
        if self.root is not None:
            out = torch.addmm(out, x_dst, self.root)
        return out if self.bias is None else out + self.bias

    def _blocker(self, x: Any, edge_index: Any, edge_type: Any) -> str | None:
        """Why the fused path cannot take this call (else None)."""
        if x is None or isinstance(x, (tuple, list)) and any(part is None for part in x):
            return "featureless input (x None: node indices)"
        reason = self.fused_blocker(x, edge_index)
        if reason is not None:
            return reason
        if self.aggr not in _REDUCE:
            return f"aggr={self.aggr!r}"
        for part in x if isinstance(x, (tuple, list)) else (x,):
            if part.dtype not in _DTYPES:
                return f"x of dtype {part.dtype}"
        if isinstance(edge_index, torch.Tensor) and edge_index.layout != torch.strided:
            return "a torch sparse adjacency (its values are the edge types)"
        if edge_type is None:
            return "no edge_type"
        return None

    def relation_weights(self) -> torch.Tensor:
        """Each relation's (in, out) weight (PyG's basis combination for bases), or for ``num_blocks`` its
        (blocks, in / blocks, out / blocks) diagonal blocks, which ``relational_aggregate`` takes as they are."""
        weight = self.weight
        if self.num_bases is not None:
            return (self.comp @ weight.view(self.num_bases, -1)).view(
                self.num_relations, self.in_channels_l, self.out_channels
            )
        return weight  # (relations, blocks, in / blocks, out / blocks) for blocks: the op multiplies only those

    def fallback(self, reason: str, x: Any, edge_index: Any, *args: Any, **kwargs: Any) -> Any:
        """PyG's forward; a ``Graph`` goes as its ``edge_index`` (PyG's RGCNConv takes no ``size``, so a
        bipartite one needs ``x`` as a pair)."""
        if isinstance(edge_index, Graph) and edge_index.is_bipartite and isinstance(x, torch.Tensor):
            x = (x, x[: edge_index.num_dst_nodes])
        return super().fallback(reason, x, edge_index, *args, **kwargs)


class FastRGCNConv(RGCNConv, torch_geometric.nn.FastRGCNConv):
    """PyG's ``FastRGCNConv`` (same parameters and results as ``RGCNConv``; PyG builds the (E, in, out) tensor
    ``weight[edge_type]`` for speed): here the same fused relational aggregation as ``RGCNConv``, so no per-edge
    weight. ``aggr`` add, sum or mean, as PyG's."""
