"""The Triton templates against independent references (dense torch, scipy), on CUDA or in Triton's
interpreter: every reducer, GAR and GAS, SDDMM and edge sums, odd widths, multi-axis outputs, the awkward
graphs (empty, isolated vertices, duplicates, self loops, a hub), and gradients."""

from __future__ import annotations

import inspect
from collections import defaultdict

import numpy as np
import pytest
import torch

import featgraph as fg
from featgraph import te
from featgraph.backends import gpu as gpu_backend
from featgraph.backends.gpu.templates import hub_capacity
from featgraph.templates.kernel import default_target
from tests.conftest import adjacency, random_edges
from tests.templates.reference import reduce_messages

CASES = [(0, 0), (1, 0), (7, 3), (40, 200), (150, 1200)]


def hub_edges(n: int, e: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Skewed degrees: half of the edges point at vertex 0."""
    src, dst = random_edges(n, e, seed)
    dst[: e // 2] = 0
    return src, dst


def graph_on(device: torch.device, src: torch.Tensor, dst: torch.Tensor, n: int) -> fg.Graph:
    return fg.Graph(src.to(device), dst.to(device), n)


def copy_u(n: int, d: int, dtype: str = "float32"):
    X = te.placeholder((n, d), dtype=dtype, name="XV")
    return lambda s, t, e: te.compute((d,), lambda i: X[s, i])


@pytest.mark.parametrize("reducer", ["sum", "mean", "max", "min", "logsumexp"])
@pytest.mark.parametrize(("n", "e"), CASES, ids=lambda c: str(c))
def test_spmm_reducers_match_reference(gpu, reducer, n, e):
    d = 13  # not a power of two: masked feature lanes
    src, dst = random_edges(n, e, seed=n + e)
    x = torch.randn(n, d)
    kernel = fg.spmm(graph_on(gpu, src, dst, n), copy_u(n, d), reducer, target="gpu")
    if reducer in ("max", "min"):
        out, arg = kernel.run(return_arg=True, XV=x.to(gpu))
        out, arg = out.cpu(), arg.cpu()
        has_edge = torch.bincount(dst, minlength=n) > 0
        assert bool((arg[~has_edge] == -1).all())
        won = arg[has_edge]
        assert bool((dst[won] == torch.nonzero(has_edge).squeeze(1).unsqueeze(1)).all())  # an in-edge of v
        torch.testing.assert_close(out[has_edge], x[src[won], torch.arange(d)])  # that edge's message won
    else:
        out = kernel(XV=x.to(gpu)).cpu()
    torch.testing.assert_close(out, reduce_messages(x[src], dst, n, reducer))


@pytest.mark.parametrize("reducer", ["max", "min"])
def test_spmm_arg_is_the_first_winner_in_csr_order_like_cpu(gpu, reducer):
    n, e, d = 30, 240, 5
    src, dst = random_edges(n, e, seed=3)
    src[100:140], dst[100:140] = src[0], dst[0]  # many exact ties
    x = torch.randn(n, d)
    got = fg.spmm(graph_on(gpu, src, dst, n), copy_u(n, d), reducer, target="gpu").run(return_arg=True, XV=x.to(gpu))
    want = fg.spmm(fg.Graph(src, dst, n), copy_u(n, d), reducer, target="cpu").run(return_arg=True, XV=x)
    torch.testing.assert_close(got[0].cpu(), want[0])
    assert torch.equal(got[1].cpu(), want[1])


@pytest.mark.parametrize("rows", [1, 4])
@pytest.mark.parametrize("reducer", ["max", "min", "logsumexp"])
def test_nan_and_identity_messages_as_torch_and_the_cpu(gpu, reducer, rows):
    """NaN propagates (``tl.max`` alone would drop it on a GPU), in-edges whose messages are all the
    identity give the identity with their first edge as arg, and only vertices without in-edges get 0;
    values and args as the CPU template's."""
    n, d = 40, 5
    src, dst = hub_edges(n, 400, seed=6)  # vertex 0's messages span several edge chunks
    w = torch.randn(src.numel(), d, dtype=torch.float64)  # edge data: one message per edge
    identity = float("inf") if reducer == "min" else float("-inf")
    w[dst == 2] = identity
    w[torch.nonzero(dst == 0)[150], 1] = float("nan")
    w[dst == 3, 2] = float("nan")
    w[torch.nonzero(dst == 4)[0], 3] = float("nan")
    W = te.placeholder((src.numel(), d), dtype="float64", name="W")
    copy_e = lambda s, t, e: te.compute((d,), lambda i: W[e, i])  # noqa: E731
    kernel = fg.spmm(graph_on(gpu, src, dst, n), copy_e, reducer, target="gpu", rows_per_program=rows)
    want = fg.spmm(fg.Graph(src, dst, n), copy_e, reducer, target="cpu")
    reference = reduce_messages(w, dst, n, reducer)
    assert bool(reference[0, 1].isnan()) and bool((reference[2] == identity).all())
    if reducer == "logsumexp":
        torch.testing.assert_close(kernel(W=w.to(gpu)).cpu(), reference, equal_nan=True)
        return
    got, arg = kernel.run(return_arg=True, W=w.to(gpu))
    torch.testing.assert_close(got.cpu(), reference, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(arg.cpu(), want.run(return_arg=True, W=w)[1])


@pytest.mark.parametrize("rows", [1, 3, 16])
@pytest.mark.parametrize("row_order", ["natural", "degree"])
@pytest.mark.parametrize("reducer", ["sum", "mean", "max", "min", "logsumexp"])
def test_several_rows_per_program_on_a_skewed_graph(gpu, rows, row_order, reducer):
    """Rows packed into one program's edge lanes (a hub row spans many chunks, its neighbours few or none)
    give the CPU template's results, arg included, in either row order."""
    n, e, d = 70, 500, 5
    src, dst = hub_edges(n, e, seed=4)
    dst[dst == 9] = 10  # an isolated vertex between packed rows
    x = torch.randn(n, d, dtype=torch.float64)
    kernel = fg.spmm(
        graph_on(gpu, src, dst, n),
        copy_u(n, d, "float64"),
        reducer,
        target="gpu",
        rows_per_program=rows,
        row_order=row_order,
    )
    want = fg.spmm(fg.Graph(src, dst, n), copy_u(n, d, "float64"), reducer, target="cpu")
    if reducer in ("max", "min"):
        got, arg = kernel.run(return_arg=True, XV=x.to(gpu))
        assert torch.equal(arg.cpu(), want.run(return_arg=True, XV=x)[1])
    else:
        got = kernel(XV=x.to(gpu))
    torch.testing.assert_close(got.cpu(), want(XV=x))
    torch.testing.assert_close(got.cpu(), reduce_messages(x[src], dst, n, reducer))


def power_law_edges(n: int, e: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sources drawn with weight 1 / (rank + 1): a few vertices send most edges (hubs of every degree)."""
    gen = torch.Generator().manual_seed(seed)
    weights = 1.0 / torch.arange(1, n + 1, dtype=torch.float64)
    src = torch.multinomial(weights, e, replacement=True, generator=gen)
    return src[torch.randperm(e, generator=gen)], torch.randint(0, n, (e,), generator=gen)


@pytest.mark.parametrize("threshold", [1, 5, 40, 10_000])  # every source a candidate ... none
@pytest.mark.parametrize("reducer", ["sum", "mean", "max", "logsumexp"])
def test_hybrid_partitioning_stages_hub_rows_and_matches_cpu(gpu, threshold, reducer):
    """Hub sources' rows come from the staged tile, the rest from memory: the result (and the arg) is the
    CPU template's, for a weighted multi-head message, including hubs beyond the tile's capacity."""
    n, e, heads, d = 300, 3000, 2, 7
    src, dst = power_law_edges(n, e, seed=12)
    X, A = te.placeholder((n, heads, d), "float64", "X"), te.placeholder((e, heads), "float64", "A")

    def udf(s, t, k):
        return te.compute((heads, d), lambda h, i: X[s, h, i] * A[k, h])

    x, a = torch.randn(n, heads, d, dtype=torch.float64), torch.randn(e, heads, dtype=torch.float64)
    g = graph_on(gpu, src, dst, n)
    kernel = fg.spmm(g, udf, reducer, target="gpu", hub_threshold=threshold)
    assert kernel.source.count("tl.gather") == 1  # the one source row of the message is staged
    want = fg.spmm(fg.Graph(src, dst, n), udf, reducer, target="cpu")
    if reducer == "max":
        got, arg = kernel.run(return_arg=True, X=x.to(gpu), A=a.to(gpu))
        assert torch.equal(arg.cpu(), want.run(return_arg=True, X=x, A=a)[1])
    else:
        got = kernel(X=x.to(gpu), A=a.to(gpu))
    torch.testing.assert_close(got.cpu(), want(X=x, A=a))
    messages = (x[src] * a.unsqueeze(2)).reshape(e, heads * d)
    torch.testing.assert_close(got.cpu().reshape(n, -1), reduce_messages(messages, dst, n, reducer))
    if threshold == 1:  # every source is a candidate: more hubs than the tile holds
        assert g.hubs(1, 2**20).num_hubs > hub_capacity(kernel.spec)


def test_hub_parameters_are_checked(gpu):
    g = graph_on(gpu, torch.tensor([3, 3, 3, 1, 1, 0, 2, 2, 2]), torch.zeros(9, dtype=torch.int64), 5)
    with pytest.raises(ValueError, match="hub_threshold must be >= 0"):
        fg.spmm(g, copy_u(5, 3), "sum", target="gpu", hub_threshold=-1)
    with pytest.raises(ValueError, match="strategy='gas' takes 0"):
        fg.spmm(g, copy_u(5, 3), "sum", target="gpu", hub_threshold=2, strategy="gas")


def test_default_rows_per_program_fills_the_edge_lanes_for_short_features(gpu):
    sparse = graph_on(gpu, *random_edges(64, 128, seed=5), 64)  # average in-degree 2
    short = fg.spmm(sparse, copy_u(64, 8), "sum", target="gpu").spec.params.rows_per_program
    long = fg.spmm(sparse, copy_u(64, 512), "sum", target="gpu").spec.params.rows_per_program
    assert short > 1 and long <= short
    with pytest.raises(ValueError, match="rows_per_program and hub_threshold are GPU template parameters"):
        fg.spmm(fg.Graph(*random_edges(8, 9, seed=6), 8), copy_u(8, 3), "sum", target="cpu", rows_per_program=4)


@pytest.mark.parametrize("strategy", ["gar", "gas"])
@pytest.mark.parametrize("reducer", ["sum", "mean"])
def test_weighted_aggregation_on_a_skewed_graph_matches_scipy(gpu, strategy, reducer):
    n, e, d = 200, 1500, 37
    src, dst = hub_edges(n, e, seed=5)
    w, x = torch.rand(e, dtype=torch.float64), torch.randn(n, d, dtype=torch.float64)
    W, X = te.placeholder((e, 1), "float64", "W"), te.placeholder((n, d), "float64", "X")
    kernel = fg.spmm(
        graph_on(gpu, src, dst, n),
        lambda s, t, k: te.compute((d,), lambda i: W[k, 0] * X[s, i]),
        reducer,
        target="gpu",
        strategy=strategy,
    )
    got = kernel(W=w.unsqueeze(1).to(gpu), X=x.to(gpu)).cpu().numpy()
    want = adjacency(src, dst, n, w.numpy()) @ x.numpy()
    if reducer == "mean":
        want /= np.maximum(np.bincount(dst.numpy(), minlength=n), 1)[:, None]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "fds",
    [None, lambda s, out: s.split(out.axis[0], factor=8), lambda s, out: s.bind(out.axis[0], "thread.x")],
    ids=["default", "split8", "bind"],
)
def test_multi_axis_messages_with_dst_and_edge_data(gpu, fds):
    n, e, heads, d = 50, 400, 3, 7
    src, dst = random_edges(n, e, seed=11)
    x, y, a = torch.randn(n, heads, d), torch.randn(n, heads, d), torch.randn(e, heads)
    X, Y, A = (
        te.placeholder((n, heads, d), name="X"),
        te.placeholder((n, heads, d), name="Y"),
        te.placeholder((e, heads), name="A"),
    )

    def message(s, t, k):
        return te.compute((heads, d), lambda h, i: X[s, h, i] * A[k, h] + Y[t, h, i])

    got = fg.spmm(graph_on(gpu, src, dst, n), message, "sum", target="gpu", fds=fds)
    got = got(X=x.to(gpu), Y=y.to(gpu), A=a.to(gpu)).cpu()
    torch.testing.assert_close(got, reduce_messages(x[src] * a.unsqueeze(2) + y[dst], dst, n, "sum"))


def test_mlp_aggregation_reduces_inside_the_message(gpu):
    n, e, d, d1 = 60, 500, 40, 8
    src, dst = hub_edges(n, e, seed=2)
    x, w = torch.randn(n, d), torch.randn(d, d1)
    X, W = te.placeholder((n, d), name="XV"), te.placeholder((d, d1), name="W")

    def mlp(s, t, k):
        r = te.reduce_axis((0, d), name="r")
        return te.compute((d1,), lambda i: te.max(te.sum((X[s, r] + X[t, r]) * W[r, i], axis=r), 0.0))

    got = fg.spmm(graph_on(gpu, src, dst, n), mlp, "max", target="gpu")(XV=x.to(gpu), W=w.to(gpu)).cpu()
    messages = torch.relu((x[src] + x[dst]) @ w)
    torch.testing.assert_close(got, reduce_messages(messages, dst, n, "max"), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("reducer", ["sum", "max"])
def test_short_reduction_keeps_the_weight_tile_out_of_the_edge_loop(gpu, reducer):
    """The paper's MLP (d1 = 8): the reduction fits one chunk, so W is loaded in the prologue, once per
    program, and every edge block reuses it."""
    n, e, d1, d2 = 50, 400, 8, 24
    src, dst = hub_edges(n, e, seed=8)
    x, w = torch.randn(n, d1, dtype=torch.float64), torch.randn(d1, d2, dtype=torch.float64)
    X, W = te.placeholder((n, d1), "float64", "XV"), te.placeholder((d1, d2), "float64", "W")

    def mlp(s, t, k):
        r = te.reduce_axis((0, d1), name="r")
        return te.compute((d2,), lambda i: te.max(te.sum((X[s, r] + X[t, r]) * W[r, i], axis=r), 0.0))

    kernel = fg.spmm(graph_on(gpu, src, dst, n), mlp, reducer, target="gpu")
    source = kernel.source
    assert source.index("tl.load(P_W") < source.index("for q0 in range")
    assert source.count("tl.load(P_W") == 1
    xg, wg = x.to(gpu).requires_grad_(), w.to(gpu).requires_grad_()
    got = kernel(XV=xg, W=wg)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    reference = reduce_messages(torch.relu((xr[src] + xr[dst]) @ wr), dst, n, reducer)
    torch.testing.assert_close(got.detach().cpu(), reference.detach())
    probe = torch.randn(n, d2, dtype=torch.float64)
    ours = torch.autograd.grad((got * probe.to(gpu)).sum(), (xg, wg))
    theirs = torch.autograd.grad((reference * probe).sum(), (xr, wr))
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a.cpu(), b)


@pytest.mark.parametrize("order", ["user", "csr"])
@pytest.mark.parametrize(("n", "e"), CASES, ids=lambda c: str(c))
def test_sddmm_dot_attention_in_user_edge_order(gpu, order, n, e):
    heads, d = 2, 19
    src, dst = random_edges(n, e, seed=n + e)
    x = torch.randn(n, heads, d)
    X = te.placeholder((n, heads, d), name="XV")

    def dot(s, t, k):
        r = te.reduce_axis((0, d), name="r")
        return te.compute((heads,), lambda h: te.sum(X[s, h, r] * X[t, h, r], axis=r))

    got = fg.sddmm(graph_on(gpu, src, dst, n), dot, target="gpu", edge_order=order)(XV=x.to(gpu)).cpu()
    torch.testing.assert_close(got, (x[src] * x[dst]).sum(2))


def test_edge_kernels_visit_user_order_while_inputs_fit_the_l2_else_hilbert(gpu, monkeypatch):
    """Inputs in the L2 come from cache in any order; larger ones are visited along the Hilbert curve."""
    n, e, d = 60, 900, 12
    src, dst = random_edges(n, e, seed=21)
    X = te.placeholder((n, d), "float64", "XV")

    def dot(s, t, k):
        r = te.reduce_axis((0, d), name="r")
        return te.compute((1,), lambda i: te.sum(X[s, r] * X[t, r], axis=r))

    x = torch.randn(n, d, dtype=torch.float64)
    for l2_bytes, want in ((n * d * 8, "user"), (n * d * 8 - 1, "hilbert")):
        monkeypatch.setattr(gpu_backend, "l2_cache_bytes", lambda device, size=l2_bytes: size)
        g = graph_on(gpu, src, dst, n)
        kernel = fg.sddmm(g, dot, target="gpu")
        assert kernel.spec.params.edge_order == want
        torch.testing.assert_close(kernel(XV=x.to(gpu)).cpu(), (x[src] * x[dst]).sum(1, keepdim=True))
        summed = fg.templates.edge_sum(g, dot, target="gpu")
        assert summed.spec.params.edge_order == want
        torch.testing.assert_close(summed(XV=x.to(gpu)).cpu(), (x[src] * x[dst]).sum().view(1))


def test_tree_reduce_and_split_reduce_axis_give_the_same_dot(gpu):
    n, e, d = 40, 300, 70
    src, dst = random_edges(n, e, seed=8)
    x = torch.randn(n, d, dtype=torch.float64)
    X = te.placeholder((n, d), "float64", "XV")

    def dot(s, t, k):
        r = te.reduce_axis((0, d), name="r")
        return te.compute((1,), lambda i: te.sum(X[s, r] * X[t, r], axis=r))

    g = graph_on(gpu, src, dst, n)
    for fds in (lambda s, out: s.tree_reduce(out.reduce_axis[0]), lambda s, out: s.split(out.reduce_axis[0], 16)):
        got = fg.sddmm(g, dot, target="gpu", fds=fds)(XV=x.to(gpu)).cpu()
        torch.testing.assert_close(got, (x[src] * x[dst]).sum(1, keepdim=True))


def test_edge_sum_adds_every_edge(gpu):
    n, e, d = 80, 700, 9
    src, dst = random_edges(n, e, seed=4)
    x, y = torch.randn(n, d, dtype=torch.float64), torch.randn(n, 3, dtype=torch.float64)
    X, Y = te.placeholder((n, d), "float64", "X"), te.placeholder((n, 3), "float64", "Y")
    kernel = fg.templates.edge_sum(
        graph_on(gpu, src, dst, n), lambda s, t, k: te.compute((d, 3), lambda i, j: X[s, i] * Y[t, j]), target="gpu"
    )
    torch.testing.assert_close(kernel(X=x.to(gpu), Y=y.to(gpu)).cpu(), x[src].T @ y[dst])


def test_intrinsics_match_torch(gpu):
    n, e = 30, 200
    src, dst = random_edges(n, e, seed=6)
    a, b = torch.rand(n, 4, dtype=torch.float64) + 0.5, torch.randn(n, 4, dtype=torch.float64)
    A, B = te.placeholder((n, 4), "float64", "A"), te.placeholder((n, 4), "float64", "B")
    udfs = {
        "exp-log-sqrt": (
            lambda s, t, i: te.exp(B[t, i]) + te.log(A[s, i]) * te.sqrt(A[t, i]),
            lambda x, y, u, v: torch.exp(v) + torch.log(x) * torch.sqrt(y),
        ),
        "tanh-sigmoid-abs": (
            lambda s, t, i: te.tanh(B[s, i] * 3) - te.sigmoid(B[t, i]) * te.abs(B[s, i]),
            lambda x, y, u, v: torch.tanh(u * 3) - torch.sigmoid(v) * u.abs(),
        ),
        "where-compare-minmax": (
            lambda s, t, i: te.where(B[s, i] > B[t, i], te.max(A[s, i], B[t, i]), te.min(A[t, i], 0.25)),
            lambda x, y, u, v: torch.where(u > v, torch.maximum(x, v), torch.clamp(y, max=0.25)),
        ),
        "floordiv-mod-cast": (
            lambda s, t, i: (B[s, i] * 5) // 2 + (B[t, i] * 7) % 3 + te.cast(B[s, i], "float16"),
            lambda x, y, u, v: torch.floor(u * 5 / 2) + torch.remainder(v * 7, 3) + u.half().double(),
        ),
        "axis-index-as-value": (lambda s, t, i: B[s, i] * i, lambda x, y, u, v: u * torch.arange(4)),
    }
    g = graph_on(gpu, src, dst, n)
    for name, (udf, reference) in udfs.items():
        kernel = fg.sddmm(g, lambda s, t, k, udf=udf: te.compute((4,), lambda i: udf(s, t, i)), target="gpu")
        got = kernel(**{p: v.to(gpu) for p, v in (("A", a), ("B", b)) if p in kernel.placeholder_names}).cpu()
        torch.testing.assert_close(got, reference(a[src], a[dst], b[src], b[dst]), msg=name)


def test_dropout_hash_is_the_cpu_backends(gpu):
    n, e, heads = 40, 600, 4
    src, dst = random_edges(n, e, seed=12)
    seed = torch.tensor([123456789])
    S = te.placeholder((1,), "int64", "SEED")
    X = te.placeholder((n, heads), "float32", "X")

    def udf(s, t, k):
        return te.compute((heads,), lambda h: X[s, h] * te.keep(S[0], k * heads + h, 0.3))

    x = torch.rand(n, heads) + 1
    got = fg.sddmm(graph_on(gpu, src, dst, n), udf, target="gpu")(X=x.to(gpu), SEED=seed.to(gpu)).cpu()
    want = fg.sddmm(fg.Graph(src, dst, n), udf, target="cpu")(X=x, SEED=seed)
    torch.testing.assert_close(got, want)
    assert 0.2 < float((got == 0).float().mean()) < 0.4


def test_gradients_of_a_udf_gradcheck(gpu):
    n, e, d, d1 = 5, 14, 2, 2
    src, dst = random_edges(n, e, seed=1)
    g = graph_on(gpu, src, dst, n)
    X, W, A = (
        te.placeholder((n, d), "float64", "XV"),
        te.placeholder((d, d1), "float64", "W"),
        te.placeholder((e, 1), "float64", "A"),
    )

    def mlp(s, t, k):
        r = te.reduce_axis((0, d), name="r")
        return te.compute((d1,), lambda i: A[k, 0] * te.tanh(te.sum((X[s, r] - X[t, r]) * W[r, i], axis=r)))

    def make(reducer):
        kernel = fg.spmm(g, mlp, reducer, target="gpu")
        return lambda x, w, a: kernel(XV=x, W=w, A=a)

    inputs = [
        torch.randn(n, d, dtype=torch.float64),
        torch.randn(d, d1, dtype=torch.float64),
        torch.rand(e, 1, dtype=torch.float64),
    ]
    inputs = [t.to(gpu).requires_grad_() for t in inputs]
    for reducer in ("sum", "max", "logsumexp"):
        assert torch.autograd.gradcheck(make(reducer), inputs, eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("reducer", ["max", "min"])
def test_winner_gradient_of_weights_no_output_axis_pins(gpu, reducer):
    """Dense weights read at a constant (``W[0]``) or summed over a reduce axis (``te.sum(V[k])``): every
    winner adds into the same positions, which do not vary along the lanes."""
    n, e, d = 9, 30, 3
    src, dst = random_edges(n, e, seed=7)
    X = te.placeholder((n, d), "float64", "X")
    W, V = te.placeholder((4,), "float64", "W"), te.placeholder((5,), "float64", "V")

    def udf(s, t, i):
        k = te.reduce_axis((0, 5), name="k")
        return te.compute((d,), lambda j: X[s, j] * W[0] + te.sum(V[k] * X[t, j], axis=k))

    gen = torch.Generator().manual_seed(8)
    x, w, v = (torch.randn(shape, generator=gen, dtype=torch.float64) for shape in ((n, d), (4,), (5,)))
    upstream = torch.randn(n, d, generator=gen, dtype=torch.float64)
    kernel = fg.spmm(graph_on(gpu, src, dst, n), udf, reducer, target="gpu")
    leaves = [t.to(gpu).requires_grad_() for t in (x, w, v)]
    got = torch.autograd.grad((kernel(X=leaves[0], W=leaves[1], V=leaves[2]) * upstream.to(gpu)).sum(), leaves)
    leaves = [t.clone().requires_grad_() for t in (x, w, v)]
    messages = leaves[0][src] * leaves[1][0] + leaves[2].sum() * leaves[0][dst]
    want = torch.autograd.grad((reduce_messages(messages, dst, n, reducer) * upstream).sum(), leaves)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a.cpu(), b)


def test_bad_inputs_name_the_problem(gpu):
    n = 10
    g = graph_on(gpu, *random_edges(n, 30, seed=9), n)
    kernel = fg.spmm(g, copy_u(n, 4), "sum", target="gpu")
    with pytest.raises(TypeError, match="placeholder dtype is float32"):
        kernel(XV=torch.randn(n, 4, dtype=torch.float64, device=gpu))
    with pytest.raises(ValueError, match="expected shape"):
        kernel(XV=torch.randn(n, 5, device=gpu))
    with pytest.raises(ValueError, match="num_partitions is a CPU template parameter"):
        fg.spmm(g, copy_u(n, 4), "sum", target="gpu", num_partitions=2)
    x = torch.randn(4, n, device=gpu).T  # not contiguous: made contiguous, not rejected, not modified
    before = x.clone()
    torch.testing.assert_close(kernel(XV=x), kernel(XV=x.contiguous()))
    assert torch.equal(x, before)


def test_target_follows_the_graph_and_default_target(gpu):
    n = 12
    g = graph_on(gpu, *random_edges(n, 40, seed=10), n)
    assert fg.spmm(g, copy_u(n, 3), "sum").target == ("gpu" if gpu.type == "cuda" else "cpu")
    with fg.default_target("gpu"):
        assert fg.spmm(g, copy_u(n, 3), "sum").target == "gpu"
    with pytest.raises(ValueError, match="target must be one of"), fg.default_target("tpu"):
        pass


def _launch_classes(monkeypatch) -> dict[str, set]:
    """Records, per kernel and constants, the class Triton compiles each launch for: every integer argument's
    divisibility by 16 (or being 1) and every tensor's 16-byte alignment, less what the kernel declares
    unspecialised (``do_not_specialize``, ``do_not_specialize_on_alignment``), on CUDA or the interpreter."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    classes: dict[str, set] = defaultdict(set)

    def declared(fn, option: str) -> set:
        return set((getattr(fn, "kwargs", None) or vars(fn)).get(option) or ())

    def recording(original):
        def run(self, *args, grid, warmup, **kwargs):
            names = list(inspect.signature(self.fn).parameters)
            free, unaligned = declared(self, "do_not_specialize"), declared(self, "do_not_specialize_on_alignment")
            key = []
            for name, value in zip(names, args, strict=False):
                if name in free or (name in unaligned and isinstance(value, torch.Tensor)):
                    continue
                if isinstance(value, torch.Tensor):
                    key.append((name, value.data_ptr() % 16 == 0))
                elif isinstance(value, int) and not isinstance(value, bool):
                    key.append((name, value == 1, value % 16 == 0))
            constants = sorted((k, str(v)) for k, v in kwargs.items())
            classes[f"{self.fn.__code__.co_filename}: {self.fn.__name__} {constants}"].add(tuple(key))
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)

        return run

    for kind in (InterpretedFunction, JITFunction):
        monkeypatch.setattr(kind, "run", recording(kind.run))
    return classes


def test_a_kernel_compiles_once_for_graphs_of_every_size(gpu, monkeypatch):
    """Mini-batch blocks differ in their edge and vertex counts, and a derived graph's index rows (the reversed
    graph's, in GAT's backward) start wherever the count puts them: none of that may change the class Triton
    compiles a launch for, or each new class compiles the kernel again in the middle of training."""
    classes = _launch_classes(monkeypatch)
    heads, d = 2, 3
    for n, e in [(5, 1), (16, 16), (17, 33), (40, 47), (41, 200), (33, 81)]:
        src, dst = random_edges(n, e, seed=n + e)
        g = graph_on(gpu, src, dst, n)
        feat = torch.randn(n, heads, d, device=gpu, requires_grad=True)
        attn = torch.randn(heads, d, device=gpu)
        x = torch.randn(n, 7, device=gpu, requires_grad=True)
        with default_target("gpu"):  # CPU tensors through the Triton kernels under the interpreter
            out = fg.ops.gat_attention(g, feat, attn, attn, dropout=0.3, training=True)
            pooled = fg.ops.gspmm(g, "copy_lhs", "max", fg.ops.dropout(x, 0.4), None)
            (out.sum() + pooled.sum()).backward()
        assert feat.grad is not None and x.grad is not None
    assert classes, "no kernel launch was recorded"
    assert {name: len(seen) for name, seen in classes.items() if len(seen) > 1} == {}
