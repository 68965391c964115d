"""float16/bfloat16 kernels: read in their own dtype, accumulated in float32, stored in the inputs' dtype.

The bound every result is held to, against a float64 reference computed from the same (already rounded)
16-bit inputs: a float32 accumulation of ``k`` terms errs by at most ``k * 2^-24 * sum|terms|``, and the
final rounding to the output dtype adds ``u * |result|`` (u = 2^-8 for bfloat16, 2^-11 for float16), or
half the subnormal spacing where the result is subnormal (2^-25 for float16).
"""

from __future__ import annotations

import math

import pytest
import torch

import featgraph as fg
from featgraph import te
from featgraph.ops import gsddmm, gspmm

UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}
UNDERFLOW = {torch.bfloat16: 2.0**-134, torch.float16: 2.0**-25, torch.float32: 2.0**-150}  # half a subnormal step
HALF = [torch.bfloat16, torch.float16]
TE_NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}
HUB_IN_EDGES = 10_000


def hub_graph(n: int = 600, isolated: int = 50, hub: int = HUB_IN_EDGES, others: int = 3000) -> fg.Graph:
    """Vertex 0 receives ``hub`` in-edges; ``others`` more random edges; the last ``isolated`` vertices
    have no edge at all."""
    gen = torch.Generator().manual_seed(0)
    live = n - isolated
    src = torch.randint(0, live, (hub + others,), generator=gen)
    dst = torch.cat([torch.zeros(hub, dtype=torch.int64), torch.randint(0, live, (others,), generator=gen)])
    return fg.Graph(src, dst, n)


def assert_within_bound(
    got: torch.Tensor,
    ref: torch.Tensor,
    terms: torch.Tensor,
    count: torch.Tensor | int,
    extra: torch.Tensor | float = 0,
) -> None:
    """``|got - ref| <= count * 2^-24 * terms + u * |ref| + extra`` elementwise (``terms``: the sum of the
    absolute terms, ``count``: how many terms each element adds up), ``u`` the unit roundoff of ``got``'s
    dtype (or half its subnormal step), ``extra`` what a rounding before the kernel adds."""
    count = count if isinstance(count, int) else count.view(-1, *[1] * (ref.dim() - 1)).double()
    rounding = torch.maximum(UNIT_ROUNDOFF[got.dtype] * ref.abs(), torch.tensor(UNDERFLOW[got.dtype]))
    bound = count * 2.0**-24 * terms + rounding + extra
    error = (got.double() - ref).abs()
    assert torch.all(error <= bound), f"worst error over bound: {(error / bound.clamp(min=1e-300)).max():.3g}"


def half_inputs(g: fg.Graph, d: int, dtype: torch.dtype, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(g.num_nodes, d, generator=gen).to(dtype)
    w = torch.rand(g.num_edges, 1, generator=gen).to(dtype)
    return x, w


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("reducer", ["sum", "mean", "max", "min"])
def test_spmm_on_a_hub_is_within_the_float32_accumulation_bound(dtype, reducer):
    g = hub_graph()
    x, w = half_inputs(g, 37, dtype)
    got = gspmm(g, "mul", reducer, x, w)
    assert got.dtype == dtype and got.shape == (g.num_nodes, 37)
    ref = gspmm(g, "mul", reducer, x.double(), w.double())
    terms = gspmm(g, "mul", "mean" if reducer == "mean" else "sum", x.double().abs(), w.double())
    assert_within_bound(got, ref, terms, g.in_degrees() + 1)
    assert torch.all(got[-50:] == 0)  # isolated vertices


@pytest.mark.parametrize("dtype", HALF)
def test_logsumexp_on_a_hub_is_within_the_bound(dtype):
    g = hub_graph()
    n, d = g.num_nodes, 5
    XV = te.placeholder((n, d), dtype=TE_NAMES[dtype], name="XV")
    kernel = fg.spmm(g, lambda s, t, e: te.compute((d,), lambda i: XV[s, i]), "logsumexp")
    x = half_inputs(g, d, dtype)[0]
    got = kernel(XV=x)
    assert got.dtype == dtype
    src, dst = g.coo()
    ref = torch.full((n, d), float("-inf"), dtype=torch.float64)
    ref = ref.scatter_reduce(0, dst.view(-1, 1).expand(-1, d), x.double()[src], "amax")
    shares = torch.zeros(n, d, dtype=torch.float64).index_add_(0, dst, (x.double()[src] - ref[dst]).exp())
    ref = torch.where(shares > 0, ref + shares.log(), torch.zeros_like(ref))
    # the sum of exp(x - max) errs relatively by degree * 2^-24 (plus fg_exp's 2 ulp a term): its log absolutely
    assert_within_bound(got, ref, torch.full_like(ref, 4.0), g.in_degrees() + 1)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("shape", [(67,), (1,), (2,), (31,), (32,), (33,), (3, 64), (2, 95)])
def test_dot_attention_sddmm_is_within_the_bound(dtype, shape):
    """Widths around the bfloat16 pairwise dot's 32-element blocks (a masked tail, none, a single element)
    and per-head rows, whose dots run along the last axis."""
    g = hub_graph()
    d = shape[-1]
    x = half_inputs(g, math.prod(shape), dtype)[0].view(-1, *shape)
    y = half_inputs(g, math.prod(shape), dtype, seed=2)[0].view(-1, *shape)
    got = gsddmm(g, "dot", x, y)
    assert got.dtype == dtype and got.shape == (g.num_edges, *shape[:-1], 1)
    ref = gsddmm(g, "dot", x.double(), y.double())
    terms = gsddmm(g, "dot", x.double().abs(), y.double().abs())
    assert_within_bound(got, ref, terms, d)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("reducer", ["sum", "mean", "max"])
def test_gradients_are_half_precision_and_within_the_bound(dtype, reducer):
    g = hub_graph()
    x, w = half_inputs(g, 19, dtype)
    x.requires_grad_(True)
    w.requires_grad_(True)
    out = gspmm(g, "mul", reducer, x, w)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    gx, gw = torch.autograd.grad(out, (x, w), grad)
    assert gx.dtype == dtype and gw.dtype == dtype
    x64, w64 = x.detach().double().requires_grad_(True), w.detach().double().requires_grad_(True)
    rx, rw = torch.autograd.grad(gspmm(g, "mul", reducer, x64, w64), (x64, w64), grad.double())
    a64, b64 = x64.detach().abs().requires_grad_(True), w64.detach().abs().requires_grad_(True)
    if reducer == "max":  # the absolute terms of the winners' edges: the reference's winners, weighted
        tx, tw = rx.abs(), rw.abs()
    else:
        tx, tw = torch.autograd.grad(gspmm(g, "mul", reducer, a64, b64), (a64, b64), grad.double().abs())
    terms_per_element = max(int(g.in_degrees().max()), int(g.out_degrees().max()), 19) + 1
    # mean's gradient is divided by the in-degree in its own dtype, as torch divides: one more rounding a term
    slack = (lambda t: UNIT_ROUNDOFF[dtype] * t + terms_per_element * UNDERFLOW[dtype]) if reducer == "mean" else None
    assert_within_bound(gx, rx, tx, terms_per_element, slack(tx) if slack else 0)
    assert_within_bound(gw, rw, tw, terms_per_element, slack(tw) if slack else 0)


@pytest.mark.parametrize("dtype", HALF)
def test_empty_graph_and_unit_features_keep_the_dtype(dtype):
    empty = fg.Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 4)
    x = torch.randn(4, 1).to(dtype)
    out = gspmm(empty, "copy_lhs", "sum", x, None)
    assert out.dtype == dtype and torch.equal(out, torch.zeros(4, 1, dtype=dtype))
    edges = gsddmm(empty, "dot", x, x)
    assert edges.dtype == dtype and edges.shape == (0, 1)


def test_mixed_dtypes_promote_as_torch_does_and_ops_refuse_them():
    """A template UDF over bfloat16 features and float32 edge weights gives a float32 result (torch's
    promotion), within the float32 accumulation bound of the same inputs; bfloat16 with float16 gives
    float32 too. The DGL-style ops take one dtype and name the operands that differ."""
    g = hub_graph()
    n, d = g.num_nodes, 8
    x, _ = half_inputs(g, d, torch.bfloat16)
    w = torch.rand(g.num_edges, generator=torch.Generator().manual_seed(5))
    XV = te.placeholder((n, d), dtype="bfloat16", name="XV")
    for weight in (w, w.half()):
        W = te.placeholder((g.num_edges,), dtype=TE_NAMES[weight.dtype], name="W")
        udf = lambda s, t, e, W=W: te.compute((d,), lambda i: XV[s, i] * W[e])  # noqa: E731
        got = fg.spmm(g, udf, "sum")(XV=x, W=weight)
        assert got.dtype == torch.float32
        ref = gspmm(g, "mul", "sum", x.double(), weight.double().view(-1, 1))
        terms = gspmm(g, "mul", "sum", x.double().abs(), weight.double().view(-1, 1))
        assert_within_bound(got, ref, terms, g.in_degrees() + 1)
    with pytest.raises(TypeError, match="lhs and rhs must share one dtype"):
        gspmm(g, "mul", "sum", x, w.view(-1, 1))


def every_bit_pattern_graph() -> fg.Graph:
    """65536 edges, one per 16-bit pattern, over 256 vertices."""
    ids = torch.arange(1 << 16)
    return fg.Graph(ids % 256, ids // 256, 256)


@pytest.mark.parametrize("dtype", HALF)
def test_every_16_bit_value_is_read_and_written_exactly(dtype):
    g = every_bit_pattern_graph()
    values = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(dtype).view(-1, 1)
    W = te.placeholder((g.num_edges, 1), dtype=TE_NAMES[dtype], name="W")
    got = fg.sddmm(g, lambda s, t, e: te.compute((1,), lambda i: W[e, i]))(W=values)
    assert got.dtype == dtype
    nan = values.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int16), values[~nan].view(torch.int16))  # -0.0 and subnormals too


@pytest.mark.parametrize("dtype", HALF)
def test_rounding_to_16_bits_matches_torch(dtype):
    """float32 values of every exponent (subnormal, overflowing, ties) rounded by the kernel's conversion."""
    g = every_bit_pattern_graph()
    gen = torch.Generator().manual_seed(4)
    bits = torch.randint(-(2**31), 2**31 - 1, (g.num_edges,), generator=gen, dtype=torch.int64).to(torch.int32)
    ties = torch.tensor([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-11, 65520.0, 65519.0, 2.0**-25, 2.0**-24 * 1.5])
    values = bits.view(torch.float32).clone()
    values[: ties.numel()] = ties
    F = te.placeholder((g.num_edges, 1), name="F")
    name = TE_NAMES[dtype]
    got = fg.sddmm(g, lambda s, t, e: te.compute((1,), lambda i: te.cast(F[e, i], name)))(F=values.view(-1, 1))
    expected = values.to(dtype).float().view(-1, 1)
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", HALF)
def test_gpu_target_reads_and_stores_16_bits_within_the_bound(gpu, dtype):
    """The Triton kernels load 16-bit data, accumulate in float32 and store the inputs' dtype: SpMM sum and
    max, its gradients, dot attention. Triton's interpreter truncates a float32 stored to bfloat16 (a GPU
    rounds to nearest even): the bound allows twice the rounding term."""
    g = hub_graph(n=60, isolated=5, hub=600, others=200)
    truncation = UNIT_ROUNDOFF[dtype]
    x, w = half_inputs(g, 9, dtype)
    on_gpu, xg, wg = g.to(gpu), x.to(gpu).requires_grad_(True), w.to(gpu)
    ones = torch.ones(g.num_nodes, 9, dtype=dtype, device=gpu)
    with fg.default_target("gpu"):
        spmm = {r: gspmm(on_gpu, "mul", r, xg.detach(), wg).cpu() for r in ("sum", "max")}
        gx = torch.autograd.grad(gspmm(on_gpu, "mul", "sum", xg, wg), xg, ones)[0].cpu()
        dot = gsddmm(on_gpu, "dot", xg.detach(), xg.detach()).cpu()
    ones = ones.cpu()
    x64, w64 = x.detach().double(), w.double()
    for reducer, got in spmm.items():
        assert got.dtype == dtype
        ref, terms = gspmm(g, "mul", reducer, x64, w64), gspmm(g, "mul", "sum", x64.abs(), w64)
        assert_within_bound(got, ref, terms, g.in_degrees() + 1, truncation * ref.abs())
    assert gx.dtype == dtype
    rx = gspmm(g.reverse(), "mul", "sum", ones.double(), w64)
    assert_within_bound(gx, rx, rx.abs(), int(g.out_degrees().max()) + 1, truncation * rx.abs())
    assert dot.dtype == dtype
    ref, terms = gsddmm(g, "dot", x64, x64), gsddmm(g, "dot", x64.abs(), x64.abs())
    assert_within_bound(dot, ref, terms, 9, truncation * ref.abs())


@pytest.mark.parametrize("dtype", HALF)
def test_edge_softmax_and_fused_gcn_gat_keep_the_dtype_within_a_few_roundings(dtype):
    """Ops built from several kernels round between them: edge softmax and GCN aggregation stay within two
    roundings of the largest result; GAT's attention scores are rounded before their exp, which turns
    the score's rounding (u * |score|) into a relative error of the weight: within 16 u."""
    from featgraph import ops

    g = hub_graph(n=200, isolated=10, hub=2000, others=1000)
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(g.num_nodes, 4, 8, generator=gen).to(dtype)
    scores = torch.randn(g.num_edges, 4, 1, generator=gen).to(dtype)
    left, right = torch.randn(4, 8, generator=gen).to(dtype), torch.randn(4, 8, generator=gen).to(dtype)
    cases = (
        (lambda s: ops.edge_softmax(g, s), scores, 2),
        (lambda h: ops.gcn_aggregate(g, h.reshape(g.num_nodes, 32)), x, 2),
        (lambda h: ops.gat_attention(g, h, left.to(h.dtype), right.to(h.dtype)), x, 16),
    )
    for op, data, roundings in cases:
        inputs, wide = data.clone().requires_grad_(True), data.double().requires_grad_(True)
        out, ref = op(inputs), op(wide)
        upstream = torch.randn(out.shape, generator=gen).to(dtype)
        (grad,) = torch.autograd.grad(out, inputs, upstream)
        (ref_grad,) = torch.autograd.grad(ref, wide, upstream.double())
        assert out.dtype == dtype and grad.dtype == dtype
        for got, want in ((out, ref), (grad, ref_grad)):
            assert (got.double() - want).abs().max() <= roundings * UNIT_ROUNDOFF[dtype] * want.abs().max()


@pytest.mark.parametrize("heads", [1, 3, 4, 7, 8, 12, 15])
def test_short_bfloat16_rows_widened_before_the_loop_are_within_the_bound(heads):
    """Per-head messages from two bfloat16 rows shorter than a SIMD register (widened per edge into a float
    buffer, eight and four at a time and the rest one by one) against a float64 reference."""
    g = hub_graph()
    n = g.num_nodes
    EL = te.placeholder((n, heads), dtype="bfloat16", name="EL")
    ER = te.placeholder((n, heads), dtype="bfloat16", name="ER")
    kernel = fg.spmm(g, lambda s, t, e: te.compute((heads,), lambda h: EL[s, h] * ER[t, h] + EL[s, h]), "sum")
    assert "fg_widen_bf16(&P_EL" in kernel.source and "fg_widen_bf16(&P_ER" in kernel.source
    left, right = half_inputs(g, heads, torch.bfloat16)[0], half_inputs(g, heads, torch.bfloat16, seed=2)[0]
    got = kernel(EL=left, ER=right)
    src, dst = g.coo()
    a, b = left.double()[src], right.double()[dst]
    ref = torch.zeros(n, heads, dtype=torch.float64).index_add_(0, dst, a * b + a)
    terms = torch.zeros(n, heads, dtype=torch.float64).index_add_(0, dst, (a * b).abs() + a.abs())
    assert_within_bound(got, ref, terms, 2 * (g.in_degrees() + 1))


@pytest.mark.parametrize("dtype", HALF)
def test_a_compute_dtype_stores_a_16_bit_result_of_float32_factors(dtype):
    """``te.compute(..., dtype=)``: 16-bit features weighted by float32 per-edge factors accumulate in float32
    and are stored once in the features' dtype (promotion alone would give float32), within the bound."""
    g = hub_graph()
    x, _ = half_inputs(g, 9, dtype)
    w = torch.rand(g.num_edges, 1, generator=torch.Generator().manual_seed(5)) * 3
    X = te.placeholder((g.num_nodes, 9), TE_NAMES[dtype], "X")
    W = te.placeholder((g.num_edges, 1), "float32", "W")
    kernel = fg.templates.spmm(
        g, lambda s, t, e: te.compute((9,), lambda i: W[e, 0] * X[s, i], dtype=TE_NAMES[dtype]), "sum"
    )
    got = kernel(X=x, W=w)
    src, dst = g.coo()
    terms = w.double() * x.double()[src]
    ref = torch.zeros(g.num_nodes, 9, dtype=torch.float64).index_add_(0, dst, terms)
    assert got.dtype == dtype
    assert_within_bound(got, ref, torch.zeros_like(ref).index_add_(0, dst, terms.abs()), g.in_degrees() + 1)
    with pytest.raises(ValueError, match="compute dtype must be one of"):
        te.compute((9,), lambda i: X[0, i], dtype="int64")
