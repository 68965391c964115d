"""``EdgeConv`` (Wang et al.), FeatGraph's MLP aggregation as a layer: ``aggr_u nn([x_v, x_u - x_v])``.

When ``nn`` is a ``Linear``, optionally followed by a non-decreasing activation (FeatGraph's
``max_u relu(W [x_u; x_v])``), the message splits into per-vertex parts, ``A = x W_u`` for sources and
``B = x (W_v - W_u) + b`` for destinations, so the E x d x d per-edge products become n x d x d:
- max/min: the activation commutes with the reduction, ``act(B_v + max_u A_u)``: one plain SpMM;
- sum/mean: one fused SpMM whose message is ``act(A[src] + B[dst])``; no message is stored.
Any other ``nn`` runs per edge, materialising E x 2d inputs exactly as PyG does.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch_geometric.nn

from .. import te
from ..graph import Graph
from ..graph.conversion import GraphLike
from ..ops import SHORTCUTS, gspmm
from ..ops.kernel_operator import kernel_operator
from ..ops.precision import with_bias
from ..ops.udfs import TORCH_TO_TE
from ..templates import spmm
from ..templates.kernel import cached_kernel, shared_op
from .graph_input import PairTensor
from .pyg_layer import FusedLayer


def _activation(module: torch.nn.Module | None) -> tuple[str, float] | None:
    """The activation as (name, negative slope) for ``_te_activation``, or None when it is not a known
    non-decreasing one."""
    if module is None or isinstance(module, torch.nn.Identity):
        return "identity", 0.0
    if isinstance(module, torch.nn.ReLU):
        return "leaky_relu", 0.0
    if isinstance(module, torch.nn.LeakyReLU) and module.negative_slope >= 0:
        return "leaky_relu", float(module.negative_slope)
    if isinstance(module, (torch.nn.Sigmoid, torch.nn.Tanh)):
        return type(module).__name__.lower(), 0.0
    return None


def _te_activation(name: str, slope: float) -> Callable[[te.Expr], te.Expr]:
    """The te expression builder of an activation named by ``_activation``."""
    if name == "leaky_relu":
        return lambda x: te.where(x > 0, x, x * slope)
    return {"identity": lambda x: x, "sigmoid": te.sigmoid, "tanh": te.tanh}[name]


def _split_mlp(nn: torch.nn.Module) -> tuple[torch.nn.Linear, torch.nn.Module | None] | None:
    """``nn`` as (Linear, activation or None) when the per-vertex split applies, else None."""
    if isinstance(nn, torch.nn.Linear):
        return nn, None
    if isinstance(nn, torch.nn.Sequential) and len(nn) in (1, 2) and isinstance(nn[0], torch.nn.Linear):
        activation = nn[1] if len(nn) == 2 else None
        return (nn[0], activation) if _activation(activation) is not None else None
    return None


class EdgeConv(FusedLayer, torch_geometric.nn.EdgeConv):
    """Edge convolution: PyG's ``EdgeConv(nn, aggr)`` on featgraph's kernels; see the module docstring for
    which ``nn`` run fused. Besides PyG's forms, ``size=(num_src, num_dst)`` (or a bipartite ``Graph``) with a
    tensor ``x`` takes its first ``num_dst`` rows as the destinations."""

    def forward(self, x: PairTensor, edge_index: GraphLike, size: tuple[int, int] | None = None) -> torch.Tensor:
        """``x`` a tensor or PyG's pair ``(x_src, x_dst)``: messages ``nn([x_dst[v], x_src[u] - x_dst[v]])``."""
        if isinstance(x, (tuple, list)) and len(x) == 2 and x[1] is None:
            raise ValueError("x: EdgeConv needs the destinations' features, got (x_src, None)")
        reason, fused = self.aggregation_inputs(x, edge_index, size)
        if fused is None:
            if size is not None and isinstance(x, torch.Tensor):
                x = (x, x[: size[1]])
            return self.fallback(reason, x, edge_index)
        reduce, x_src, x_dst, g = fused
        split = _split_mlp(self.nn)
        if split is None:
            at_dst, at_src = SHORTCUTS["copy_v"](g, x_dst), SHORTCUTS["copy_u"](g, x_src)
            messages = self.nn(torch.cat([at_dst, at_src - at_dst], dim=-1))
            return gspmm(g, "copy_rhs", reduce, None, messages)
        linear, activation = split
        width = x_src.shape[1]
        if linear.in_features != 2 * width:
            raise ValueError(f"nn's first Linear takes {linear.in_features} features, expected 2 * {width}")
        w_dst, w_src = linear.weight.split(width, dim=1)
        per_source = x_src @ w_src.t()
        per_dest = x_dst @ (w_dst - w_src).t()
        per_dest = with_bias(per_dest, linear.bias)
        if reduce in ("max", "min"):
            reduced = gspmm(g, "copy_lhs", reduce, per_source, None)
            out = per_dest + reduced if activation is None else activation(per_dest + reduced)
            return torch.where((g.in_degrees() > 0).unsqueeze(1), out, torch.zeros((), dtype=out.dtype))
        return _message_sum(g, per_source, per_dest, reduce, *_activation(activation))


@kernel_operator("edge_conv_messages", fake=lambda ref, per_source, per_dest, *_: per_dest.new_empty(per_dest.shape))
def _message_sum(
    g: Graph, per_source: torch.Tensor, per_dest: torch.Tensor, aggr: str, activation: str, slope: float
):  # fmt: skip
    """The fused SpMM ``aggr_u act(A[u] + B[v])`` (sum or mean), compiled once per graph, width, dtype and
    activation (``_activation``'s name and slope), and its placeholders."""
    act = _te_activation(activation, slope)
    d, dtype = per_source.shape[1], TORCH_TO_TE[per_source.dtype]
    key = ("edge-conv", d, dtype, aggr, activation, slope)

    def build():
        A = te.placeholder((None, d), dtype, "A")
        B = te.placeholder((None, d), dtype, "B")
        return spmm(g, shared_op(key, lambda s, t, e: te.compute((d,), lambda i: act(A[s, i] + B[t, i]))), aggr)

    return cached_kernel(g, key, build), {"A": per_source, "B": per_dest}
