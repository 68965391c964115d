import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import featgraph as fg
from featgraph import te
from featgraph.graph.partition import cut_points
from tests.conftest import adjacency, assert_gpu_target_agrees, random_edges
from tests.templates.reference import reduce_messages

REDUCERS = ["sum", "mean", "max", "min", "logsumexp"]
GRAPHS = [(0, 0), (1, 0), (9, 0), (7, 3), (40, 200), (130, 1500)]


def copy_u(n: int, d: int, dtype: str = "float32"):
    XV = te.placeholder((n, d), dtype=dtype, name="XV")
    return lambda src, dst, eid: te.compute((d,), lambda i: XV[src, i])


def check_arg(out, arg, messages, dst, reducer):
    """Each output element equals the message of the edge its arg names (NaN: a NaN message), that edge
    enters the row, and only rows without in-edges have no arg (and 0)."""
    has = arg >= 0
    rows = torch.arange(out.shape[0]).unsqueeze(1).expand_as(arg)
    assert torch.all(dst[arg[has]] == rows[has])
    cols = torch.arange(out.shape[1]).unsqueeze(0).expand_as(arg)
    torch.testing.assert_close(messages[arg[has], cols[has]], out[has], rtol=0, atol=0, equal_nan=True)
    assert torch.all(out[~has] == 0)
    assert torch.equal(has.all(1), torch.bincount(dst, minlength=out.shape[0]) > 0)


@pytest.mark.parametrize("reducer", REDUCERS)
@pytest.mark.parametrize(("n", "e"), GRAPHS)
@pytest.mark.parametrize("d", [1, 13])
def test_copy_u_against_scipy_and_dense(reducer, n, e, d):
    src, dst = random_edges(n, e, seed=n + e)
    g = fg.Graph(src, dst, n)
    x = torch.randn(n, d)
    out, ref = None, reduce_messages(x[src], dst, n, reducer)
    kernel = fg.spmm(g, copy_u(n, d), reducer)
    out = kernel(XV=x)
    assert out.shape == (n, d)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    if reducer == "sum":
        scipy_ref = torch.from_numpy(adjacency(src, dst, n) @ x.double().numpy())
        torch.testing.assert_close(out.double(), scipy_ref, rtol=1e-5, atol=1e-5)
    if reducer in ("max", "min"):
        out2, arg = kernel.run(return_arg=True, XV=x)
        assert torch.equal(out, out2)
        check_arg(out, arg, x[src], dst, reducer)


@pytest.mark.parametrize(
    "params",
    [
        {"num_partitions": 3},
        {"num_feature_tiles": 4},
        {"num_partitions": 4, "num_feature_tiles": 3},
        {"row_order": "degree"},
        {"num_threads": 1},
    ],
)
@pytest.mark.parametrize("reducer", REDUCERS)
def test_traversal_parameters_do_not_change_results(params, reducer):
    n, d = 90, 37
    src, dst = random_edges(n, 900, seed=2)
    g = fg.Graph(src, dst, n)
    x = torch.randn(n, d, dtype=torch.float64)
    out = fg.spmm(g, copy_u(n, d, "float64"), reducer, **params)
    got, ref = out(XV=x), reduce_messages(x[src], dst, n, reducer)
    torch.testing.assert_close(got, ref)
    if reducer in ("max", "min"):
        check_arg(got, out.run(return_arg=True, XV=x)[1], x[src], dst, reducer)


@pytest.mark.parametrize(
    "fds",
    [
        lambda s, out: s.split(out.axis[0], factor=8),
        lambda s, out: s.split(out.axis[0], factor=5).vectorize(out.axis[0]),
        lambda s, out: s.unroll(out.axis[0]),
        lambda s, out: s.parallel(out.axis[0]),
        lambda s, out: s.bind(out.axis[0], "thread.x"),
    ],
    ids=["split8", "split5-vec", "unroll", "parallel", "gpu-bind-ignored"],
)
def test_feature_schedules_do_not_change_results(fds):
    n, d = 60, 21
    src, dst = random_edges(n, 500, seed=3)
    x = torch.randn(n, d)
    g = fg.Graph(src, dst, n)
    got = fg.spmm(g, copy_u(n, d), "sum", fds=fds, num_feature_tiles=2)(XV=x)
    torch.testing.assert_close(got, reduce_messages(x[src], dst, n, "sum"), rtol=1e-5, atol=1e-5)


def mlp_udf(n: int, d1: int, d2: int):
    XV = te.placeholder((n, d1), name="XV")
    W = te.placeholder((d1, d2), name="W")

    def msgfunc(src, dst, eid):
        k = te.reduce_axis((0, d1), name="k")
        return te.compute((d2,), lambda i: te.max(te.sum((XV[src, k] + XV[dst, k]) * W[k, i], axis=k), 0))

    return msgfunc


@pytest.mark.parametrize(
    "fds",
    [None, lambda s, out: None, lambda s, out: s.reorder(out.reduce_axis[0], out.axis[0]).split(out.axis[0], 8)],
    ids=["default", "reduce-inner", "reduce-outer-split"],
)
@pytest.mark.parametrize("reducer", ["max", "sum"])
def test_fused_mlp_aggregation(fds, reducer):
    n, d1, d2 = 50, 8, 19
    src, dst = random_edges(n, 400, seed=4)
    x, w = torch.randn(n, d1), torch.randn(d1, d2)
    g = fg.Graph(src, dst, n)
    got = fg.spmm(g, mlp_udf(n, d1, d2), reducer, fds=fds, num_feature_tiles=2)(XV=x, W=w)
    messages = torch.relu((x[src] + x[dst]) @ w)
    torch.testing.assert_close(got, reduce_messages(messages, dst, n, reducer), rtol=1e-4, atol=1e-4)


def test_edge_weights_and_destination_data_multi_head():
    n, h, d = 40, 3, 7
    src, dst = random_edges(n, 300, seed=5)
    g = fg.Graph(src, dst, n)
    XV = te.placeholder((n, h, d), dtype="float64", name="XV")
    A = te.placeholder((g.num_edges, h), dtype="float64", name="A")
    B = te.placeholder((n, h), dtype="float64", name="B")

    def msgfunc(src, dst, eid):
        return te.compute((h, d), lambda j, i: XV[src, j, i] * A[eid, j] + B[dst, j])

    x, a, b = (
        torch.randn(n, h, d, dtype=torch.float64),
        torch.randn(g.num_edges, h, dtype=torch.float64),
        torch.randn(n, h, dtype=torch.float64),
    )
    for tiles in (1, 3):
        got = fg.spmm(g, msgfunc, "sum", num_feature_tiles=tiles)(XV=x, A=a, B=b)
        messages = x[src] * a.unsqueeze(-1) + b[dst].unsqueeze(-1)
        torch.testing.assert_close(got, reduce_messages(messages, dst, n, "sum"))


def test_elementwise_math_and_where():
    n, d = 30, 6
    src, dst = random_edges(n, 200, seed=6)
    g = fg.Graph(src, dst, n)
    X = te.placeholder((n, d), dtype="float64", name="X")

    def msgfunc(src, dst, eid):
        def body(i):
            a, b = X[src, i], X[dst, i]
            mixed = te.exp(a) * te.sigmoid(b) + te.tanh(a - b) + te.sqrt(te.abs(a)) + te.log(1 + te.abs(b))
            return te.where(a > b, mixed, te.min(a, b) * 2) + te.cast(a, "float32") - a / 4 + (i % 2)

        return te.compute((d,), body)

    x = torch.randn(n, d, dtype=torch.float64)
    a, b = x[src], x[dst]
    mixed = a.exp() * b.sigmoid() + (a - b).tanh() + a.abs().sqrt() + (1 + b.abs()).log()
    expected = torch.where(a > b, mixed, torch.minimum(a, b) * 2) + a.float().double() - a / 4 + (torch.arange(d) % 2)
    got = fg.spmm(g, msgfunc, "sum")(X=x)
    torch.testing.assert_close(got, reduce_messages(expected, dst, n, "sum"))


def test_half_precision_inputs_accumulate_in_float32():
    n, d = 50, 16
    src, dst = random_edges(n, 800, seed=7)
    g = fg.Graph(src, dst, n)
    for dtype, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
        x = torch.randn(n, d).to(dtype)
        got = fg.spmm(g, copy_u(n, d, name), "sum")(XV=x)
        assert got.dtype == dtype
        ref = torch.from_numpy(adjacency(src, dst, n) @ x.double().numpy()).to(dtype)
        torch.testing.assert_close(got, ref)


def test_inputs_are_not_modified_and_non_contiguous_inputs_work():
    n, d = 20, 9
    src, dst = random_edges(n, 100, seed=8)
    g = fg.Graph(src, dst, n)
    base = torch.randn(d, n)
    x = base.t()  # non-contiguous view
    before = base.clone()
    got = fg.spmm(g, copy_u(n, d), "sum")(XV=x)
    assert torch.equal(base, before)
    torch.testing.assert_close(got, reduce_messages(x.contiguous()[src], dst, n, "sum"), rtol=1e-5, atol=1e-5)


def test_scipy_weighted_graph_matches_matrix_product():
    A = sp.random(70, 70, density=0.1, format="csr", random_state=1)
    g = fg.Graph.from_scipy(A)
    W = te.placeholder((g.num_edges,), name="W")
    XV = te.placeholder((70, 5), name="XV")
    kernel = fg.spmm(g, lambda s, t, e: te.compute((5,), lambda i: XV[s, i] * W[e]), "sum")
    x = torch.randn(70, 5)
    torch.testing.assert_close(
        kernel(XV=x, W=g.edge_weight.float()), torch.from_numpy((A @ x.numpy()).astype("float32"))
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"XV": torch.randn(10, 4)}, ValueError, r"expected shape \(10, 3\)"),
        ({"XV": torch.randn(10, 3, dtype=torch.float64)}, TypeError, "placeholder dtype is float32"),
        ({"XV": [[0.0] * 3] * 10}, TypeError, "expected a torch.Tensor"),
        ({}, TypeError, r"missing \['XV'\]"),
        ({"XV": torch.randn(10, 3), "Y": torch.randn(1)}, TypeError, r"unexpected \['Y'\]"),
    ],
)
def test_bad_call_arguments(kwargs, error, message):
    g = fg.Graph(*random_edges(10, 30, seed=9), 10)
    kernel = fg.spmm(g, copy_u(10, 3), "sum")
    with pytest.raises(error, match=message):
        kernel(**kwargs)


def test_bad_template_arguments(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    g = fg.Graph(*random_edges(10, 30, seed=9), 10)
    with pytest.raises(ValueError, match="reducer must be one of"):
        fg.spmm(g, copy_u(10, 3), "prod")
    with pytest.raises(ValueError, match="needs 10 rows"):
        fg.spmm(g, copy_u(11, 3), "sum")
    with pytest.raises(TypeError, match="must return te.compute"):
        fg.spmm(g, lambda s, t, e: s, "sum")
    with pytest.raises(ValueError, match="target must be one of"):
        fg.spmm(g, copy_u(10, 3), "sum", target="tpu")
    with pytest.raises(ValueError, match="CUDA device.*TRITON_INTERPRET=1"):
        fg.spmm(g, copy_u(10, 3), "sum", target="gpu")
    with pytest.raises(ValueError, match="num_partitions"):
        fg.spmm(g, copy_u(10, 3), "sum", num_partitions=0)
    for gpu_only in ({"hub_threshold": 2}, {"rows_per_program": 4}):
        with pytest.raises(ValueError, match="rows_per_program and hub_threshold are GPU template parameters"):
            fg.spmm(g, copy_u(10, 3), "sum", **gpu_only)
    with pytest.raises(ValueError, match="return_arg needs a max or min"):
        fg.spmm(g, copy_u(10, 3), "sum").run(return_arg=True, XV=torch.randn(10, 3))


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 40),
    e=st.integers(0, 300),
    d=st.integers(1, 20),
    reducer=st.sampled_from(REDUCERS),
    parts=st.integers(1, 4),
    tiles=st.integers(1, 3),
    seed=st.integers(0, 1000),
)
def test_property_random_graphs_and_shapes(n, e, d, reducer, parts, tiles, seed):
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    g = fg.Graph(src, dst, n)
    got = fg.spmm(g, copy_u(n, d, "float64"), reducer, num_partitions=parts, num_feature_tiles=tiles)(XV=x)
    torch.testing.assert_close(got, reduce_messages(x[src], dst, n, reducer))


def test_same_udf_twice_reuses_the_compiled_kernel():
    g = fg.Graph(*random_edges(10, 30, seed=10), 10)
    a, b = fg.spmm(g, copy_u(10, 3), "sum"), fg.spmm(g, copy_u(10, 3), "sum")
    assert a.source == b.source and a._run is b._run
    assert fg.spmm(g, copy_u(10, 4), "sum").source != a.source


@pytest.mark.parametrize("reducer", ["sum", "mean"])
@pytest.mark.parametrize(("n", "e"), [(0, 0), (6, 0), (40, 300)])
def test_edge_centric_gas_strategy(reducer, n, e):
    src, dst = random_edges(n, e, seed=11)
    g = fg.Graph(src, dst, n)
    x = torch.randn(n, 6, dtype=torch.float64)
    got = fg.spmm(g, copy_u(n, 6, "float64"), reducer, strategy="gas")(XV=x)
    torch.testing.assert_close(got, reduce_messages(x[src], dst, n, reducer))
    assert not g.has_csr()  # GAS works on the COO alone


def test_gas_rejects_max_and_unknown_strategies():
    g = fg.Graph(*random_edges(10, 30, seed=12), 10)
    with pytest.raises(ValueError, match="sum and mean"):
        fg.spmm(g, copy_u(10, 3), "max", strategy="gas")
    with pytest.raises(ValueError, match="strategy must be one of"):
        fg.spmm(g, copy_u(10, 3), "sum", strategy="scatter")


@pytest.mark.parametrize("reducer", ["sum", "max"])
def test_nested_reductions_two_layer_mlp_message(reducer):
    n, d0, d1, d2 = 30, 5, 6, 7
    src, dst = random_edges(n, 200, seed=13)
    g = fg.Graph(src, dst, n)
    X = te.placeholder((n, d0), dtype="float64", name="X")
    W1 = te.placeholder((d0, d1), dtype="float64", name="W1")
    W2 = te.placeholder((d1, d2), dtype="float64", name="W2")

    def msgfunc(s, t, e):
        k, j = te.reduce_axis((0, d0), name="k"), te.reduce_axis((0, d1), name="j")
        hidden = te.max(te.sum((X[s, k] - X[t, k]) * W1[k, j], axis=k), 0)
        return te.compute((d2,), lambda i: te.sum(hidden * W2[j, i], axis=j))

    x, w1, w2 = (torch.randn(*shape, dtype=torch.float64) for shape in ((n, d0), (d0, d1), (d1, d2)))
    got = fg.spmm(g, msgfunc, reducer)(X=x, W1=w1, W2=w2)
    messages = torch.relu((x[src] - x[dst]) @ w1) @ w2
    torch.testing.assert_close(got, reduce_messages(messages, dst, n, reducer))


def first_edge_where(mask: torch.Tensor, dst: torch.Tensor, n: int) -> torch.Tensor:
    """Per vertex and element, the smallest edge id into the vertex where ``mask`` (E x d) holds, else -1."""
    ids = torch.arange(mask.shape[0]).unsqueeze(1).expand_as(mask)
    candidates = torch.where(mask, ids, mask.shape[0])
    first = torch.full((n, mask.shape[1]), mask.shape[0]).scatter_reduce(
        0, dst.unsqueeze(1).expand_as(mask), candidates, "amin"
    )
    return torch.where(first == mask.shape[0], -1, first)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("num_partitions", [1, 3])
@pytest.mark.parametrize("reducer", ["max", "min"])
def test_max_min_propagate_nan_and_the_identity_as_torch(reducer, num_partitions, dtype):
    """As torch.amax/scatter_reduce(include_self=False): a NaN message makes the element NaN, and messages
    that are all the identity (-inf for max) give the identity; only a vertex without in-edges gets 0.
    The arg names the first NaN edge, else the first edge with the winning value (the first in-edge when
    all are the identity), so the gradient has one well-defined edge; the untracked loop agrees."""
    n, d = 30, 9
    src, dst = random_edges(n, 200, seed=14)
    x = torch.randn(n, d, dtype=getattr(torch, dtype))
    identity = float("-inf") if reducer == "max" else float("inf")
    x[src[dst == 2]] = identity  # vertex 2: only identities arrive
    x[src[dst == 4], 3] = identity  # one element of vertex 4 likewise
    x[src[dst == 5][1], 1] = float("nan")  # a NaN among numbers
    x[src[dst == 6], 2] = float("nan")  # every message NaN
    x[src[dst == 7][0], :4] = float("nan")
    messages = x[src]
    kernel = fg.spmm(fg.Graph(src, dst, n), copy_u(n, d, dtype), reducer, num_partitions=num_partitions)
    plain, (tracked, arg) = kernel(XV=x), kernel.run(return_arg=True, XV=x)
    index = dst.unsqueeze(1).expand_as(messages)
    want = torch.zeros(n, d, dtype=x.dtype).scatter_reduce(0, index, messages, f"a{reducer}", include_self=False)
    assert bool(want.isnan().any()) and bool((want == identity).any())
    torch.testing.assert_close(plain, want, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(tracked, want, rtol=0, atol=0, equal_nan=True)
    check_arg(tracked, arg, messages, dst, reducer)
    if num_partitions == 1:  # max and min read rows in edge id order
        first_nan = first_edge_where(messages.isnan(), dst, n)
        first_best = first_edge_where(messages == want[dst], dst, n)
        assert torch.equal(arg, torch.where(first_nan >= 0, first_nan, first_best))


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 25),
    e=st.integers(0, 160),
    parts=st.integers(1, 5),
    reducer=st.sampled_from(["max", "min"]),
    sampled=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_ties_go_to_the_first_edge_in_id_order_segment_by_segment(n, e, parts, reducer, sampled, seed):
    """Messages from a handful of values (ties everywhere, the identity and NaN among them), duplicate edges and
    self loops: the winner of each element is the first NaN message, else the first of the best value, against
    a reference that scans the edges source segment by source segment, each in edge id order (the order max
    and min read, whether the graph built its CSR, whose kernels' copy lists sources in ascending order, or
    was given one, a sampler's, with ``from_csr``); values as ``scatter_reduce``."""
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)
    identity = float("-inf") if reducer == "max" else float("inf")
    palette = torch.tensor([0.0, 1.0, 2.0, identity, float("nan")])
    x = palette[torch.randint(0, 5, (n, 3), generator=gen)]
    if sampled:  # edges renumbered in CSR order (a sampled block's), the CSR kept as given
        order = torch.sort(dst, stable=True).indices
        src, dst = src[order], dst[order]
        indptr = torch.zeros(n + 1, dtype=torch.int64)
        torch.cumsum(torch.bincount(dst, minlength=n), 0, out=indptr[1:])
        g = fg.Graph.from_csr(indptr, src, n)
    else:
        g = fg.Graph(src, dst, n)
    kernel = fg.spmm(g, copy_u(n, 3), reducer, num_partitions=parts)
    out, arg = kernel.run(return_arg=True, XV=x)
    messages = x[src]
    want = torch.zeros(n, 3).scatter_reduce(0, dst.unsqueeze(1).expand_as(messages), messages, f"a{reducer}",
                                            include_self=False)  # fmt: skip
    torch.testing.assert_close(out, want, rtol=0, atol=0, equal_nan=True)
    expected = torch.full((n, 3), -1, dtype=torch.int64)
    segment = torch.searchsorted(cut_points(n, parts)[1:-1], src, right=True)
    for edge in torch.argsort(segment * max(e, 1) + torch.arange(e)).tolist():  # the first NaN, else best, keeps it
        v = int(dst[edge])
        for i in range(3):
            value, held = messages[edge, i], expected[v, i]
            if held < 0:
                expected[v, i] = edge
                continue
            best = messages[held, i]
            better = value > best if reducer == "max" else value < best
            if not best.isnan() and (value.isnan() or better):
                expected[v, i] = edge
    assert torch.equal(arg, expected)


@pytest.mark.parametrize("reducer", ["sum", "max", "logsumexp"])
def test_huge_feature_sizes_compile_as_loops(reducer):
    """The source does not grow with the feature size (chunks past the unrolled few run as a loop), and a
    feature size that is no multiple of the chunk, with several feature tiles and source partitions,
    still gives every element; multi-head outputs included."""
    n, heads = 7, 3
    src, dst = random_edges(n, 20, seed=5)
    g = fg.Graph(src, dst, n)
    sizes = {}
    for d in (4099, 70_001):
        X = te.placeholder((n, heads, d), name="X")
        kernel = fg.spmm(
            g, lambda s, v, e, X=X, d=d: te.compute((heads, d), lambda h, i: X[s, h, i]), reducer, num_feature_tiles=2
        )
        sizes[d] = len(kernel.source)
        x = torch.randn(n, heads, d)
        torch.testing.assert_close(kernel(X=x), reduce_messages(x[src], dst, n, reducer))
    assert sizes[70_001] < 1.02 * sizes[4099]  # the same code with longer constants


@pytest.mark.parametrize("num_partitions", [1, 3])
def test_logsumexp_propagates_nan_as_torch(num_partitions):
    n, d = 30, 5
    src, dst = random_edges(n, 200, seed=15)
    x = torch.randn(n, d, dtype=torch.float64)
    x[src[dst == 5][0], 1] = float("nan")
    x[src[dst == 6], 2] = float("-inf")  # all -inf: -inf, as torch.logsumexp
    got = fg.spmm(fg.Graph(src, dst, n), copy_u(n, d, "float64"), "logsumexp", num_partitions=num_partitions)(XV=x)
    want = reduce_messages(x[src], dst, n, "logsumexp")
    assert bool(want[5, 1].isnan()) and want[6, 2] == float("-inf")
    torch.testing.assert_close(got, want, equal_nan=True)


def bipartite_case(num_src: int, num_dst: int, num_edges: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (num_edges,), generator=gen)
    dst = torch.randint(0, max(num_dst - 1, 1), (num_edges,), generator=gen)  # the last destination stays isolated
    return fg.Graph(src, dst, (num_src, num_dst)), src, dst


@pytest.mark.parametrize(("num_src", "num_dst"), [(13, 5), (4, 11)])
@pytest.mark.parametrize(
    ("reducer", "params"),
    [
        ("sum", {}),
        ("mean", {"strategy": "gas"}),
        ("max", {"num_partitions": 3}),
        ("min", {"row_order": "degree"}),
        ("logsumexp", {"num_feature_tiles": 2}),
    ],
)
def test_bipartite_graphs_against_dense(num_src, num_dst, reducer, params):
    """Source data has num_src rows, destination data and the output num_dst; gradients included."""
    g, src, dst = bipartite_case(num_src, num_dst, 40, seed=num_src + num_dst)
    d = 3
    XS = te.placeholder((num_src, d), dtype="float64", name="XS")
    XD = te.placeholder((num_dst, d), dtype="float64", name="XD")
    kernel = fg.spmm(g, lambda s, v, e: te.compute((d,), lambda i: XS[s, i] * XD[v, i] + XS[s, i]), reducer, **params)
    xs = torch.randn(num_src, d, dtype=torch.float64, requires_grad=True)
    xd = torch.randn(num_dst, d, dtype=torch.float64, requires_grad=True)
    out = kernel(XS=xs, XD=xd)
    ref = reduce_messages(xs[src] * xd[dst] + xs[src], dst, num_dst, reducer)
    torch.testing.assert_close(out, ref)
    upstream = torch.randn_like(ref)
    for got, want in zip(
        torch.autograd.grad(out, (xs, xd), upstream), torch.autograd.grad(ref, (xs, xd), upstream), strict=True
    ):
        torch.testing.assert_close(got, want)


def test_bipartite_rows_are_checked_per_side():
    g, _, _ = bipartite_case(6, 3, 10, seed=1)
    XS = te.placeholder((3, 2), name="XS")
    with pytest.raises(ValueError, match="needs 6 rows \\(the graph's source vertices\\)"):
        fg.spmm(g, lambda s, v, e: te.compute((2,), lambda i: XS[s, i]), "sum")


@pytest.mark.parametrize("reducer", ["sum", "max", "logsumexp"])
def test_bipartite_graphs_on_the_gpu_target(reducer, gpu):
    g, _, _ = bipartite_case(9, 4, 30, seed=2)
    XS = te.placeholder((9, 3), dtype="float64", name="XS")
    XD = te.placeholder((4, 3), dtype="float64", name="XD")

    def run(graph, xs, xd):
        return fg.spmm(graph, lambda s, v, e: te.compute((3,), lambda i: XS[s, i] * XD[v, i]), reducer)(XS=xs, XD=xd)

    inputs = tuple(torch.randn(rows, 3, dtype=torch.float64, requires_grad=True) for rows in (9, 4))
    assert assert_gpu_target_agrees(run, g, inputs, gpu).shape == (4, 3)


def test_a_max_keeps_an_id_ordered_csr_only_once_its_winners_are_asked_for():
    """A max whose winners nobody asks for (a softmax's shift) reads the graph's shared source-ascending CSR;
    the first run that keeps winners reads one whose rows keep edge id order, made then, and both agree."""
    n = 40
    src, dst = random_edges(n, 400, seed=21)
    g = fg.Graph(src, dst, n)
    kernel = fg.spmm(g, copy_u(n, 5), "max", num_partitions=1)
    x = torch.randn(n, 5)
    plain, none = kernel.evaluate({"XV": x}, want_arg=False)  # as edge_softmax's shift runs it
    assert none is None and ("csr-by-id", torch.int32) not in g._cache
    tracked, arg = kernel.run(return_arg=True, XV=x)
    by_id = g._cache[("csr-by-id", torch.int32)]
    assert by_id is not g.csr(torch.int32)  # the shared one lists sources in ascending order, not ids
    assert torch.equal(plain, tracked)
    check_arg(tracked, arg, x[src], dst, "max")
