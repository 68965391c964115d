"""``GINEConv`` (Hu et al.): GIN with edge features, ``nn((1 + eps) x_v + sum_u relu(x_u + lin(e_uv)))``,
PyG's layer on one fused SpMM."""

from __future__ import annotations

import torch
import torch_geometric.nn

from ..graph.conversion import GraphLike
from ..ops.attention import relu_edge_sum
from .graph_input import PairTensor
from .layer_inputs import edge_attr_blocker
from .pyg_layer import FusedLayer


class GINEConv(FusedLayer, torch_geometric.nn.GINEConv):
    """PyG's ``GINEConv`` (constructor, ``nn``, ``eps``/``train_eps``, ``edge_dim``'s ``lin``, bipartite
    ``(x_src, x_dst)`` and ``size``), its aggregation one fused SpMM of ``relu(x_u + lin(e_uv))``
    (``ops.attention.relu_edge_sum``): neither the messages nor, with ``edge_dim``, the projected edge
    features are stored; the backward makes one E x F tensor (the messages' gradient). A sparse ``adj_t``
    runs PyG's path."""

    def forward(
        self,
        x: PairTensor,
        edge_index: GraphLike,
        edge_attr: torch.Tensor | None = None,
        size: tuple[int, int] | None = None,
    ) -> torch.Tensor:
        """As PyG's; ``edge_index`` may also be a ``featgraph.Graph`` (``edge_attr`` in its edge order)."""
        reason = self.fused_blocker(x, edge_index) or self._blocker(x, edge_index, edge_attr)
        if reason:
            return self.fallback(reason, x, edge_index, edge_attr, size)
        x_src, x_dst, g = self.split(x, edge_index, size)
        lin = self.lin
        out = relu_edge_sum(g, x_src, edge_attr, *(() if lin is None else (lin.weight, lin.bias)))
        if x_dst is not None:
            out = out + (1 + self.eps) * x_dst
        return self.nn(out)

    def _blocker(self, x: PairTensor, edge_index: GraphLike, edge_attr: torch.Tensor | None) -> str | None:
        if edge_attr is None:
            raise ValueError("edge_attr: GINEConv needs edge features (use GINConv without them)")
        return edge_attr_blocker(x, edge_index, edge_attr, dims=(2,))
