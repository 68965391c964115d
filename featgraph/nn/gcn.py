"""``GCNConv`` (Kipf and Welling): PyG's layer on featgraph's fused normalised aggregation."""

from __future__ import annotations

import torch

from ..ops import gcn_aggregate
from .graph_input import GraphLike, as_graph


class GCNConv(torch.nn.Module):
    """``out = D^-1/2 (A + I) D^-1/2 x W + b``, parameters and results as PyG's ``GCNConv`` (``lin.weight``,
    ``bias``; ``load_state_dict`` of a PyG layer works).

    The normalisation is never materialised per edge: two per-vertex scalings around one aggregation, self
    loops added arithmetically. The linear map goes on whichever side is narrower (it commutes with the
    aggregation). Per-graph data is always cached, so ``cached`` is accepted for compatibility only.
    ``improved`` always means ``A + 2I`` (PyG 2.8's edge_index path applies it only when edge weights are
    given).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        improved: bool = False,
        cached: bool = False,
        add_self_loops: bool | None = None,
        normalize: bool = True,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise ValueError("GCNConv cannot add self loops without normalization (as in PyG)")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.improved, self.cached = improved, cached
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.lin = torch.nn.Linear(in_channels, out_channels, bias=False)
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise the parameters as PyG's layer of the same name does."""
        torch.nn.init.xavier_uniform_(self.lin.weight)  # PyG's glorot
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor, edge_index: GraphLike, edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        g = as_graph(edge_index, x.shape[0])
        weight = g.edge_weight if edge_weight is None else edge_weight

        def aggregate(h: torch.Tensor) -> torch.Tensor:
            return gcn_aggregate(g, h, weight, self.add_self_loops, self.normalize, 2.0 if self.improved else 1.0)

        out = self.lin(aggregate(x)) if self.in_channels < self.out_channels else aggregate(self.lin(x))
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}"
