"""``edge_softmax``: softmax of edge scores over each destination's in-edges, fused, with its gradient.

Forward, three kernels and no E-sized temporary besides the result: per-destination max (SpMM), sum of
exp(score - max) (SpMM with the exponent inlined), normalised exp (SDDMM). Backward, two: the per-destination
sum of grad * out (SpMM) and out * (grad - that sum) (SDDMM).
"""

from __future__ import annotations

import torch

from .. import te
from ..graph import Graph
from ..graph.graph import GraphRef
from ..operator import operator
from . import lowering, precision
from .checks import check_graph, check_tensor


def edge_softmax(g: Graph | GraphRef, scores: torch.Tensor) -> torch.Tensor:
    """``out[e] = exp(s[e]) / sum_{e' into dst(e)} exp(s[e'])``, numerically stable; scores (E,) or
    (E, *heads), one softmax per head. Under autocast it runs in float32 (``precision``)."""
    scores = precision.autocast_input("edge_softmax", scores)
    check_tensor("scores", scores, rows=check_graph(g).num_edges, rows_are="one per edge", device=g.device)
    return _edge_softmax(g, scores)


def _gradient(g: Graph, scores: torch.Tensor | None, *, outputs, grads, wants) -> list[torch.Tensor | None]:
    return [gradient(g, outputs[0], grads[0])]


@operator(
    "edge_softmax", lambda ref, scores: torch.empty_like(scores), _gradient, saves=(), saves_outputs=(0,),
    autocast=precision.caster("edge_softmax"),
)  # fmt: skip
def _edge_softmax(g: Graph, scores: torch.Tensor) -> torch.Tensor:
    """The three forward kernels."""
    s = ("s", "e", scores)
    peak = lowering.run(g, "v", [s], lambda x: x[0], "esm-max", "max")
    m = ("m", "v", peak)
    total = lowering.run(g, "v", [s, m], lambda x: te.exp(x[0] - x[1]), "esm-sum")
    out = lowering.run(g, "e", [s, m, ("z", "v", total)], lambda x: te.exp(x[0] - x[1]) / x[2], "esm-out")
    return out.view_as(scores)


def gradient(g: Graph, out: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """The scores' gradient from the forward's output and the output's gradient (two kernels)."""
    gy = [("g", "e", grad.contiguous()), ("y", "e", out)]
    weighted = lowering.run(g, "v", gy, lambda x: x[0] * x[1], "esm-bw-sum")
    ds = lowering.run(g, "e", [*gy, ("t", "v", weighted)], lambda x: x[1] * (x[0] - x[2]), "esm-bw")
    return ds.view_as(out)
