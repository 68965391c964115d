"""Fused attention scores and edge-feature aggregations for GATv2, graph transformers and GINE.

Each op is one UDF kernel (an SDDMM for per-edge scores, an SpMM for per-vertex sums) whose message
combines vertex rows, edge rows and a small dense weight inside the kernel, so the E x features tensors
the message passing formulation builds (``x_i + x_j``, ``key_j + lin(edge_attr)``, the messages) never
exist; only E x heads scores do. Gradients are the kernels' own (derived from the UDFs), except GINE's
projected edge features, whose backward is written out (see ``relu_edge_sum``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import te
from ..graph import Graph
from ..graph.graph import GraphRef
from ..operator import fake_edges, operator
from ..templates.kernel import cached_kernel, shared_op
from ..tuning import sddmm, spmm
from . import precision
from .checks import check_graph, check_tensor, vertex_rows
from .edge_softmax import edge_softmax
from .gspmm import gspmm
from .kernel_operator import kernel_operator
from .udfs import TORCH_TO_TE


def _vertex_tensor(
    name: str, x: torch.Tensor, g: Graph | GraphRef, side: str, like: torch.Tensor | None = None
) -> None:
    rows, rows_are = vertex_rows(g, side)
    check_tensor(name, x, rows=rows, rows_are=rows_are, like=like, device=g.device)


def _edge_terms(
    g: Graph | GraphRef,
    edge_attr: torch.Tensor | None,
    weight: torch.Tensor | None,
    like: torch.Tensor,
    weight_shape: tuple,
) -> None:
    """``edge_attr`` (E, K) and its ``weight`` come together, the weight of ``weight_shape`` with -1 for K."""
    if (edge_attr is None) != (weight is None):
        raise ValueError("edge_attr and its weight come together: got only one of them")
    if edge_attr is None:
        return
    check_tensor("edge_attr", edge_attr, dims=2, rows=g.num_edges, rows_are="one per edge", like=like)
    expected = tuple(edge_attr.shape[1] if s == -1 else s for s in weight_shape)
    check_tensor("edge weight", weight, like=like)
    if tuple(weight.shape) != expected:
        raise ValueError(
            f"edge weight: expected shape {expected} for edge_attr {tuple(edge_attr.shape)}, got {tuple(weight.shape)}"
        )


def gatv2_scores(
    g: Graph | GraphRef,
    feat_src: torch.Tensor,
    feat_dst: torch.Tensor,
    att: torch.Tensor,
    negative_slope: float = 0.2,
    edge_feat: torch.Tensor | None = None,
) -> torch.Tensor:
    """GATv2's scores before the softmax: ``s[e, h] = sum_c att[h, c] leaky_relu(feat_src[u, h, c] +
    feat_dst[v, h, c] + edge_feat[e, h, c])``, (E, heads).

    ``feat_src`` (num_src, heads, C), ``feat_dst`` (num_dst, heads, C), ``att`` (heads, C), the optional
    ``edge_feat`` (E, heads, C) (PyG's ``lin_edge(edge_attr)``; projected inside the kernel instead, each
    derived gradient kernel recomputed the projection per weight element: slower than PyG at 16 edge
    features). One SDDMM: the E x heads x C sum is formed per edge in registers and reduced at once."""
    check_graph(g)
    feat_src, feat_dst, att, edge_feat = precision.autocast_inputs("gatv2_scores", feat_src, feat_dst, att, edge_feat)
    _vertex_tensor("feat_src", feat_src, g, "src")
    check_tensor("feat_src", feat_src, dims=3)
    _vertex_tensor("feat_dst", feat_dst, g, "dst", like=feat_src)
    heads, channels = feat_src.shape[1:]
    expected = {"feat_dst": (feat_dst.shape[0], heads, channels), "att": (heads, channels)}
    if edge_feat is not None:
        check_tensor("edge_feat", edge_feat, rows=g.num_edges, rows_are="one per edge")
        expected["edge_feat"] = (g.num_edges, heads, channels)
    tensors = {"feat_dst": feat_dst, "att": att, "edge_feat": edge_feat}
    for name, shape in expected.items():
        check_tensor(name, tensors[name], like=feat_src)
        if tuple(tensors[name].shape) != shape:
            raise ValueError(f"{name}: expected shape {shape}, got {tuple(tensors[name].shape)}")
    return _gatv2_scores(g, feat_src, feat_dst, att, edge_feat, float(negative_slope))


def _per_edge_and_head(ref: GraphRef, x: torch.Tensor, *_) -> torch.Tensor:
    """The fake rule of the score kernels: (E, heads), heads the second axis of the first tensor."""
    return x.new_empty(fake_edges(ref), x.shape[1])


@kernel_operator("gatv2_scores", fake=_per_edge_and_head)
def _gatv2_scores(
    g: Graph, feat_src: torch.Tensor, feat_dst: torch.Tensor, att: torch.Tensor, edge_feat: torch.Tensor | None,
    negative_slope: float,
):  # fmt: skip
    """``gatv2_scores``' kernel and its placeholders (arguments checked)."""
    heads, channels = feat_src.shape[1:]
    edged = edge_feat is not None
    dtype = TORCH_TO_TE[feat_src.dtype]
    key = ("gatv2-scores", heads, channels, edged, dtype, float(negative_slope))

    def build():
        xl = te.placeholder((None, heads, channels), dtype, "XL")
        xr = te.placeholder((None, heads, channels), dtype, "XR")
        a = te.placeholder((heads, channels), dtype, "ATT")
        ef = te.placeholder((None, heads, channels), dtype, "EF")

        def udf(s: te.Var, t: te.Var, e: te.Var) -> te.ComputeOp:
            def score(h: te.Var) -> te.Expr:
                c = te.reduce_axis((0, channels), name="c")
                x = xl[s, h, c] + xr[t, h, c] + ef[e, h, c] if edged else xl[s, h, c] + xr[t, h, c]
                return te.sum(a[h, c] * te.where(x > 0, x, x * negative_slope), axis=c)

            return te.compute((heads,), score)

        return sddmm(g, shared_op(key, udf))

    inputs = {"XL": feat_src, "XR": feat_dst, "ATT": att}
    if edged:
        inputs["EF"] = edge_feat
    return cached_kernel(g, key, build), inputs


def dot_scores(
    g: Graph | GraphRef,
    query: torch.Tensor,
    key: torch.Tensor,
    scale: float = 1.0,
    edge_query: torch.Tensor | None = None,
    edge_attr: torch.Tensor | None = None,
) -> torch.Tensor:
    """Scaled dot-product scores: ``s[e, h] = scale (sum_c query[v, h, c] key[u, h, c] + sum_k
    edge_query[v, h, k] edge_attr[e, k])``, (E, heads).

    ``query`` (num_dst, heads, C), ``key`` (num_src, heads, C). A key shifted by projected edge features,
    ``key[u] + edge_attr[e] W^T``, is the second term with ``edge_query = query W`` per vertex (heads, K):
    the E x heads x C shifted keys are never formed."""
    check_graph(g)
    _vertex_tensor("query", query, g, "dst")
    check_tensor("query", query, dims=3)
    _vertex_tensor("key", key, g, "src", like=query)
    if key.shape[1:] != query.shape[1:]:
        raise ValueError(f"key: expected (heads, C) = {tuple(query.shape[1:])} as query, got {tuple(key.shape)}")
    heads, channels = query.shape[1:]
    if edge_query is not None:
        _vertex_tensor("edge_query", edge_query, g, "dst", like=query)
    _edge_terms(g, edge_attr, edge_query, query, (query.shape[0], heads, -1))
    return _dot_scores(g, query, key, edge_query, edge_attr, float(scale))


@kernel_operator("dot_scores", fake=_per_edge_and_head)
def _dot_scores(
    g: Graph, query: torch.Tensor, key: torch.Tensor, edge_query: torch.Tensor | None,
    edge_attr: torch.Tensor | None, scale: float,
):  # fmt: skip
    """``dot_scores``' kernel and its placeholders (arguments checked)."""
    heads, channels = query.shape[1:]
    k = None if edge_attr is None else edge_attr.shape[1]
    dtype = TORCH_TO_TE[query.dtype]
    cache_key = ("dot-scores", heads, channels, k, dtype, float(scale))

    def build():
        q = te.placeholder((None, heads, channels), dtype, "Q")
        kk = te.placeholder((None, heads, channels), dtype, "K")
        qe = te.placeholder((None, heads, k or 1), dtype, "QE")
        ea = te.placeholder((None, k or 1), dtype, "EA")

        def udf(s: te.Var, t: te.Var, e: te.Var) -> te.ComputeOp:
            def score(h: te.Var) -> te.Expr:
                c = te.reduce_axis((0, channels), name="c")
                total = te.sum(q[t, h, c] * kk[s, h, c], axis=c)
                if k is not None:
                    j = te.reduce_axis((0, k), name="j")
                    total = total + te.sum(qe[t, h, j] * ea[e, j], axis=j)
                return total * scale

            return te.compute((heads,), score)

        return sddmm(g, shared_op(cache_key, udf))

    inputs = {"Q": query, "K": key}
    if edge_attr is not None:
        inputs |= {"QE": edge_query, "EA": edge_attr}
    return cached_kernel(g, cache_key, build), inputs


def softmax_aggregate(
    g: Graph | GraphRef, scores: torch.Tensor, values: torch.Tensor, dropout: float = 0.0, training: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention over in-edges: ``alpha = edge_softmax(scores)`` (E, heads), dropped out as ``F.dropout``
    does (the same draws as PyG's layers for the same seed), and ``out[v, h] = sum_e alpha[e, h]
    values[u, h]`` (num_dst, heads, C) by one SpMM. Returns (out, alpha, alpha after dropout)."""
    alpha = edge_softmax(g, scores)
    dropped = F.dropout(alpha, p=dropout, training=training)
    return gspmm(g, "mul", "sum", values, dropped.unsqueeze(-1)), alpha, dropped


def weighted_edge_sum(g: Graph | GraphRef, weights: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
    """``out[v, h, k] = sum_{e into v} weights[e, h] edge_attr[e, k]``, (num_dst, heads, K): edge features
    aggregated with per-head weights (attention over edges whose values carry ``edge_attr W^T``: the
    projection commutes with the sum, so it is applied per vertex afterwards)."""
    check_graph(g)
    check_tensor("weights", weights, dims=2, rows=g.num_edges, rows_are="one per edge", device=g.device)
    check_tensor("edge_attr", edge_attr, dims=2, rows=g.num_edges, rows_are="one per edge", like=weights)
    return _weighted_edge_sum(g, weights, edge_attr)


@kernel_operator(
    "weighted_edge_sum",
    fake=lambda ref, weights, edge_attr: weights.new_empty(ref.num_dst_nodes, weights.shape[1], edge_attr.shape[1]),
)
def _weighted_edge_sum(g: Graph, weights: torch.Tensor, edge_attr: torch.Tensor):
    """``weighted_edge_sum``'s kernel and its placeholders (arguments checked)."""
    heads, k = weights.shape[1], edge_attr.shape[1]
    dtype = TORCH_TO_TE[weights.dtype]
    key = ("weighted-edge-sum", heads, k, dtype)

    def build():
        a = te.placeholder((None, heads), dtype, "A")
        ea = te.placeholder((None, k), dtype, "EA")
        udf = shared_op(key, lambda s, t, e: te.compute((heads, k), lambda h, j: a[e, h] * ea[e, j]))
        return spmm(g, udf, "sum")

    return cached_kernel(g, key, build), {"A": weights, "EA": edge_attr}


def relu_edge_sum(
    g: Graph | GraphRef,
    x: torch.Tensor,
    edge_attr: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """GINE's aggregation: ``out[v] = sum_{e = (u -> v)} relu(x[u] + p[e])``, (num_dst, F), one SpMM, the
    E x F messages never stored. ``p`` is ``edge_attr`` (E, F) itself, or with ``weight`` (F, K) (and
    ``bias`` (F,)), PyG's ``Linear`` of ``edge_attr`` (E, K), computed inside the kernels, so the E x F
    projected features never exist either; the backward then makes one E x F tensor, the messages'
    gradient ``relu'(x[u] + p[e]) grad[v]``, and gets every input's gradient from it (one SpMM over the
    reversed graph, GEMMs for the weight). The derived gradient kernels would recompute the projection
    per element of each gradient."""
    check_graph(g)
    _vertex_tensor("x", x, g, "src")
    check_tensor("x", x, dims=2)
    check_tensor("edge_attr", edge_attr, dims=2, rows=g.num_edges, rows_are="one per edge", like=x)
    features, k = x.shape[1], edge_attr.shape[1]
    if weight is None:
        if bias is not None:
            raise ValueError("bias: given without a weight")
        if k != features:
            raise ValueError(f"edge_attr: expected {features} features as x (or a weight to project it), got {k}")
        return _relu_edge_sum(g, x, edge_attr)
    check_tensor("weight", weight, dims=2, like=x)
    if tuple(weight.shape) != (features, k):
        raise ValueError(
            f"weight: expected shape {(features, k)} (x's features, edge_attr's), got {tuple(weight.shape)}"
        )
    if bias is not None:
        check_tensor("bias", bias, dims=1, rows=features, rows_are="one per feature of x", like=x)
    return _projected_relu_edge_sum(g, x, edge_attr, weight, bias)


def _per_destination(ref: GraphRef, x: torch.Tensor, *_) -> torch.Tensor:
    """The fake rule of GINE's aggregation: one row of x's features per destination."""
    return x.new_empty(ref.num_dst_nodes, x.shape[1])


class _ReluEdgeKernels:
    """GINE's kernels on one graph, each compiled on first use: "sum" (the aggregation) and "mask" (per
    edge, ``relu'(x[u] + p[e]) G[v]``), ``p`` the edge features as they are (``projected`` None) or their
    projection ``EA WT + B`` (``projected``: whether there is a bias)."""

    def __init__(self, g: Graph, x: torch.Tensor, edge_attr: torch.Tensor, projected: bool | None) -> None:
        self.g, self.features, self.k = g, x.shape[1], edge_attr.shape[1]
        self.dtype, self.projected = TORCH_TO_TE[x.dtype], projected

    def __getitem__(self, name: str):
        key = ("relu-edge", name, self.features, self.k, self.dtype, self.projected)
        return cached_kernel(self.g, key, lambda: self._build(key))

    def _build(self, key: tuple):
        name = key[1]
        g, features, k, dtype = self.g, self.features, self.k, self.dtype
        xs = te.placeholder((None, features), dtype, "X")
        ea = te.placeholder((None, k), dtype, "EA")
        wt, b = te.placeholder((k, features), dtype, "WT"), te.placeholder((features,), dtype, "B")
        grad = te.placeholder((None, features), dtype, "G")

        def pre(s: te.Var, e: te.Var, i: te.Var) -> te.Expr:
            if self.projected is None:
                return xs[s, i] + ea[e, i]
            j = te.reduce_axis((0, k), name="j")
            edge = te.sum(ea[e, j] * wt[j, i], axis=j)
            return xs[s, i] + (edge + b[i] if self.projected else edge)

        if name == "sum":
            udf = shared_op(key, lambda s, t, e: te.compute((features,), lambda i: te.max(pre(s, e, i), 0.0)))
            return spmm(g, udf, "sum")
        mask = shared_op(
            key, lambda s, t, e: te.compute((features,), lambda i: te.where(pre(s, e, i) > 0, grad[t, i], 0.0))
        )
        return sddmm(g, mask)


@kernel_operator("relu_edge_sum", fake=_per_destination)
def _relu_edge_sum(g: Graph, x: torch.Tensor, edge_attr: torch.Tensor):
    """``relu_edge_sum``'s kernel without a projection and its placeholders (arguments checked)."""
    return _ReluEdgeKernels(g, x, edge_attr, None)["sum"], {"X": x, "EA": edge_attr}


def _projected_gradients(
    g: Graph, x, edge_attr, weight, bias, *, outputs, grads: list[torch.Tensor], wants: list[bool]
) -> list[torch.Tensor | None]:
    """The projected ``relu_edge_sum``'s gradients written out: the messages' gradient ``D`` (E x F, one
    SDDMM) gives ``dx = sum over out-edges of D`` (one SpMM over the reversed graph), ``d edge_attr = D
    weight``, ``d weight = D^T edge_attr`` and ``d bias = sum_e D``, these two from one GEMM (``edge_attr``
    with a column of ones), so ``D`` is read once for both."""
    messages = _ReluEdgeKernels(g, x, edge_attr, bias is not None)["mask"].evaluate(
        _projected_inputs(x, edge_attr, weight, bias) | {"G": grads[0]}, want_arg=False
    )[0]
    want_x, want_attr, want_weight, want_bias = wants
    want_bias = want_bias and bias is not None
    grad_weight = grad_bias = None
    if want_weight or want_bias:
        ones = edge_attr.new_ones(g.num_edges, 1)
        # X^T D, (K + 1, F): BLAS runs D^T X, with its E-long columns, several times slower
        product = (torch.cat((edge_attr, ones), 1) if want_weight else ones).t() @ messages
        grad_weight = product[:-1].t().contiguous() if want_weight else None
        grad_bias = product[-1].clone() if want_bias else None  # a row of its own, not a view into product
    return [
        gspmm(g.reverse(), "copy_rhs", "sum", None, messages) if want_x else None,
        messages @ weight if want_attr else None,
        grad_weight,
        grad_bias,
    ]


@operator(
    "projected_relu_edge_sum", _per_destination, _projected_gradients,
    autocast=precision.caster("projected_relu_edge_sum"),
)  # fmt: skip
def _projected_relu_edge_sum(
    g: Graph, x: torch.Tensor, edge_attr: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """``relu_edge_sum`` with the projection inside the kernel (arguments checked)."""
    kernel = _ReluEdgeKernels(g, x, edge_attr, bias is not None)["sum"]
    return kernel.evaluate(_projected_inputs(x, edge_attr, weight, bias), want_arg=False)[0]


def _projected_inputs(x, edge_attr, weight, bias) -> dict[str, torch.Tensor]:
    inputs = {"X": x, "EA": edge_attr, "WT": weight.t()}
    if bias is not None:
        inputs["B"] = bias
    return inputs
