"""Gradients of user UDFs, derived symbolically: gradcheck in float64 and dense torch autograd."""

import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import te
from tests.conftest import random_edges
from tests.templates.reference import reduce_messages

N, E = 11, 45
F64 = torch.float64


@pytest.fixture(scope="module")
def graph():
    src, dst = random_edges(N, E, seed=81)  # isolated vertices, a duplicate edge, a self loop
    return fg.Graph(src, dst, N)


def randn(*shape, positive=False):
    t = torch.rand(*shape, dtype=F64) + 0.5 if positive else torch.randn(*shape, dtype=F64)
    return t.requires_grad_()


def mlp_udf(d1, d2):
    XV = te.placeholder((N, d1), dtype="float64", name="XV")
    W = te.placeholder((d1, d2), dtype="float64", name="W")

    def msgfunc(s, t, e):
        k = te.reduce_axis((0, d1), name="k")
        return te.compute((d2,), lambda i: te.max(te.sum((XV[s, k] + XV[t, k]) * W[k, i], axis=k), 0))

    return msgfunc


@pytest.mark.parametrize("reducer", ["sum", "mean", "max", "min", "logsumexp"])
def test_mlp_aggregation_trains(graph, reducer):
    kernel = fg.spmm(graph, mlp_udf(3, 5), reducer)
    x, w = randn(N, 3), randn(3, 5)
    assert gradcheck(lambda a, b: kernel(XV=a, W=b), (x, w))


def test_mlp_gradients_match_dense_autograd(graph):
    src, dst = graph.coo()
    kernel = fg.spmm(graph, mlp_udf(4, 6), "sum")
    x, w = randn(N, 4), randn(4, 6)
    ours = torch.autograd.grad(kernel(XV=x, W=w).square().sum(), (x, w))
    dense = reduce_messages(torch.relu((x[src] + x[dst]) @ w), dst, N, "sum")
    ref = torch.autograd.grad(dense.square().sum(), (x, w))
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("reducer", ["sum", "mean", "max", "min", "logsumexp"])
def test_weighted_copy_with_destination_data(graph, reducer):
    X = te.placeholder((N, 2, 3), dtype="float64", name="X")
    A = te.placeholder((E, 2), dtype="float64", name="A")
    B = te.placeholder((N, 2), dtype="float64", name="B")
    kernel = fg.spmm(graph, lambda s, t, e: te.compute((2, 3), lambda h, i: X[s, h, i] * A[e, h] - B[t, h]), reducer)
    assert gradcheck(lambda x, a, b: kernel(X=x, A=a, B=b), (randn(N, 2, 3), randn(E, 2), randn(N, 2)))


def test_logsumexp_gradients_match_dense_autograd(graph):
    src, dst = graph.coo()
    X = te.placeholder((N, 4), dtype="float64", name="X")
    A = te.placeholder((E, 1), dtype="float64", name="A")
    kernel = fg.spmm(graph, lambda s, t, e: te.compute((4,), lambda i: X[s, i] * A[e, 0]), "logsumexp")
    x, a = randn(N, 4), randn(E, 1)
    ours = torch.autograd.grad(kernel(X=x, A=a).sin().sum(), (x, a))
    dense = reduce_messages(x[src] * a, dst, N, "logsumexp")
    ref = torch.autograd.grad(dense.sin().sum(), (x, a))
    for got, want in zip(ours, ref, strict=True):
        torch.testing.assert_close(got, want)


def test_elementwise_math(graph):
    X = te.placeholder((N, 4), dtype="float64", name="X")
    P = te.placeholder((N, 4), dtype="float64", name="P")

    def msgfunc(s, t, e):
        def body(i):
            a, b, p = X[s, i], X[t, i], P[s, i]
            mixed = te.exp(a) * te.sigmoid(b) + te.tanh(a * b) + te.sqrt(p) + te.log(p) / p
            return te.where(a > b, mixed, te.max(a, b) - te.min(a, 0.3) + te.abs(b)) + te.cast(a, "float64") * 2

        return te.compute((4,), body)

    kernel = fg.spmm(graph, msgfunc, "sum")
    assert gradcheck(lambda x, p: kernel(X=x, P=p), (randn(N, 4), randn(N, 4, positive=True)))


@pytest.mark.parametrize("heads", [1, 3])
def test_dot_attention_sddmm(graph, heads):
    XV = te.placeholder((N, heads, 5), dtype="float64", name="XV")
    Q = te.placeholder((heads, 5), dtype="float64", name="Q")

    def edgefunc(s, t, e):
        k = te.reduce_axis((0, 5), name="k")
        return te.compute((heads,), lambda h: te.sum(XV[s, h, k] * XV[t, h, k] * Q[h, k], axis=k))

    kernel = fg.sddmm(graph, edgefunc)
    assert gradcheck(lambda x, q: kernel(XV=x, Q=q), (randn(N, heads, 5), randn(heads, 5)))


def test_nested_two_layer_message_and_constant_index(graph):
    X = te.placeholder((N, 3), dtype="float64", name="X")
    W1 = te.placeholder((3, 4), dtype="float64", name="W1")
    W2 = te.placeholder((4, 2), dtype="float64", name="W2")
    C = te.placeholder((2, 2), dtype="float64", name="C")

    def msgfunc(s, t, e):
        k, j = te.reduce_axis((0, 3), name="k"), te.reduce_axis((0, 4), name="j")
        hidden = te.tanh(te.sum((X[s, k] - X[t, k]) * W1[k, j], axis=k))
        return te.compute((2,), lambda i: te.sum(hidden * W2[j, i], axis=j) + C[0, i])

    kernel = fg.spmm(graph, msgfunc, "mean")
    inputs = (randn(N, 3), randn(3, 4), randn(4, 2), randn(2, 2))
    assert gradcheck(lambda x, a, b, c: kernel(X=x, W1=a, W2=b, C=c), inputs)


def test_frozen_inputs_get_no_gradient_and_stay_untouched(graph):
    kernel = fg.spmm(graph, mlp_udf(3, 4), "max")
    x, w = randn(N, 3), torch.randn(3, 4, dtype=F64)
    before = w.clone()
    kernel(XV=x, W=w).sum().backward()
    assert x.grad is not None and w.grad is None and torch.equal(w, before)
    out, arg = kernel.run(return_arg=True, XV=x, W=w)
    assert out.requires_grad and arg.dtype == torch.int64


def test_unsupported_gradients_say_so(graph):
    X = te.placeholder((N, 5), dtype="float64", name="X")
    shifted = fg.spmm(graph, lambda s, t, e: te.compute((4,), lambda i: X[s, i + 1]), "sum")
    out = shifted(X=randn(N, 5))  # the forward runs; its backward says why it cannot
    with pytest.raises(NotImplementedError, match="one axis used once"):
        out.sum().backward()

    def max_inside(s, t, e):
        k = te.reduce_axis((0, 5), name="k")
        return te.compute((1,), lambda i: te.max(X[s, k], axis=k))

    with pytest.raises(NotImplementedError, match="max/min reduction"):
        fg.spmm(graph, max_inside, "sum")(X=randn(N, 5)).sum().backward()


def test_input_seen_only_through_a_condition_gets_zero_gradient(graph):
    X = te.placeholder((N, 3), dtype="float64", name="X")
    Q = te.placeholder((N, 3), dtype="float64", name="Q")
    kernel = fg.spmm(
        graph, lambda s, t, e: te.compute((3,), lambda i: X[s, i] * te.where(Q[t, i] > 0, 1.0, 2.0)), "sum"
    )
    x, q = randn(N, 3), randn(N, 3)
    kernel(X=x, Q=q).sum().backward()
    assert torch.equal(q.grad, torch.zeros_like(q)) and x.grad.abs().sum() > 0


def test_logsumexp_with_one_placeholder_loaded_twice(graph):
    """``X[s, i] * X[s, i]``: two load sites of one placeholder share the forward's output in the softmax
    weight of their terms."""
    src, dst = graph.coo()
    X = te.placeholder((N, 3), dtype="float64", name="X")
    kernel = fg.spmm(graph, lambda s, t, e: te.compute((3,), lambda i: X[s, i] * X[s, i] - X[t, i]), "logsumexp")
    x = randn(N, 3)
    assert gradcheck(lambda a: kernel(X=a), (x,))
    ours = torch.autograd.grad(kernel(X=x).sin().sum(), x)[0]
    want = torch.autograd.grad(reduce_messages(x[src] * x[src] - x[dst], dst, N, "logsumexp").sin().sum(), x)[0]
    torch.testing.assert_close(ours, want)


def test_edge_sum_is_differentiable(graph):
    """The gradient of an edge sum's output (one dense tensor, no rows) reaches vertex, edge and dense data."""
    src, dst = graph.coo()
    X, A = te.placeholder((N, 3), dtype="float64", name="X"), te.placeholder((E, 2), dtype="float64", name="A")
    W = te.placeholder((3, 2), dtype="float64", name="W")
    kernel = fg.templates.edge_sum(
        graph, lambda s, t, e: te.compute((2, 3), lambda h, i: X[s, i] * A[e, h] * W[i, h] + X[t, i])
    )
    inputs = (randn(N, 3), randn(E, 2), randn(3, 2))
    assert gradcheck(lambda x, a, w: kernel(X=x, A=a, W=w), inputs)
    x, a, w = inputs
    upstream = torch.randn(2, 3, dtype=F64)
    ours = torch.autograd.grad((kernel(X=x, A=a, W=w) * upstream).sum(), inputs)
    dense = (x[src].unsqueeze(1) * a.unsqueeze(2) * w.t() + x[dst].unsqueeze(1)).sum(0)
    for got, want in zip(ours, torch.autograd.grad((dense * upstream).sum(), inputs), strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("reducer", ["sum", "max", "logsumexp"])
@pytest.mark.parametrize("target", ["cpu", "gpu"])
def test_axes_covering_part_of_a_dimension(graph, reducer, target, request):
    """An output axis narrower than the dimension it indexes, and reduce axes starting above 0, read a
    block of their placeholder: only that block receives gradient, and the gradient kernels read nothing
    outside ``fg_grad`` (the subscript checks would refuse them)."""
    if target == "gpu":
        request.getfixturevalue("interpreted_gpu")
    src, dst = graph.coo()
    X, W = te.placeholder((N, 5), dtype="float64", name="X"), te.placeholder((6, 3), dtype="float64", name="W")

    def msgfunc(s, t, e):
        k = te.reduce_axis((1, 4), name="k")
        return te.compute((2,), lambda i: te.sum(X[s, k] * W[k, i] + X[t, i], axis=k) * W[5, i])

    kernel = fg.spmm(graph, msgfunc, reducer, target=target)
    x, w = randn(N, 5), randn(6, 3)
    upstream = torch.randn(N, 2, dtype=F64)
    ours = torch.autograd.grad((kernel(X=x, W=w) * upstream).sum(), (x, w))
    messages = (x[src, 1:4] @ w[1:4, :2]) + 3 * x[dst, :2]
    dense = reduce_messages(messages * w[5, :2], dst, N, reducer)
    for got, want in zip(ours, torch.autograd.grad((dense * upstream).sum(), (x, w)), strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("template", ["spmm-sum", "spmm-max", "sddmm"])
@pytest.mark.parametrize("target", ["cpu", "gpu"])
def test_one_dimensional_edge_weights(graph, template, target, request):
    """``W[eid]`` of an ``(E,)`` W: the gradient per edge is one value, with no feature axis of its own.
    Gradients against dense autograd on both targets; gradcheck on the CPU (slow under Triton's interpreter)."""
    if target == "gpu":
        request.getfixturevalue("interpreted_gpu")
    src, dst = graph.coo()
    X, W = te.placeholder((N, 3), dtype="float64", name="X"), te.placeholder((E,), dtype="float64", name="W")

    def udf(s, t, e):
        return te.compute((3,), lambda i: X[s, i] * W[e] + X[t, i])

    x, w = randn(N, 3), randn(E)
    messages = x[src] * w[:, None] + x[dst]
    if template == "sddmm":
        kernel, dense = fg.sddmm(graph, udf, target=target), messages
    else:
        reducer = template.removeprefix("spmm-")
        kernel, dense = fg.spmm(graph, udf, reducer, target=target), reduce_messages(messages, dst, N, reducer)
    ours = kernel(X=x, W=w)
    torch.testing.assert_close(ours, dense)
    upstream = torch.randn(ours.shape, dtype=F64)
    for got, want in zip(
        torch.autograd.grad((ours * upstream).sum(), (x, w)),
        torch.autograd.grad((dense * upstream).sum(), (x, w)),
        strict=True,
    ):
        torch.testing.assert_close(got, want)
    if target == "cpu":
        assert gradcheck(lambda a, b: kernel(X=a, W=b), (x, w))


def saved_inputs(run) -> list[torch.Tensor]:
    """The tensors autograd keeps for backward while ``run()`` builds its graph, and its result."""
    saved: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        result = run()
    return saved, result


def test_keeps_only_the_inputs_its_gradients_read(graph):
    """X * A's gradient in X reads A, not X: X is not kept (a chain of linear aggregations keeps none of its
    steps' inputs), and the gradients stay right; where X's own gradient reads X, X is kept."""
    X = te.placeholder((N, 3), dtype="float64", name="X")
    A = te.placeholder((E, 1), dtype="float64", name="A")
    linear = fg.spmm(graph, lambda s, t, e: te.compute((3,), lambda i: X[s, i] * A[e, 0]), "sum")
    square = fg.spmm(graph, lambda s, t, e: te.compute((3,), lambda i: X[s, i] * X[s, i]), "sum")
    x, a = randn(N, 3), randn(E, 1)
    saved, out = saved_inputs(lambda: linear(X=x, A=a.detach()))
    assert not any(t is x for t in saved) and any(t.shape == a.shape for t in saved)
    saved, _ = saved_inputs(lambda: linear(X=x, A=a))  # A's gradient reads X
    assert any(t is x for t in saved)
    saved, _ = saved_inputs(lambda: square(X=x))
    assert any(t is x for t in saved)
    src, dst = graph.coo()
    grad = torch.randn_like(out)
    dense = reduce_messages(x[src] * a.detach()[:, :1], dst, N, "sum")
    expected = torch.autograd.grad(dense, x, grad)[0]
    torch.testing.assert_close(torch.autograd.grad(out, x, grad)[0], expected)
    assert gradcheck(lambda t: linear(X=t, A=a.detach()), (x,))
