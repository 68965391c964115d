"""The winner-scatter gradient of max/min aggregations against dense autograd, gradcheck and the masked form."""

import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import te
from featgraph.templates import gradients
from featgraph.templates.winner import ARG, WinnerKernel, private_copy_bytes
from tests.conftest import assert_gpu_target_agrees, random_edges
from tests.templates.reference import reduce_messages

N, E = 13, 60
F64 = torch.float64


@pytest.fixture(scope="module")
def graph():
    src, dst = random_edges(N, E, seed=5)  # isolated vertices, a duplicate edge, a self loop
    return fg.Graph(src, dst, N)


def randn(*shape):
    return torch.randn(*shape, dtype=F64).requires_grad_()


def placeholders(**shapes):
    return {name: te.placeholder(shape, dtype="float64", name=name) for name, shape in shapes.items()}


def weighted_heads():
    """Sources, edges and destinations: ``X[s, h, i] * A[e, h] - B[t, h]``, two heads of width 3."""
    p = placeholders(X=(N, 2, 3), A=(E, 2), B=(N, 2))
    udf = lambda s, t, e: te.compute((2, 3), lambda h, i: p["X"][s, h, i] * p["A"][e, h] - p["B"][t, h])  # noqa: E731
    inputs = {"X": randn(N, 2, 3), "A": randn(E, 2), "B": randn(N, 2)}
    dense = lambda src, dst, x: x["X"][src] * x["A"].unsqueeze(-1) - x["B"][dst].unsqueeze(-1)  # noqa: E731
    return udf, inputs, dense


def mlp():
    """The MLP aggregation: a free axis (k) beside a pinned one (i) in the weight's gradient."""
    p = placeholders(XV=(N, 4), W=(4, 5))

    def udf(s, t, e):
        k = te.reduce_axis((0, 4), name="k")
        return te.compute((5,), lambda i: te.max(te.sum((p["XV"][s, k] + p["XV"][t, k]) * p["W"][k, i], axis=k), 0))

    inputs = {"XV": randn(N, 4), "W": randn(4, 5)}
    dense = lambda src, dst, x: torch.relu((x["XV"][src] + x["XV"][dst]) @ x["W"])  # noqa: E731
    return udf, inputs, dense


def pinned_weights():
    """Dense weights pinned on every axis (no free axis) and one read at a constant row."""
    p = placeholders(X=(N, 2, 3), D=(2, 3), C=(4, 3))
    udf = lambda s, t, e: te.compute((2, 3), lambda h, i: p["X"][s, h, i] * p["D"][h, i] + p["C"][1, i])  # noqa: E731
    inputs = {"X": randn(N, 2, 3), "D": randn(2, 3), "C": randn(4, 3)}
    dense = lambda src, dst, x: x["X"][src] * x["D"] + x["C"][1]  # noqa: E731
    return udf, inputs, dense


CASES = {"weighted-heads": weighted_heads, "mlp": mlp, "pinned-weights": pinned_weights}


@pytest.mark.parametrize("reducer", ["max", "min"])
@pytest.mark.parametrize("case", CASES)
def test_matches_dense_autograd(graph, case, reducer):
    udf, inputs, dense = CASES[case]()
    kernel = fg.spmm(graph, udf, reducer)
    for p in kernel.spec.op.placeholders:
        assert all(isinstance(part, WinnerKernel) for _, part in gradients.gradient_kernels(kernel, p, "float64"))
    upstream = torch.randn(N, *kernel.spec.op.shape, dtype=F64)
    names = list(inputs)
    ours = torch.autograd.grad((kernel(**inputs) * upstream).sum(), [inputs[n] for n in names])
    src, dst = graph.coo()
    reference = reduce_messages(dense(src, dst, inputs), dst, N, reducer)
    want = torch.autograd.grad((reference * upstream).sum(), [inputs[n] for n in names])
    for name, got, expected in zip(names, ours, want, strict=True):
        torch.testing.assert_close(got, expected, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("case", CASES)
def test_gradcheck(graph, case):
    udf, inputs, _ = CASES[case]()
    kernel = fg.spmm(graph, udf, "max")
    names = list(inputs)
    assert gradcheck(lambda *xs: kernel(**dict(zip(names, xs, strict=True))), tuple(inputs.values()))


def test_same_as_the_masked_gradient(graph, monkeypatch):
    udf, inputs, _ = weighted_heads()
    upstream = torch.randn(N, 2, 3, dtype=F64)
    results = []
    for budget in (gradients.PRIVATE_COPY_BUDGET, -1):  # -1: no winner kernel fits, every role is masked
        monkeypatch.setattr(gradients, "PRIVATE_COPY_BUDGET", budget)
        kernel = fg.spmm(graph, udf, "max")
        kinds = {
            type(part)
            for p in kernel.spec.op.placeholders
            for _, part in gradients.gradient_kernels(kernel, p, "float64")
        }
        assert (WinnerKernel in kinds) == (budget >= 0)
        results.append(torch.autograd.grad((kernel(**inputs) * upstream).sum(), list(inputs.values())))
    for winner, masked in zip(*results, strict=True):
        torch.testing.assert_close(winner, masked)


def test_sites_pinned_differently_fall_back_to_masking(graph):
    """``X[s, i] * X[s, 0]``: one site's axis follows the output, the other's is a constant row."""
    X = te.placeholder((N, 3), dtype="float64", name="X")
    kernel = fg.spmm(graph, lambda s, t, e: te.compute((3,), lambda i: X[s, i] * X[s, 0]), "max")
    assert gradients.winner_terms(kernel, X, "float64") is None
    assert not any(isinstance(part, WinnerKernel) for _, part in gradients.gradient_kernels(kernel, X, "float64"))
    assert gradcheck(lambda x: kernel(X=x), (randn(N, 3),))


def test_copies_split_columns_between_threads_and_need_no_private_copies(graph):
    udf, inputs, _ = mlp()
    kernel = fg.spmm(graph, udf, "max")
    X = te.placeholder((N, 3), dtype="float64", name="X")
    copy = fg.spmm(graph, lambda s, t, e: te.compute((3,), lambda i: X[s, i]), "max")
    (_, part), *_ = gradients.gradient_kernels(copy, X, "float64")
    assert part.spec.params.owns_columns and private_copy_bytes(part.spec.params, "float64", "cpu", 4) == 0
    xv = next(p for p in kernel.spec.op.placeholders if p.name == "XV")
    for _, part in gradients.gradient_kernels(kernel, xv, "float64"):  # every output element adds into all of x's row
        assert not part.spec.params.owns_columns
        assert private_copy_bytes(part.spec.params, "float64", "cpu", 4) == (
            3 * N * 4 * 8 if part.spec.params.shared else 0
        )


def test_thread_counts_agree_and_runs_repeat_exactly():
    src, dst = random_edges(400, 6000, seed=2)
    g = fg.Graph(src, dst, 400)
    X = te.placeholder((400, 7), name="X")
    x, upstream = torch.randn(400, 7, requires_grad=True), torch.randn(400, 7)
    grads = []
    for threads in (1, 2, 2):
        kernel = fg.spmm(g, lambda s, t, e: te.compute((7,), lambda i: X[s, i]), "max", num_threads=threads)
        grads.append(torch.autograd.grad((kernel(X=x) * upstream).sum(), x)[0])
    torch.testing.assert_close(grads[0], grads[1])
    assert torch.equal(grads[1], grads[2])


def test_graph_without_edges_gets_zero_gradients():
    g = fg.Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 5)
    X, W = te.placeholder((5, 3), dtype="float64", name="X"), te.placeholder((3,), dtype="float64", name="W")
    kernel = fg.spmm(g, lambda s, t, e: te.compute((3,), lambda i: X[s, i] * W[i]), "min")
    x, w = randn(5, 3), randn(3)
    gx, gw = torch.autograd.grad(kernel(X=x, W=w).sum(), (x, w))
    assert torch.equal(gx, torch.zeros_like(x)) and torch.equal(gw, torch.zeros_like(w))


def test_needs_the_winners(graph):
    X = te.placeholder((N, 3), dtype="float64", name="X")
    kernel = fg.spmm(graph, lambda s, t, e: te.compute((3,), lambda i: X[s, i]), "max")
    (_, part), *_ = gradients.gradient_kernels(kernel, X, "float64")
    grad = torch.ones(N, 3, dtype=F64)
    with pytest.raises(TypeError, match=ARG):
        part.evaluate({"fg_grad": grad}, want_arg=False)
    with pytest.raises(TypeError, match=ARG):
        part.evaluate({"fg_grad": grad, ARG: torch.zeros(N, 3, dtype=torch.int32)}, want_arg=False)


@pytest.mark.parametrize("case", CASES)
def test_gpu_template_agrees_with_cpu(graph, case, gpu):
    udf, inputs, _ = CASES[case]()
    names = list(inputs)
    with fg.default_target("gpu"):
        kernel = fg.spmm(graph.to(gpu), udf, "max")
    assert all(
        isinstance(part, WinnerKernel)
        for _, part in gradients.gradient_kernels(kernel, kernel.spec.op.placeholders[0], "float64")
    )

    def fn(g, *xs):
        return fg.spmm(g, udf, "max")(**dict(zip(names, xs, strict=True)))

    assert_gpu_target_agrees(fn, graph, tuple(inputs.values()), gpu)


@pytest.mark.parametrize("target", ["cpu", "gpu"])
@pytest.mark.parametrize("reducer", ["max", "min"])
def test_nan_and_identity_messages_route_the_gradient_to_one_edge(graph, reducer, target, request):
    """An element whose messages are all the identity (-inf for max) takes its whole gradient at its first
    in-edge, one with NaN messages at its first NaN edge (torch.max's index, not torch.amax's even split or
    NaN everywhere): the gradient lands on one edge. Checked for both factors of an edge x source product."""
    if target == "gpu":
        request.getfixturevalue("interpreted_gpu")
    src, dst = graph.coo()
    identity = float("-inf") if reducer == "max" else float("inf")
    a = torch.randn(E, 3, dtype=F64)
    into = {v: torch.nonzero(dst == v).squeeze(1) for v in range(N)}
    busy = [v for v in range(N) if len(into[v]) >= 2]
    a[into[busy[0]]] = identity
    a[into[busy[1]][1:], 0] = float("nan")
    a[into[busy[2]], 1] = float("nan")
    p = placeholders(A=(E, 3), X=(N, 3))
    with fg.default_target(target):
        kernel = fg.spmm(graph, lambda s, t, e: te.compute((3,), lambda i: p["A"][e, i] * p["X"][s, i]), reducer)
        x = torch.rand(N, 3, dtype=F64).add(0.5).requires_grad_()
        a.requires_grad_()
        upstream = torch.randn(N, 3, dtype=F64)
        grad_a, grad_x = torch.autograd.grad(kernel(A=a, X=x), (a, x), upstream)
    messages = (a * x[src]).detach()
    want_a, want_x = torch.zeros(E, 3, dtype=F64), torch.zeros(N, 3, dtype=F64)
    for v in busy:
        for i in range(3):
            column = messages[into[v], i]
            nan = torch.nonzero(column.isnan())
            best = column.max() if reducer == "max" else column.min()
            e = into[v][nan[0, 0] if len(nan) else torch.nonzero(column == best)[0, 0]]
            want_a[e, i] += upstream[v, i] * x[src[e], i].detach()
            want_x[src[e], i] += upstream[v, i] * a[e, i].detach()
    rest = [v for v in range(N) if len(into[v]) == 1]
    for v in rest:
        e = into[v][0]
        want_a[e] += upstream[v] * x[src[e]].detach()
        want_x[src[e]] += upstream[v] * a[e].detach()
    torch.testing.assert_close(grad_a, want_a)
    torch.testing.assert_close(grad_x, want_x, equal_nan=True)
