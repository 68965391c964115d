"""``Kernel`` calls under ``torch.compile``: the ``featgraph::kernel`` operator (opcheck, gradients through
``featgraph::kernel_backward``) and a compiled function agreeing with the eager kernel, for every template."""

import gc
import weakref

import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import te
from featgraph.templates import edge_sum
from featgraph.templates.kernel import registered
from tests.conftest import random_edges

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
