"""``Kernel`` calls under ``torch.compile``: the ``featgraph::kernel`` operator (opcheck, gradients through
``featgraph::kernel_backward``) and a compiled function agreeing with the eager kernel, for every template."""

import gc
import itertools
import weakref

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import te
from featgraph.te.expr import per_op
from featgraph.templates import edge_sum
from featgraph.templates.gradients import gradient_kernels, gradient_udfs
from featgraph.templates.kernel import registered, shared_op
from tests.conftest import random_edges
from tests.templates.reference import reduce_messages

N, E, D = 12, 50, 4


@pytest.fixture(scope="module")
def graph():
    return fg.Graph(*random_edges(N, E, seed=3), N)


X = te.placeholder((N, D), "float64", "X")
W = te.placeholder((E, 1), "float64", "W")


def weighted_message(s, t, e):
    return te.compute((D,), lambda i: X[s, i] * W[e, 0])


KERNELS = {
    "spmm-sum": lambda g: fg.spmm(g, weighted_message, "sum"),
    "spmm-max": lambda g: fg.spmm(g, weighted_message, "max"),
    "spmm-logsumexp": lambda g: fg.spmm(g, weighted_message, "logsumexp"),
    "sddmm": lambda g: fg.sddmm(g, lambda s, t, e: te.compute((2,), lambda i: X[s, i] * X[t, 3] * W[e, 0])),
    "edge_sum": lambda g: edge_sum(g, lambda s, t, e: te.compute((D,), lambda i: X[s, i] * W[e, 0])),
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_operator_and_compiled_calls(graph, name):
    kernel = KERNELS[name](graph)
    assert registered(kernel.key) is kernel
    x = torch.randn(N, D, dtype=torch.float64, requires_grad=True)
    w = torch.randn(E, 1, dtype=torch.float64, requires_grad=True)
    inputs = [{"X": x, "W": w}[n] for n in kernel.placeholder_names]
    result = torch.library.opcheck(torch.ops.featgraph.kernel.default, (kernel.key, inputs))
    assert set(result.values()) == {"SUCCESS"}, result
    assert gradcheck(lambda *xs: torch.ops.featgraph.kernel(kernel.key, list(xs))[0], tuple(inputs))
    compiled = torch.compile(lambda a, b: kernel(X=a, W=b), backend="aot_eager", fullgraph=True)
    out, expected = compiled(x, w), kernel(X=x, W=w)
    assert out.shape == kernel.output_shape()
    torch.testing.assert_close(out, expected)
    weights = torch.randn_like(out)
    grads = torch.autograd.grad((out * weights).sum(), (x, w))
    for got, want in zip(grads, torch.autograd.grad((expected * weights).sum(), (x, w)), strict=True):
        torch.testing.assert_close(got, want)


def test_compiled_call_names_missing_placeholders(graph):
    kernel = KERNELS["spmm-sum"](graph)
    compiled = torch.compile(lambda a: kernel(X=a), backend="aot_eager")  # the error falls back to eager's
    with pytest.raises(TypeError, match=r"missing \['W'\]"):
        compiled(torch.randn(N, D, dtype=torch.float64))


def test_a_dead_kernel_is_named_in_the_error():
    with pytest.raises(KeyError, match="no live featgraph kernel"):
        registered("spmm-0000-0")


def test_a_graph_and_the_kernels_it_keeps_go_with_its_last_reference():
    """The kernels an op keeps on its graph (and their gradient kernels, over the graph and its reverse) hold
    the graph weakly: no cycle waits for the cyclic collector, as a sampled block's formats would."""
    src, dst = random_edges(30, 200, seed=4)
    x = torch.randn(30, 5, requires_grad=True)
    w = torch.randn(200, 5, requires_grad=True)
    gc.disable()
    try:
        g = fg.Graph(src, dst, 30)
        fg.ops.gspmm(g, "mul", "sum", x, w).sum().backward()
        fg.ops.gsddmm(g, "dot", x, x, "u", "v").sum().backward()
        expected = torch.zeros(30, 5).index_add_(0, dst, x.detach()[src] * w.detach())
        torch.testing.assert_close(fg.ops.gspmm(g, "mul", "sum", x, w), expected)
        graph = weakref.ref(g)
        del g
        assert graph() is None
    finally:
        gc.enable()
    X = te.placeholder((30, 5), name="X")  # a kernel the caller holds keeps its graph
    held = fg.spmm(fg.Graph(src, dst, 30), lambda s, d, e: te.compute((5,), lambda i: X[s, i]), "sum")
    gc.collect()
    torch.testing.assert_close(held(X=x.detach()), torch.zeros(30, 5).index_add_(0, dst, x.detach()[src]))


# ---- one traced op on every graph: placeholders without a row count (``shared_op``) ----------------------
D_SHARED = 3
TRACES: list[int] = []  # one entry per trace of ``counted_message``
KEYS = itertools.count()


def counted_message(s, t, e):
    """A weighted message and the destination's own row (vertex data of both kinds, edge data), its
    placeholders without row counts; each trace is counted."""
    TRACES.append(1)
    x, y = te.placeholder((None, D_SHARED), "float64", "X"), te.placeholder((None, D_SHARED), "float64", "Y")
    w = te.placeholder((None,), "float64", "W")
    return te.compute((D_SHARED,), lambda i: x[s, i] * w[e] + te.exp(y[t, (i + 1) % D_SHARED]))


@st.composite
def bipartite_graphs(draw) -> fg.Graph:
    """Graphs of 0-9 sources and destinations (equal counts: self loops), duplicate edges, isolated vertices."""
    num_src = draw(st.integers(0, 9))
    num_dst = num_src if draw(st.booleans()) else draw(st.integers(0, 9))
    count = draw(st.integers(0, 30)) if num_src and num_dst else 0
    src = draw(st.lists(st.integers(0, max(num_src - 1, 0)), min_size=count, max_size=count))
    dst = draw(st.lists(st.integers(0, max(num_dst - 1, 0)), min_size=count, max_size=count))
    return fg.Graph(torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64), (num_src, num_dst))


@given(st.lists(bipartite_graphs(), min_size=1, max_size=4), st.sampled_from(["sum", "max", "logsumexp"]))
@settings(max_examples=25, deadline=None)
def test_a_shared_op_is_traced_once_and_agrees_on_every_graph(graphs, reducer):
    key = ("test-shared", next(KEYS))  # a key of its own: the op is traced for this example's first graph
    TRACES.clear()
    for g in graphs:
        op = shared_op(key, counted_message)
        x = torch.randn(g.num_src_nodes, D_SHARED, dtype=torch.float64, requires_grad=True)
        y = torch.randn(g.num_dst_nodes, D_SHARED, dtype=torch.float64)
        w = torch.randn(g.num_edges, dtype=torch.float64, requires_grad=True)
        x_before, w_before = x.detach().clone(), w.detach().clone()
        out = fg.spmm(g, op, reducer)(X=x, Y=y, W=w)
        src, dst = g.coo()
        messages = x[src] * w[:, None] + torch.exp(y[dst][:, [(i + 1) % D_SHARED for i in range(D_SHARED)]])
        expected = reduce_messages(messages, dst, g.num_dst_nodes, reducer)
        torch.testing.assert_close(out, expected)
        if g.num_edges:
            grads = torch.autograd.grad(out.sum(), (x, w))
            wanted = torch.autograd.grad(expected.sum(), (x, w))
            for got, want in zip(grads, wanted, strict=True):
                torch.testing.assert_close(got, want)
        assert torch.equal(x.detach(), x_before) and torch.equal(w.detach(), w_before)
    assert len(TRACES) == 1


def test_a_shared_op_gradchecks_on_a_bipartite_graph():
    g = fg.Graph(torch.tensor([0, 4, 4, 2, 2]), torch.tensor([1, 0, 1, 2, 2]), (5, 3))
    op = shared_op(("test-gradcheck",), counted_message)
    x = torch.randn(5, D_SHARED, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, D_SHARED, dtype=torch.float64)  # read at a shifted feature: no gradient is derived
    w = torch.randn(5, dtype=torch.float64, requires_grad=True)
    for reducer in ("sum", "mean", "max"):
        kernel = fg.spmm(g, op, reducer)
        assert gradcheck(lambda x, w, k=kernel: k(X=x, Y=y, W=w), (x, w))
    edge_kernel = fg.sddmm(g, op)
    assert gradcheck(lambda x, w: edge_kernel(X=x, Y=y, W=w), (x, w))


def _indexed_densely(s, t, e):
    x = te.placeholder((None, 2), "float64", "X")
    return te.compute((2,), lambda i: x[0, i])


def _indexed_by_both(s, t, e):
    x = te.placeholder((None, 2), "float64", "X")
    return te.compute((2,), lambda i: x[s, i] + x[t, i])


X_COUNTED = te.placeholder((6, 2), "float64", "X")


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda g: fg.spmm(g, _indexed_densely, "sum"), ValueError, "'X' has no row count .*src, dst or eid"),
        (lambda g: fg.spmm(g, _indexed_by_both, "sum"), ValueError, "'X' .*both src and dst.* 6 and 3"),
        (
            lambda g: shared_op(("test-counted",), lambda s, t, e: te.compute((2,), lambda i: X_COUNTED[s, i])),
            ValueError,
            r"\['X'\] have a row count",
        ),
        (
            lambda g: fg.spmm(g, counted_message, "sum")(
                X=torch.zeros(5, D_SHARED, dtype=torch.float64),
                Y=torch.zeros(3, D_SHARED, dtype=torch.float64),
                W=torch.zeros(4, dtype=torch.float64),
            ),
            ValueError,
            r"X: expected shape \(6, 3\), got \(5, 3\)",
        ),
        (lambda g: te.placeholder((4, None), "float64", "X"), ValueError, "only the first dimension"),
        (lambda g: te.placeholder((), "float64", "X"), ValueError, "non-empty shape"),
        (lambda g: te.placeholder(None, "float64", "X"), ValueError, "non-empty shape"),
    ],
    ids=["dense-index", "src-and-dst-on-bipartite", "shared-with-rows", "wrong-rows", "none-later", "empty", "none"],
)
def test_placeholders_without_rows_refuse_bad_input(make, error, match):
    g = fg.Graph(torch.tensor([0, 5, 1, 1]), torch.tensor([0, 2, 2, 1]), (6, 3))
    with pytest.raises(error, match=match):
        make(g)


def test_an_op_is_analysed_once_however_many_graphs_bind_it():
    op = shared_op(("test-analysed",), counted_message)
    calls = []

    @per_op
    def analysis(op, flag):
        calls.append(flag)
        return object()

    assert analysis(op, 1) is analysis(op, 1)
    assert analysis(op, 2) is not analysis(op, 1)
    assert calls == [1, 2]
    for n in (3, 5, 8):  # the derived gradient UDFs too: one derivation, one trace each
        g = fg.Graph(*random_edges(n, 3 * n, seed=n), n)
        kernel = fg.spmm(g, op, "sum")
        derived = [part.spec.op for _, part in gradient_kernels(kernel, op.placeholders[0], "float64")]
        assert derived == [part for _, part in gradient_udfs(op, "spmm", "sum", "W", "float64")]


@settings(max_examples=25, deadline=None)
@given(num_nodes=st.integers(1, 40), num_edges=st.integers(0, 120), seed=st.integers(0, 2**16))
def test_property_edge_lists_name_each_users_edge_once_and_cpu_user_order_keeps_no_ids(num_nodes, num_edges, seed):
    """Every edge order's list against the COO: the j-th entry is user edge ids[j] with its own endpoints,
    each edge once; in the user's order the CPU's list keeps no id array (its C++ templates take edge j as
    user edge j), the GPU's an arange; and CPU kernels in the user's order read edge data at the right rows
    (weights keyed by edge id, against a dense reference)."""
    from featgraph.templates.kernel import edge_list

    src, dst = random_edges(num_nodes, num_edges, seed=seed)
    g = fg.Graph(src, dst, num_nodes)
    for order, target in itertools.product(("user", "csr", "hilbert"), ("cpu", "gpu")):
        srcs, dsts, ids = edge_list(g, order, torch.int32, target)
        if order == "user" and target == "cpu":
            assert ids is None
            ids = torch.arange(num_edges)
        assert sorted(ids.tolist()) == list(range(num_edges))
        assert torch.equal(srcs.long(), src[ids.long()]) and torch.equal(dsts.long(), dst[ids.long()])
    weight = torch.randn(num_edges, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    w = te.placeholder((num_edges, 1), "float64", "W")
    kernel = fg.sddmm(g, lambda s, t, e: te.compute((1,), lambda i: w[e, 0] * (s + 2 * t)), edge_order="user")
    expected = weight * (src + 2 * dst).unsqueeze(1).double()
    torch.testing.assert_close(kernel(W=weight), expected)
