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
from ..graph.graph import GraphRef
from ..kernel_spec import TORCH_DTYPES
from ..operator import operator
from ..templates.gradients import placeholder_gradients
from ..templates.kernel import Kernel, Udf, cached_kernel, resolve_target, shared_op
from ..timing import interleaved_best_ms
from ..tuning import sddmm, spmm
from . import SHORTCUTS, edge_softmax, gsddmm, gspmm, precision
from .checks import check_graph, check_tensor, vertex_rows
from .dropout import dropout_with_seed
from .tensor_core import tc_spmm, tensor_core_precision
from .udfs import TORCH_TO_TE

TENSOR_CORE_TIMINGS = 5  # timed runs of each side when the tuned GCN aggregation weighs tensor cores
# the tensor-core formats it weighs, by tile rows: TC-GNN's 16 x 16 tiles and FlashSparse's 8 x 1 vectors
TENSOR_CORE_TILES = {"tensor cores 16x16": 16, "tensor cores 8x1": 8}


def factor_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of the per-vertex factors a fused op weights its 16-bit features by (GCN's normalisation,
    GAT's logits and log-sum-exp): float32 for float16/bfloat16 features, so no factor is rounded to 16 bits
    (a destination's attention weights then sum to 1 within float32 rounding); the features' own otherwise."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


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
    tune: bool = False,
) -> torch.Tensor:
    """``D^-1/2 (A + I) D^-1/2 x`` with PyG's ``gcn_norm`` semantics: degrees at the destination; with
    ``add_self_loops`` every vertex gets exactly one loop, weighing what its existing loop weighed (the
    last one, where there are duplicates) or ``fill_value`` (2 is PyG's ``improved``). Differentiable in
    ``x`` and ``edge_weight``.

    One fused SpMM whose message is ``norm[u] * norm[v] * w[e] * x[u]``: the normalisation never exists
    per edge and no n x d temporary besides the output is made, forward or backward. The loops are n edges
    of a cached looped graph (n indices, against the three n x d scalings applying them arithmetically
    would cost). ``tune=True`` tunes the kernels for this graph and width on first use; on the GPU it also
    times the aggregation on tensor cores (TC-GNN's tiles, kept with the graph) against the tuned kernel and
    keeps the faster, for graphs without edge weights in a dtype tensor cores take at torch's precision
    (``ops.tensor_core.tensor_core_precision``): a graph whose neighbourhoods fill the tiles (one renumbered
    by ``Graph.reordered("community")``) gains, a random graph keeps the kernel."""
    x, edge_weight = precision.autocast_inputs("gcn_aggregate", x, edge_weight)
    check_tensor("x", x, dims=2, rows=check_graph(g).num_nodes, rows_are="the graph's nodes", device=g.device)
    if edge_weight is not None:
        check_tensor("edge_weight", edge_weight, dims=1, rows=g.num_edges, rows_are="one per edge", like=x)
    if normalize:
        return _gcn_aggregate(g, x, edge_weight, add_self_loops, fill_value, tune)
    if add_self_loops:
        g, edge_weight, _ = _weights_and_norm(g, x.dtype, edge_weight, True, False, fill_value)
    if edge_weight is None:  # (a GraphRef under torch.compile: nothing to build or cache)
        return gspmm(g, "copy_lhs", "sum", x, None, tune=tune)
    return gspmm(g, "mul", "sum", x, edge_weight.to(x.dtype), tune=tune)  # the given weights, and loops' fill


def _gcn_gradient(
    g: Graph, x, edge_weight, add_self_loops: bool, fill_value: float, tune: bool, *, outputs, grads, wants
) -> list[torch.Tensor | None]:
    """The gradients of the normalised ``gcn_aggregate`` in (x, edge_weight) where ``wants``: the fused
    kernel's own in X, NORM and W, then NORM's and the loops' dependence on the weights by hand (autograd
    records nothing inside a registered operator)."""
    base, weight, norm = _weights_and_norm(g, x.dtype, edge_weight, add_self_loops, True, fill_value)
    rows = _tensor_core_rows(base, x, norm, tune) if weight is None else None
    if rows is not None:  # the same aggregation over the reversed graph
        return [_scaled_tensor_core_spmm(base.reverse(), grads[0], norm, rows) if wants[0] else None, None]
    kernel, inputs = normalised_aggregation(base, x, weight, norm, tune)
    learn = wants[1] and edge_weight is not None
    grads = placeholder_gradients(kernel, inputs, grads[0], None, None, ["X"] * wants[0] + ["NORM", "W"] * learn)
    if not learn:
        return [grads.get("X"), None]
    # norm = deg^-1/2 (0 where deg <= 0): d norm / d deg = -norm^3 / 2, and deg[v] sums the weights into v
    degree_grad = grads["NORM"].squeeze(1) * norm.pow(3) * -0.5
    weight_grad = grads["W"].squeeze(1) + degree_grad[base.coo()[1]]
    weight_grad = _loop_weights_gradient(g, weight_grad) if add_self_loops else weight_grad
    return [grads.get("X"), weight_grad.to(edge_weight.dtype)]


@operator(
    "gcn_aggregate", lambda ref, x, *_: x.new_empty(x.shape), _gcn_gradient, autocast=precision.caster("gcn_aggregate")
)
def _gcn_aggregate(
    g: Graph, x: torch.Tensor, edge_weight: torch.Tensor | None, add_self_loops: bool, fill_value: float, tune: bool
) -> torch.Tensor:
    """``gcn_aggregate`` normalised, its inputs checked: the fused kernel, or tensor cores where tuning chose
    them."""
    base, weight, norm = _weights_and_norm(g, x.dtype, edge_weight, add_self_loops, True, fill_value)
    rows = _tensor_core_rows(base, x, norm, tune) if weight is None else None
    if rows is not None:
        return _scaled_tensor_core_spmm(base, x, norm, rows)
    kernel, inputs = normalised_aggregation(base, x, weight, norm, tune)
    return kernel.evaluate(inputs, want_arg=False)[0]


def _scaled_tensor_core_spmm(g: Graph, x: torch.Tensor, norm: torch.Tensor, rows: int) -> torch.Tensor:
    """``norm[v] * sum over in-edges u -> v of norm[u] * x[u]`` with the sum on tensor cores (``tc_spmm`` with
    ``rows``-row tiles, kept with the graph; differentiable, so a gradient of the gradient is recorded too)."""
    scale = norm.unsqueeze(1)
    return (scale * tc_spmm(g, (scale * x).to(x.dtype), tile_rows=rows)).to(x.dtype)


def _tensor_core_rows(base: Graph, x: torch.Tensor, norm: torch.Tensor, tune: bool) -> int | None:
    """The tile rows (``TENSOR_CORE_TILES``) the tuned unweighted aggregation over ``base`` of ``x``'s width and
    dtype runs on tensor cores with, or None for the tuned kernel: tensor cores only where they take the dtype
    at torch's precision and, timed once on this graph and width (decided with the graph), beat the kernel."""
    if not tune or resolve_target(base, None) != "gpu" or not tensor_core_precision(x.dtype):
        return None
    key = ("gcn-tensor-cores", x.shape[1], x.dtype, torch.get_float32_matmul_precision())

    def timed() -> int | None:
        kernel, inputs = normalised_aggregation(base, x, None, norm, tune)
        candidates = {"kernel": lambda: kernel.evaluate(inputs, want_arg=False)}
        for name, rows in TENSOR_CORE_TILES.items():
            candidates[name] = lambda rows=rows: _scaled_tensor_core_spmm(base, x, norm, rows)
        times = interleaved_best_ms(candidates, repeat=TENSOR_CORE_TIMINGS)
        return TENSOR_CORE_TILES.get(min(times, key=times.__getitem__))

    return base.cached(key, timed)


def _weights_and_norm(
    g: Graph, dtype: torch.dtype, edge_weight: torch.Tensor | None, loops: bool, normalize: bool, fill: float
) -> tuple[Graph, torch.Tensor | None, torch.Tensor | None]:
    """The graph aggregated over (looped or not), its edge weights (None: all 1) and the normalisation, both in
    ``factor_dtype(dtype)``: float32 for 16-bit features, so no factor is rounded to 16 bits."""
    base = g.with_self_loops() if loops else g
    dtype = factor_dtype(dtype)
    edge_weight = None if edge_weight is None else edge_weight.to(dtype)
    if edge_weight is None:  # the weights and the normalisation depend on the graph alone: kept on it
        key = ("gcn-structure", loops, normalize, fill, dtype)
        return base, *g.cached(key, lambda: _structure_norm(g, base, loops, normalize, fill, dtype))
    weight = _with_loop_weights(g, edge_weight, fill, dtype) if loops else edge_weight
    return base, weight, (_norm(base, weight, dtype) if normalize else None)


def normalised_aggregation(
    base: Graph, x: torch.Tensor, weight: torch.Tensor | None, norm: torch.Tensor, tune: bool = False
) -> tuple[Kernel, dict[str, torch.Tensor]]:
    """The fused normalised SpMM over ``base`` and its inputs by placeholder name (NORM, X, and W where
    weighted; ``weight`` and ``norm`` in ``factor_dtype``, as ``_weights_and_norm`` gives them)."""
    kernel = _gcn_kernel(base, x.shape, TORCH_TO_TE[x.dtype], weight is not None, tune)
    inputs = {"NORM": norm.unsqueeze(1), "X": x}
    if weight is not None:
        inputs["W"] = weight.unsqueeze(1)
    return kernel, inputs


def _loop_weights_gradient(g: Graph, looped_grad: torch.Tensor) -> torch.Tensor:
    """Back through ``_with_loop_weights``: the non-loop edges' own weights, then each vertex's loop, which
    weighed its last existing loop (or the fill, a constant)."""
    src, dst = g.coo()
    kept = (src != dst).nonzero().flatten()
    grad = torch.zeros(g.num_edges, dtype=looped_grad.dtype, device=looped_grad.device)
    grad[kept] = looped_grad[: kept.numel()]
    last_loop = _last_self_loop(g)
    looped = last_loop >= 0
    return grad.index_add_(0, last_loop[looped], looped_grad[kept.numel() :][looped])


def _with_loop_weights(g: Graph, edge_weight: torch.Tensor | None, fill: float, dtype: torch.dtype) -> torch.Tensor:
    """The looped graph's weights (1 for every edge when ``edge_weight`` is None): the non-loop edges'
    own, then one loop per vertex weighing what its last existing loop weighed, else ``fill``."""
    weights = torch.ones(g.num_edges, dtype=dtype, device=g.device) if edge_weight is None else edge_weight
    # loopless vertices point past the weights, at the fill (a gather that also works with no edges at all)
    fill_weight = torch.full((1,), fill, dtype=dtype, device=g.device)
    last_loop = _last_self_loop(g)
    loop_weight = torch.cat([weights, fill_weight])[torch.where(last_loop >= 0, last_loop, g.num_edges)]
    src, dst = g.coo()
    return torch.cat([weights[src != dst], loop_weight])


def _norm(base: Graph, weight: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    """``deg^-1/2`` per vertex (0 where the weighted in-degree is 0)."""
    if weight is None:
        degree = base.in_degrees().to(dtype)
    else:
        degree = gspmm(base, "copy_rhs", "sum", None, weight.unsqueeze(1)).squeeze(1)
    return degree.pow(-0.5).masked_fill(degree <= 0, 0)


def _structure_norm(
    g: Graph, base: Graph, loops: bool, normalize: bool, fill: float, dtype: torch.dtype
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Unweighted GCN: the looped graph's weights (None: all 1) and the normalisation, in ``dtype``."""
    weight = _with_loop_weights(g, None, fill, dtype) if loops and fill != 1.0 else None
    return weight, (_norm(base, weight, dtype) if normalize else None)


def _gcn_kernel(g: Graph, shape: torch.Size, dtype: str, weighted: bool, tune: bool):
    """The fused normalised aggregation, compiled once per graph, shape and dtype."""
    n, d = shape

    def build():
        factor = TORCH_TO_TE[factor_dtype(TORCH_DTYPES[dtype])]
        norm, feat = te.placeholder((None, 1), factor, "NORM"), te.placeholder((None, d), dtype, "X")
        weight = te.placeholder((None, 1), factor, "W")

        def message(s: te.Var, t: te.Var, e: te.Var) -> te.ComputeOp:
            scale = norm[s, 0] * norm[t, 0] * weight[e, 0] if weighted else norm[s, 0] * norm[t, 0]
            return te.compute((d,), lambda i: scale * feat[s, i], dtype=dtype)

        return spmm(g, shared_op(("gcn", d, dtype, weighted), message), "sum", tune=tune)

    return cached_kernel(g, ("gcn-kernel", n, d, dtype, weighted, tune), build)


def gat_attention(
    g: Graph,
    feat: torch.Tensor,
    attn_src: torch.Tensor,
    attn_dst: torch.Tensor,
    negative_slope: float = 0.2,
    dropout: float = 0.0,
    training: bool = False,
    return_attention: bool = False,
    feat_dst: torch.Tensor | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """GAT's attention + aggregation: ``out[v, h] = sum_u alpha[u->v, h] feat[u, h]`` with
    ``alpha = softmax_over_in_edges(leaky_relu(a_src[h] . feat[u, h] + a_dst[h] . feat[v, h]))``.

    Nothing per edge is stored, with or without attention dropout: two fused SpMM passes (fuseGNN's two
    kernels) compute the output from the per-vertex logits: the per-destination log-sum-exp of the scores
    in one streaming pass, then the aggregation weighted by ``exp(score - lse)``, dropout multiplying each
    weight by ``te.keep(seed, edge * heads + head)``, a hashed mask. (In float32 a weight then carries a
    relative error of about one ulp of the lse, ~1e-6 for scores of order 10.) The backward is fused the
    same way (see ``_gat_gradient``): the only per-edge tensor it makes is the E x heads gradient of
    the scores. With ``return_attention`` the weights are built per edge by the ops one by one, with the
    same mask for the same seed.

    ``feat`` is (num_src, heads, d), ``attn_src``/``attn_dst`` (heads, d) (PyG's ``att_src``/``att_dst``
    squeezed). The destinations' logits come from ``feat_dst`` (num_dst, heads, d), by default the first
    num_dst rows of ``feat`` (one vertex set, or a sampled block whose destinations lead its sources).
    """
    feat, attn_src, attn_dst, feat_dst = precision.autocast_inputs("gat_attention", feat, attn_src, attn_dst, feat_dst)
    rows, rows_are = vertex_rows(check_graph(g), "src")
    check_tensor("feat", feat, dims=3, rows=rows, rows_are=rows_are, device=g.device)
    shared = feat_dst is None  # the destinations are feat's first rows
    if shared:
        feat_dst = feat[: g.num_dst_nodes]
    rows, rows_are = vertex_rows(g, "dst")
    check_tensor("feat_dst", feat_dst, dims=3, rows=rows, rows_are=rows_are, like=feat)
    if feat_dst.shape[1:] != feat.shape[1:]:
        raise ValueError(f"feat_dst: expected heads, d = {tuple(feat.shape[1:])} as feat, got {tuple(feat_dst.shape)}")
    for name, attn in (("attn_src", attn_src), ("attn_dst", attn_dst)):
        check_tensor(name, attn, like=feat)
        if attn.shape != feat.shape[1:]:
            raise ValueError(f"{name}: expected shape (heads, d) = {tuple(feat.shape[1:])}, got {tuple(attn.shape)}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"attention dropout must be in [0, 1), got {dropout}")
    p = dropout if training else 0.0
    # one seed drawn where ops.dropout would draw it, so a run is reproduced by torch.manual_seed
    seed = torch.randint(0, 2**62, (1,)) if p > 0 else torch.zeros(1, dtype=torch.int64)
    if return_attention:  # the per-edge weights are asked for: build them
        logit_src, logit_dst = vertex_logits(feat, attn_src), vertex_logits(feat_dst, attn_dst)  # (n, heads)
        return _per_edge_attention(g, logit_src, logit_dst, feat, negative_slope, p, seed)
    destinations = None if shared else feat_dst
    return _gat_attention(g, feat, destinations, attn_src, attn_dst, float(negative_slope), p, seed)[0]


def _gat_fake(ref: GraphRef, feat, feat_dst, attn_src, attn_dst, slope, p, seed) -> tuple[torch.Tensor, torch.Tensor]:
    _, heads, d = feat.shape
    log_total = feat.new_empty((ref.num_dst_nodes, heads), dtype=factor_dtype(feat.dtype))
    return feat.new_empty((ref.num_dst_nodes, heads, d)), log_total


def _gat_gradient(
    g: Graph, feat, feat_dst, attn_src, attn_dst, slope: float, p: float, seed, *, outputs, grads, wants
) -> list[torch.Tensor | None]:
    """Fused, nothing per edge kept but one E x heads gradient of the scores.

    With ``a`` the softmax weights, ``k`` the dropout factor and ``dA = k <G[t], F[s]>``: the softmax's
    backward needs ``S[t] = sum_e a dA`` (one SpMM), then ``dz = a (dA - S[t]) leaky'(z)`` per edge (one
    SDDMM) gives the logits' gradients by two sums over edges, and ``dF[s] = sum_e a k G[t]`` is one SpMM
    over the reversed graph. Every weight is recomputed from the per-vertex logits (two small GEMMs again)
    and the forward's log-sum-exp. The logits' own backward is added into ``dF`` in place (``feat_dst``
    None: the destinations are ``feat``'s first rows), so no n x heads x d product, zero-padded slice
    gradient or sum of two such tensors is made."""
    destinations = feat[: g.num_dst_nodes] if feat_dst is None else feat_dst
    logit_src, logit_dst = fused_logits(feat, destinations, attn_src, attn_dst)
    grad_src, grad_dst, grad_feat = attention_gradients(
        g, logit_src, logit_dst, feat, outputs[1], grads[0], slope, p, int(seed)
    )
    grad_feat.addcmul_(grad_src.unsqueeze(-1), attn_src)  # a fresh kernel output: ours to add into
    if feat_dst is None:
        grad_feat[: g.num_dst_nodes].addcmul_(grad_dst.unsqueeze(-1), attn_dst)
        grad_feat_dst = None
    else:
        grad_feat_dst = (grad_dst.unsqueeze(-1) * attn_dst).to(feat.dtype) if wants[1] else None
    return [
        grad_feat,
        grad_feat_dst,
        attention_vector_gradient(grad_src.to(feat.dtype), feat) if wants[2] else None,
        attention_vector_gradient(grad_dst.to(feat.dtype), destinations) if wants[3] else None,
        None,
    ]


@operator("gat_attention", _gat_fake, _gat_gradient, saves_outputs=(1,), autocast=precision.caster("gat_attention"))
def _gat_attention(
    g: Graph, feat: torch.Tensor, feat_dst: torch.Tensor | None, attn_src: torch.Tensor, attn_dst: torch.Tensor,
    slope: float, p: float, seed: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """``gat_attention`` fused, its inputs checked: (output, per-destination log-sum-exp of the scores)."""
    destinations = feat[: g.num_dst_nodes] if feat_dst is None else feat_dst
    logit_src, logit_dst = fused_logits(feat, destinations, attn_src, attn_dst)
    return fused_attention(g, logit_src, logit_dst, feat, slope, p, int(seed))


def fused_logits(
    feat: torch.Tensor, destinations: torch.Tensor, attn_src: torch.Tensor, attn_dst: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-vertex logits the fused kernels read, in ``factor_dtype``: each a GEMM in the features' dtype
    (rounded once), then widened, so the scores and log-sum-exp built from them stay in float32."""
    dtype = factor_dtype(feat.dtype)
    return vertex_logits(feat, attn_src).to(dtype), vertex_logits(destinations, attn_dst).to(dtype)


def vertex_logits(feat: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
    """``(feat * attn).sum(-1)``, (n, heads), as one GEMM of the (n, heads * d) rows with the block-diagonal
    (heads * d, heads) matrix of ``attn``: it reads ``feat`` once and makes no n x heads x d product."""
    n, heads, d = feat.shape
    blocks = (attn.unsqueeze(-1) * torch.eye(heads, dtype=attn.dtype, device=attn.device).unsqueeze(1)).reshape(
        heads * d, heads
    )
    return feat.reshape(n, heads * d) @ blocks


def attention_vector_gradient(grad_logits: torch.Tensor, feat: torch.Tensor) -> torch.Tensor:
    """The gradient of ``vertex_logits`` in ``attn``, ``sum_n grad_logits[n, h] feat[n, h]`` (heads, d): the
    diagonal blocks of one (heads, heads * d) GEMM."""
    n, heads, d = feat.shape
    blocks = (grad_logits.t() @ feat.reshape(n, heads * d)).view(heads, heads, d)
    return blocks.diagonal(dim1=0, dim2=1).t().contiguous()


def fused_attention(
    g: Graph, logit_src, logit_dst, feat, slope: float, p: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two fused passes, nothing per edge: the log-sum-exp of the scores per destination, then the weighted
    aggregation (times the hashed dropout mask when ``p`` > 0). Returns (output, log-sum-exp)."""
    kernels = _GatKernels(g, feat.shape, TORCH_TO_TE[feat.dtype], slope, p)
    log_total = kernels.run("log_total", EL=logit_src, ER=logit_dst)
    inputs = {"EL": logit_src, "ER": logit_dst, "L": log_total, "F": feat}
    if p > 0:
        inputs["SEED"] = torch.tensor([seed], device=feat.device)
    return kernels.run("aggregate", **inputs), log_total


def _per_edge_attention(
    g: Graph | GraphRef, logit_src, logit_dst, feat, slope: float, p: float, seed: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same attention with the ops one by one: (output, weights E x heads, dropped where p > 0; the mask of
    ``seed``, as the fused kernels draw it)."""
    scores = F.leaky_relu(gsddmm(g, "add", logit_src, logit_dst, "u", "v"), slope)
    alpha = edge_softmax(g, scores)
    if p > 0:
        alpha = dropout_with_seed(alpha, p, seed)
    return SHORTCUTS["u_mul_e_sum"](g, feat, alpha.unsqueeze(-1)), alpha


def attention_gradients(
    g: Graph, logit_src, logit_dst, feat, log_total, grad: torch.Tensor, slope: float, p: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients of (logit_src, logit_dst, feat), recomputing every weight (see ``_gat_gradient``)."""
    kernels = _GatKernels(g, feat.shape, TORCH_TO_TE[feat.dtype], slope, p)
    inputs = {"EL": logit_src, "ER": logit_dst, "L": log_total, "F": feat, "G": grad.contiguous()}
    if p > 0:
        inputs["SEED"] = torch.tensor([seed], device=feat.device)
    row_sum = kernels.run("row_sum", **inputs)
    score_grad = kernels.run("score_grad", **inputs, S=row_sum)  # (E, heads)
    grad_src = SHORTCUTS["copy_e_sum"](g.reverse(), score_grad)
    grad_dst = SHORTCUTS["copy_e_sum"](g, score_grad)
    del inputs["F"]
    return grad_src, grad_dst, kernels.run("feat_grad", **inputs)


class _GatKernels:
    """The fused attention kernels, each compiled on first use and cached on the graph per shape, dtype,
    slope and dropout, so inference never builds the backward's. Forward: "log_total" (per-destination
    log-sum-exp of the scores, one streaming pass), "aggregate" (the output weighted by exp(score - lse)
    times the dropout factor). Backward: "row_sum", "score_grad" (per edge), "feat_grad" (over the reversed
    graph); see ``_gat_gradient``."""

    def __init__(self, g: Graph, shape: torch.Size, dtype: str, slope: float, dropout: float) -> None:
        self.g, self.shape, self.dtype, self.slope, self.dropout = g, tuple(shape), dtype, slope, dropout

    def __getitem__(self, name: str):
        key = ("gat-kernel", name, self.shape, self.dtype, self.slope, self.dropout)
        return cached_kernel(self.g, key, lambda: self._build(name))

    def run(self, name: str, **inputs: torch.Tensor) -> torch.Tensor:
        """Kernel ``name``'s output (inside the ``gat_attention`` operator, whose autograd is its own)."""
        return self[name].evaluate(inputs, want_arg=False)[0]

    def _build(self, name: str):
        _, heads, d = self.shape
        udfs = (heads, d, self.dtype, self.slope, self.dropout)
        op = shared_op(("gat", name, *udfs), lambda s, t, e: _gat_udfs(*udfs)[name](s, t, e))
        if name == "score_grad":
            return sddmm(self.g, op)
        if name == "feat_grad":  # over the reversed graph
            return spmm(self.g.reverse(), op, "sum")
        return spmm(self.g, op, "logsumexp" if name == "log_total" else "sum")


def _gat_udfs(heads: int, d: int, dtype: str, slope: float, dropout: float) -> dict[str, Udf]:
    """The fused attention kernels' UDFs (``_GatKernels``), their vertex data without row counts: one traced
    op serves every graph."""
    factor = TORCH_TO_TE[factor_dtype(TORCH_DTYPES[dtype])]  # logits, log-sum-exp, row sums
    EL, ER = te.placeholder((None, heads), factor, "EL"), te.placeholder((None, heads), factor, "ER")
    L = te.placeholder((None, heads), factor, "L")
    S = te.placeholder((None, heads), factor, "S")
    feat, grad = te.placeholder((None, heads, d), dtype, "F"), te.placeholder((None, heads, d), dtype, "G")
    seed = te.placeholder((1,), "int64", "SEED")

    def logit(s: te.Var, t: te.Var, h: te.Var) -> te.Expr:
        return EL[s, h] + ER[t, h]

    def score(s: te.Var, t: te.Var, h: te.Var) -> te.Expr:
        x = logit(s, t, h)
        return te.where(x > 0, x, x * slope)

    def softmax(s: te.Var, t: te.Var, h: te.Var) -> te.Expr:
        return te.exp(score(s, t, h) - L[t, h])

    def kept(e: te.Var, h: te.Var, x: te.Expr) -> te.Expr:
        return x * te.keep(seed[0], e * heads + h, dropout) if dropout > 0 else x

    def grad_weight(s: te.Var, t: te.Var, e: te.Var, h: te.Var) -> te.Expr:  # dA = k <G[t], F[s]>
        k = te.reduce_axis((0, d))
        return kept(e, h, te.sum(grad[t, h, k] * feat[s, h, k], axis=k))

    def per_head(body):
        return lambda s, t, e: te.compute((heads,), lambda h: body(s, t, e, h))

    def score_grad(s: te.Var, t: te.Var, e: te.Var, h: te.Var) -> te.Expr:
        slope_at = te.where(logit(s, t, h) > 0, 1.0, slope)
        return softmax(s, t, h) * (grad_weight(s, t, e, h) - S[t, h]) * slope_at

    return {
        "log_total": per_head(lambda s, t, e, h: score(s, t, h)),
        "aggregate": lambda s, t, e: te.compute(
            (heads, d), lambda h, i: kept(e, h, softmax(s, t, h)) * feat[s, h, i], dtype=dtype
        ),
        "row_sum": per_head(lambda s, t, e, h: softmax(s, t, h) * grad_weight(s, t, e, h)),
        "score_grad": per_head(score_grad),
        # over the reversed graph the first variable is the original destination
        "feat_grad": lambda t, s, e: te.compute(
            (heads, d), lambda h, i: kept(e, h, softmax(s, t, h)) * grad[t, h, i], dtype=dtype
        ),
    }
