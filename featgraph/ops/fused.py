"""Fused graph processing (fuseGNN): GCN normalisation and GAT attention without E x d intermediates.

GCN: the symmetric normalisation is applied as two per-vertex scalings around one aggregation, and self
loops are added arithmetically instead of as edges. GAT: attention logits are computed per vertex
(a_src . Wh_u and a_dst . Wh_v: n inner products instead of E), combined per edge, soft-maxed over in-edges
and used as aggregation weights; only E x heads values ever exist.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import te
from ..graph import Graph
from ..templates import spmm
from . import SHORTCUTS, edge_softmax, gsddmm, gspmm
from .dropout import dropout as dropout_
from .udfs import TORCH_TO_TE


def _last_self_loop(g: Graph) -> torch.Tensor:
    """Per vertex, the id of its last self-loop edge, or -1 (PyG keeps that loop's weight)."""

    def build() -> torch.Tensor:
        loops = g.self_loop_edges()
        last = torch.full((g.num_nodes,), -1, dtype=torch.int64, device=g.device)
        return last.scatter_reduce_(0, g.coo()[0][loops], loops, "amax")

    return g.cached(("last-self-loop",), build)


def gcn_aggregate(
    g: Graph,
    x: torch.Tensor,
    edge_weight: torch.Tensor | None = None,
    add_self_loops: bool = True,
    normalize: bool = True,
    fill_value: float = 1.0,
) -> torch.Tensor:
    """``D^-1/2 (A + I) D^-1/2 x`` with PyG's ``gcn_norm`` semantics: degrees at the destination; with
    ``add_self_loops`` every vertex gets exactly one loop, weighing what its existing loop weighed (the
    last one, where there are duplicates) or ``fill_value`` (2 is PyG's ``improved``). Differentiable in
    ``x`` and ``edge_weight``.

    One fused SpMM whose message is ``norm[u] * norm[v] * w[e] * x[u]``: the normalisation never exists
    per edge and no n x d temporary besides the output is made, forward or backward. The loops are n edges
    of a cached looped graph (n indices, against the three n x d scalings applying them arithmetically
    would cost)."""
    if x.dim() != 2 or x.shape[0] != g.num_nodes:
        raise ValueError(f"x must be (num_nodes={g.num_nodes}, features), got {tuple(x.shape)}")
    base, weight = g, edge_weight
    if add_self_loops:
        base = g.with_self_loops()
        last_loop = _last_self_loop(g)
        existing = torch.ones((), dtype=x.dtype) if edge_weight is None else edge_weight[last_loop.clamp(min=0)]
        loop_weight = torch.where(last_loop >= 0, existing, torch.full((), fill_value, dtype=x.dtype))
        if edge_weight is not None:
            weight = torch.cat([edge_weight[g.coo()[0] != g.coo()[1]], loop_weight])
        elif fill_value != 1.0:
            weight = torch.cat([torch.ones(base.num_edges - g.num_nodes, dtype=x.dtype), loop_weight])
    if not normalize:
        return gspmm(base, "copy_lhs", "sum", x, None) if weight is None else gspmm(base, "mul", "sum", x, weight)
    if weight is None:
        degree = base.in_degrees().to(x.dtype)
    else:
        degree = gspmm(base, "copy_rhs", "sum", None, weight.unsqueeze(1)).squeeze(1)
    norm = degree.pow(-0.5).masked_fill(degree <= 0, 0)
    kernel = _gcn_kernel(base, x.shape, TORCH_TO_TE[x.dtype], weight is not None)
    inputs = {"NORM": norm.unsqueeze(1), "X": x}
    if weight is not None:
        inputs["W"] = weight.unsqueeze(1)
    return kernel(**inputs)


def _gcn_kernel(g: Graph, shape: torch.Size, dtype: str, weighted: bool):
    """The fused normalised aggregation, compiled once per graph, shape and dtype."""
    n, d = shape

    def build():
        norm, feat = te.placeholder((n, 1), dtype, "NORM"), te.placeholder((n, d), dtype, "X")
        weight = te.placeholder((g.num_edges, 1), dtype, "W")

        def message(s: te.Var, t: te.Var, e: te.Var) -> te.ComputeOp:
            scale = norm[s, 0] * norm[t, 0] * weight[e, 0] if weighted else norm[s, 0] * norm[t, 0]
            return te.compute((d,), lambda i: scale * feat[s, i])

        return spmm(g, message, "sum")

    return g.cached(("gcn-kernel", n, d, dtype, weighted), build)


def gat_attention(
    g: Graph,
    feat: torch.Tensor,
    attn_src: torch.Tensor,
    attn_dst: torch.Tensor,
    negative_slope: float = 0.2,
    dropout: float = 0.0,
    training: bool = False,
    return_attention: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """GAT's attention + aggregation: ``out[v, h] = sum_u alpha[u->v, h] feat[u, h]`` with
    ``alpha = softmax_over_in_edges(leaky_relu(a_src[h] . feat[u, h] + a_dst[h] . feat[v, h]))``.

    Without attention dropout (evaluation, or ``dropout=0``) nothing per edge is stored: three fused SpMM
    passes recompute the scores from the per-vertex logits, forward and backward. With dropout, or with
    ``return_attention``, the weights are built per edge (E x heads) and the ops are used one by one.

    ``feat`` is (n, heads, d), ``attn_src``/``attn_dst`` (heads, d) (PyG's ``att_src``/``att_dst`` squeezed).
    """
    if feat.dim() != 3 or attn_src.shape != feat.shape[1:] or attn_dst.shape != feat.shape[1:]:
        raise ValueError(
            f"feat must be (n, heads, d) and attn_src/attn_dst (heads, d); got {tuple(feat.shape)}, "
            f"{tuple(attn_src.shape)}, {tuple(attn_dst.shape)}"
        )
    logit_src = (feat * attn_src).sum(-1)  # (n, heads): per vertex, not per edge
    logit_dst = (feat * attn_dst).sum(-1)
    if return_attention or (training and dropout > 0):  # the per-edge weights must exist: build them
        scores = F.leaky_relu(gsddmm(g, "add", logit_src, logit_dst, "u", "v"), negative_slope)
        alpha = dropout_(edge_softmax(g, scores), dropout, training)
        out = SHORTCUTS["u_mul_e_sum"](g, feat, alpha.unsqueeze(-1))
        return (out, alpha) if return_attention else out
    peak_kernel, total_kernel, aggregate_kernel = _gat_kernels(g, feat.shape, TORCH_TO_TE[feat.dtype], negative_slope)
    with torch.no_grad():  # the shift cancels in the softmax, so it carries no gradient
        peak = peak_kernel(EL=logit_src, ER=logit_dst)
    total = total_kernel(EL=logit_src, ER=logit_dst, M=peak)
    return aggregate_kernel(EL=logit_src, ER=logit_dst, M=peak, Z=total, F=feat)


def _gat_kernels(g: Graph, shape: torch.Size, dtype: str, slope: float):
    """Three fused passes, no per-edge tensor: per-destination max of the scores, sum of their shifted
    exponentials, and the aggregation weighted by exp(score - max) / sum. Gradients come from the UDFs."""
    n, heads, d = shape

    def build():
        EL, ER = te.placeholder((n, heads), dtype, "EL"), te.placeholder((n, heads), dtype, "ER")
        M, Z = te.placeholder((n, heads), dtype, "M"), te.placeholder((n, heads), dtype, "Z")
        feat = te.placeholder((n, heads, d), dtype, "F")

        def score(s: te.Var, t: te.Var, h: te.Var) -> te.Expr:
            x = EL[s, h] + ER[t, h]
            return te.where(x > 0, x, x * slope)

        def weight(s: te.Var, t: te.Var, h: te.Var) -> te.Expr:
            return te.exp(score(s, t, h) - M[t, h])

        peak = spmm(g, lambda s, t, e: te.compute((heads,), lambda h: score(s, t, h)), "max")
        total = spmm(g, lambda s, t, e: te.compute((heads,), lambda h: weight(s, t, h)), "sum")
        aggregate = spmm(
            g, lambda s, t, e: te.compute((heads, d), lambda h, i: weight(s, t, h) / Z[t, h] * feat[s, h, i]), "sum"
        )
        return peak, total, aggregate

    return g.cached(("gat-kernels", n, heads, d, dtype, slope), build)
