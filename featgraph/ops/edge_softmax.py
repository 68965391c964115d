"""``edge_softmax``: softmax of edge scores over each destination's in-edges, fused, with its gradient.

Forward, three kernels and no E-sized temporary besides the result: per-destination max (SpMM), sum of
exp(score - max) (SpMM with the exponent inlined), normalised exp (SDDMM). Backward, two: the per-destination
sum of grad * out (SpMM) and out * (grad - that sum) (SDDMM).
"""

from __future__ import annotations

import torch

from .. import te
from ..graph import Graph
from . import lowering
from .checks import check_graph, check_tensor


def edge_softmax(g: Graph, scores: torch.Tensor) -> torch.Tensor:
    """``out[e] = exp(s[e]) / sum_{e' into dst(e)} exp(s[e'])``, numerically stable; scores (E,) or
    (E, *heads), one softmax per head."""
    check_tensor("scores", scores, rows=check_graph(g).num_edges, rows_are="one per edge", device=g.device)
    return _EdgeSoftmax.apply(g, scores)


class _EdgeSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, g: Graph, scores):  # noqa: D102
        s = ("s", "e", scores)
        peak = lowering.run(g, "v", [s], lambda x: x[0], "esm-max", "max")
        m = ("m", "v", peak)
        total = lowering.run(g, "v", [s, m], lambda x: te.exp(x[0] - x[1]), "esm-sum")
        out = lowering.run(g, "e", [s, m, ("z", "v", total)], lambda x: te.exp(x[0] - x[1]) / x[2], "esm-out")
        out = out.view_as(scores)
        ctx.g = g
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        (out,) = ctx.saved_tensors
        gy = [("g", "e", grad.contiguous()), ("y", "e", out)]
        weighted = lowering.run(ctx.g, "v", gy, lambda x: x[0] * x[1], "esm-bw-sum")
        ds = lowering.run(ctx.g, "e", [*gy, ("t", "v", weighted)], lambda x: x[1] * (x[0] - x[2]), "esm-bw")
        return None, ds.view_as(out)
