"""``GINConv`` (Xu et al.): ``nn((1 + eps) x_v + sum_u x_u)``, PyG's layer."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..ops import gspmm
from .graph_input import GraphLike, PairTensor, split_input


class GINConv(torch.nn.Module):
    """Graph isomorphism layer, parameters and results as PyG's ``GINConv`` (``nn``, ``eps``).

    When ``nn`` begins with a ``Linear`` that narrows the features, that linear map runs before the sum
    aggregation (it commutes with it), so the SpMM moves the narrower features.
    """

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False) -> None:
        super().__init__()
        self.nn, self.initial_eps = nn, eps
        if train_eps:
            self.eps = torch.nn.Parameter(torch.full((1,), float(eps)))
        else:
            self.register_buffer("eps", torch.full((1,), float(eps)))

    def reset_parameters(self) -> None:
        """Initialise the parameters as PyG's layer of the same name does."""
        for module in self.nn.modules():
            if module is not self.nn and hasattr(module, "reset_parameters"):
                module.reset_parameters()
        self.eps.data.fill_(self.initial_eps)

    def forward(self, x: PairTensor, edge_index: GraphLike, size: tuple[int, int] | None = None) -> torch.Tensor:
        """``nn((1 + eps) x_dst + sum_u x_src[u])``; ``x`` a tensor or PyG's pair ``(x_src, x_dst)``."""
        pair = isinstance(x, (tuple, list))
        x_src, x_dst, g = split_input(x, edge_index, size)
        first, rest = _leading_linear(self.nn)
        project = first is not None and first.out_features < first.in_features
        if project:  # the Linear commutes with the sum: aggregate the narrower features
            x_src = F.linear(x_src, first.weight)
            x_dst = x_src[: g.num_dst_nodes] if not pair else None if x_dst is None else F.linear(x_dst, first.weight)
        out = gspmm(g, "copy_lhs", "sum", x_src, None)
        if x_dst is not None:
            out = out + (1 + self.eps) * x_dst
        if not project:
            return self.nn(out)
        return rest(out if first.bias is None else out + first.bias)

    def extra_repr(self) -> str:
        return f"eps={self.initial_eps}"


def _leading_linear(nn: torch.nn.Module) -> tuple[torch.nn.Linear | None, torch.nn.Module]:
    """``nn`` split as (its first Linear, the rest), or (None, nn) when it does not start with one."""
    if isinstance(nn, torch.nn.Linear):
        return nn, torch.nn.Identity()
    if isinstance(nn, torch.nn.Sequential) and len(nn) and isinstance(nn[0], torch.nn.Linear):
        return nn[0], nn[1:]
    return None, nn
