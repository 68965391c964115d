"""``AGNNConv`` (Thekumparampil et al.): attention from cosine similarity, PyG's layer."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..ops import SHORTCUTS, edge_softmax
from .graph_input import GraphLike, as_graph


class AGNNConv(torch.nn.Module):
    """``out_v = sum_u softmax_u(beta cos(x_u, x_v)) x_u`` over in-edges with self loops, as PyG's
    ``AGNNConv`` (parameter ``beta``, a buffer when ``requires_grad=False``). Per edge only the scalar
    scores exist (one SDDMM dot product, the fused edge softmax, one weighted SpMM)."""

    def __init__(self, requires_grad: bool = True, add_self_loops: bool = True) -> None:
        super().__init__()
        self.requires_grad, self.add_self_loops = requires_grad, add_self_loops
        if requires_grad:
            self.beta = torch.nn.Parameter(torch.ones(1))
        else:
            self.register_buffer("beta", torch.ones(1))

    def reset_parameters(self) -> None:
        """Initialise the parameters as PyG's layer of the same name does."""
        if self.requires_grad:
            self.beta.data.fill_(1)

    def forward(self, x: torch.Tensor, edge_index: GraphLike) -> torch.Tensor:
        g = as_graph(edge_index, x.shape[0])
        if self.add_self_loops:
            g = g.with_self_loops()
        unit = F.normalize(x, p=2.0, dim=-1)
        alpha = edge_softmax(g, self.beta * SHORTCUTS["u_dot_v"](g, unit, unit))
        return SHORTCUTS["u_mul_e_sum"](g, x, alpha)
